"""Megatron-LM pieces that run in one process: the train steps' batches, masks and losses (with
the plugin's custom functions), the abstract step's refusals, and the engine's refusals of
settings it would not act on (the 2-process run is ``tests/test_megatron_engine.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from accel_state import MegatronLMPlugin

from accel import Accelerator
from accel._engines._parallel_layout import megatron_runs_distributed, resolve_megatron_plugin
from accel._engines.megatron._megatron import check_plugin
from accel._engines.megatron._megatron_steps import megatron_args
from accel.utils import (
    AbstractTrainStep,
    BertTrainStep,
    GPTTrainStep,
    T5TrainStep,
    avg_losses_across_data_parallel_group,
)

pytestmark = pytest.mark.skipif(
    __import__("importlib").util.find_spec("megatron") is None,
    reason='needs megatron-core: pip install "accel-torch[megatron]"',
)


class TinyGPT(torch.nn.Module):
    """Returns per-token losses, as a Megatron GPT model does when given labels."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(16, 16)

    def forward(self, tokens, position_ids, attention_mask, labels):
        assert attention_mask.shape == (1, 1, tokens.shape[1], tokens.shape[1])
        logits = self.embed(tokens)
        return F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")


def _accelerator(**fields) -> Accelerator:
    return Accelerator(cpu=True, megatron_lm_plugin=MegatronLMPlugin(**fields))


def test_gpt_step_shifts_masks_and_averages_the_loss():
    accelerator = _accelerator(eod_mask_loss=True)
    args = megatron_args(
        accelerator.state.megatron_lm_plugin, model_return_dict=False, eos_token_id=9
    )
    step = GPTTrainStep(accelerator, args)
    tokens, labels, loss_mask, attention_mask, position_ids = step.get_batch(
        iter([{"input_ids": torch.tensor([[1, 9, 3]])}])
    )
    assert tokens.tolist() == [[1, 9, 3]] and labels.tolist() == [[9, 3, 9]]
    assert loss_mask.tolist() == [[1.0, 0.0, 1.0]]  # the end-of-document token is masked
    assert attention_mask[0, 0].tolist() == [
        [False, True, True],
        [False, False, True],
        [False, False, False],
    ]
    assert position_ids.tolist() == [[0, 1, 2]]
    model = TinyGPT()
    output, loss_func = step.forward_step(iter([{"input_ids": torch.tensor([[1, 2, 3]])}]), model)
    loss, report = loss_func(output)
    assert torch.allclose(loss, output.mean()) and torch.equal(report["lm loss"], loss.detach())
    assert torch.equal(avg_losses_across_data_parallel_group([loss]), loss.detach().view(1))


def test_custom_functions_replace_the_steps_own():
    def batch(data_iterator):
        return "custom batch"

    def loss(*args):
        return "custom loss"

    accelerator = _accelerator(custom_get_batch_function=batch, custom_loss_function=loss)
    args = megatron_args(accelerator.state.megatron_lm_plugin, model_return_dict=False)
    for cls in (GPTTrainStep, T5TrainStep):
        step = cls(accelerator, args)
        assert step.get_batch is batch and step.loss_func is loss
    bert = BertTrainStep(accelerator, args)
    assert bert.get_batch is batch and bert.loss_func is loss


def test_bert_losses_and_t5_masks():
    accelerator = _accelerator()
    plugin = accelerator.state.megatron_lm_plugin
    regression = BertTrainStep(
        accelerator,
        megatron_args(plugin, model_return_dict=False, pretraining_flag=False, num_labels=1),
    )
    labels, logits = torch.tensor([1.0, 2.0]), torch.tensor([[1.5], [2.0]])
    assert torch.allclose(regression.loss_func(labels, logits)[0], torch.tensor(0.125))
    classes = BertTrainStep(
        accelerator,
        megatron_args(plugin, model_return_dict=False, pretraining_flag=False, num_labels=3),
    )
    logits = torch.tensor([[2.0, 0.0, 0.0]])
    loss, report = classes.loss_func(torch.tensor([0]), logits)
    assert torch.allclose(loss, F.cross_entropy(logits, torch.tensor([0])))
    assert set(report) == {"loss"}
    pretrain = BertTrainStep(accelerator, megatron_args(plugin, model_return_dict=False))
    lm = torch.tensor([[1.0, 3.0]])
    loss, report = pretrain.loss_func(torch.tensor([[1.0, 0.0]]), None, (lm, None))
    assert loss.item() == 1.0 and set(report) == {"lm loss"}

    t5 = T5TrainStep(accelerator, megatron_args(plugin, model_return_dict=False))
    batch = {
        "input_ids": torch.tensor([[5, 6, 0]]),
        "attention_mask": torch.tensor([[1, 1, 0]]),
        "labels": torch.tensor([[7, 8, -100]]),
    }
    enc, dec, loss_mask, labels, enc_mask, dec_mask, enc_dec_mask = t5.get_batch(iter([batch]))
    assert dec.tolist() == [[0, 7, 8]] and loss_mask.tolist() == [[1.0, 1.0, 0.0]]
    assert enc_mask.shape == (1, 3, 3) and enc_mask[0, 2].tolist() == [True, True, True]
    assert dec_mask[0].tolist() == [[False, True, True], [False, False, True], [False] * 3]
    assert enc_dec_mask[0, 0].tolist() == [False, False, True]


def test_refusals_state_the_rule_and_the_fix():
    step = AbstractTrainStep("mine")
    for call in (
        lambda: step.get_batch_func(None, False),
        step.get_forward_step_func,
        lambda: step.get_loss_func(None),
    ):
        with pytest.raises(NotImplementedError, match="subclass AbstractTrainStep"):
            call()
    with pytest.raises(NotImplementedError, match=r"recompute_activations': True.*Leave them at"):
        check_plugin(MegatronLMPlugin(recompute_activations=True))
    with pytest.raises(NotImplementedError, match=r"other_megatron_args': \['swiglu'\]"):
        check_plugin(MegatronLMPlugin(other_megatron_args={"swiglu": True, "eos_token_id": 0}))
    check_plugin(MegatronLMPlugin(other_megatron_args={"eos_token_id": 0}))
    with pytest.raises(ValueError, match="cannot be combined"):
        resolve_megatron_plugin(MegatronLMPlugin(), other_engine=True)
    with pytest.raises(ValueError, match=r"tp_degree=2 splits each layer over more processes"):
        megatron_runs_distributed(MegatronLMPlugin(tp_degree=2), 1)
    assert megatron_runs_distributed(MegatronLMPlugin(), 1) is False
