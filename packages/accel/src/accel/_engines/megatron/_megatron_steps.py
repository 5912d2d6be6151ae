"""Megatron-LM train steps: how a batch is read, the forward step called, and the loss computed
for GPT, BERT and T5 models, as megatron-core's schedules expect them
(``forward_step(data_iterator, model) -> (output, loss_func)``, ``loss_func(output) -> (loss,
{name: averaged loss})``).

The plugin's ``custom_get_batch_function`` and ``custom_loss_function`` replace the step's own.
Batches from a transformers-style loader (``input_ids``, ``attention_mask``, ``labels`` ...) are
read on every rank; Megatron-format batches (``megatron_dataset_flag``) are broadcast from the
first tensor-parallel rank by megatron-core's ``tensor_parallel.broadcast_data`` (CUDA).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from ._megatron_objects import avg_losses_across_data_parallel_group, import_megatron_core


def _plugin(accelerator: Any) -> Any:
    return accelerator.state.megatron_lm_plugin


def megatron_args(plugin: Any, **overrides: Any) -> argparse.Namespace:
    """The namespace the train steps read: the plugin's Megatron arguments, with the defaults
    of the keys they need."""
    values = {
        "megatron_dataset_flag": plugin.megatron_dataset_flag,
        "pretraining_flag": True,
        "num_labels": 2,
        "bert_binary_head": False,
        "model_return_dict": True,
        "return_logits": plugin.return_logits,
        "eos_token_id": 0,
        "reset_position_ids": False,
        "reset_attention_mask": False,
        "eod_mask_loss": plugin.eod_mask_loss,
        "context_parallel_size": 1,
        "check_for_nan_in_loss_and_grad": True,
    }
    values.update(plugin.megatron_lm_default_args)
    values.update(overrides)
    return argparse.Namespace(**values)


def _broadcast(keys: list[str], data_iterator: Iterator[Any] | None) -> dict[str, torch.Tensor]:
    tensor_parallel = import_megatron_core("megatron.core.tensor_parallel")
    data = next(data_iterator) if data_iterator is not None else None
    return tensor_parallel.broadcast_data(keys, data, torch.int64)


def causal_masks(
    tokens: torch.Tensor, eod_token: int, eod_mask_loss: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-to-right masks of a token batch.

    Returns:
        ``(attention_mask, loss_mask, position_ids)``: a ``[1, 1, s, s]`` boolean mask that is
        True where attention is forbidden, a float loss mask (0 at end-of-document tokens when
        ``eod_mask_loss``), and positions ``0..s-1`` per row.
    """
    batch, length = tokens.shape
    allowed = torch.tril(torch.ones(length, length, device=tokens.device, dtype=torch.bool))
    attention_mask = ~allowed.view(1, 1, length, length)
    loss_mask = torch.ones(tokens.shape, dtype=torch.float, device=tokens.device)
    if eod_mask_loss:
        loss_mask[tokens == eod_token] = 0.0
    position_ids = torch.arange(length, device=tokens.device).unsqueeze(0).expand(batch, -1)
    return attention_mask, loss_mask, position_ids


class AbstractTrainStep:
    """Batch reading, forward step and loss of one kind of model; subclasses define them.

    Args:
        name: Name of the train step.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def get_batch_func(self, accelerator: Any, megatron_dataset_flag: bool) -> Callable[..., Any]:
        """The function reading one batch from a data iterator."""
        raise NotImplementedError(
            f"{type(self).__name__} must define get_batch_func; subclass AbstractTrainStep and "
            "return a function of the data iterator."
        )

    def get_forward_step_func(self) -> Callable[..., Any]:
        """``forward_step(data_iterator, model) -> (output, loss_func)``."""
        raise NotImplementedError(
            f"{type(self).__name__} must define get_forward_step_func; subclass "
            "AbstractTrainStep and return forward_step(data_iterator, model)."
        )

    def get_loss_func(self, accelerator: Any) -> Callable[..., Any]:
        """``loss_func(..., output) -> (loss, {name: averaged loss})``."""
        raise NotImplementedError(
            f"{type(self).__name__} must define get_loss_func; subclass AbstractTrainStep and "
            "return a loss function."
        )


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.reshape(-1).float()
    return torch.sum(values.float().reshape(-1) * mask) / mask.sum()


class GPTTrainStep(AbstractTrainStep):
    """GPT: the batch is shifted into inputs and next-token labels, the model returns the
    per-token losses (and the logits with ``return_logits``), the loss is their masked mean.

    Args:
        accelerator: The ``Accelerator`` (its plugin's custom functions are used).
        args: Megatron arguments (see `megatron_args`).
    """

    def __init__(self, accelerator: Any, args: Any) -> None:
        super().__init__("GPTTrainStep")
        self.eod_token = args.eos_token_id
        self.pad_token = args.eos_token_id
        self.reset_position_ids = args.reset_position_ids
        self.reset_attention_mask = args.reset_attention_mask
        self.eod_mask_loss = args.eod_mask_loss
        self.return_logits = args.return_logits
        if self.reset_position_ids or self.reset_attention_mask:
            raise NotImplementedError(
                "GPTTrainStep does not reset positions or attention at document boundaries; got "
                f"reset_position_ids={self.reset_position_ids}, reset_attention_mask="
                f"{self.reset_attention_mask}. Leave both False, or pass "
                "custom_get_batch_function in the plugin."
            )
        self.get_batch = self.get_batch_func(accelerator, args.megatron_dataset_flag)
        self.loss_func = self.get_loss_func(accelerator)
        self.forward_step = self.get_forward_step_func()

    def _split(self, tokens_: torch.Tensor) -> tuple[torch.Tensor, ...]:
        labels = tokens_[:, 1:].contiguous()
        tokens = tokens_[:, :-1].contiguous()
        attention_mask, loss_mask, position_ids = causal_masks(
            tokens, self.eod_token, self.eod_mask_loss
        )
        return tokens, labels, loss_mask, attention_mask, position_ids

    def get_batch_func(self, accelerator: Any, megatron_dataset_flag: bool) -> Callable[..., Any]:
        custom = _plugin(accelerator).custom_get_batch_function
        if custom is not None:
            return custom

        def from_megatron(data_iterator: Iterator[Any] | None) -> tuple[torch.Tensor, ...]:
            return self._split(_broadcast(["text"], data_iterator)["text"].long())

        def from_transformers(data_iterator: Iterator[Any]) -> tuple[torch.Tensor, ...]:
            tokens_ = next(data_iterator)["input_ids"].long().to(accelerator.device)
            pad = torch.full((tokens_.shape[0], 1), self.eod_token, dtype=tokens_.dtype)
            return self._split(torch.cat([tokens_, pad.to(tokens_.device)], dim=1))

        return from_megatron if megatron_dataset_flag else from_transformers

    def get_loss_func(self, accelerator: Any) -> Callable[..., Any]:
        custom = _plugin(accelerator).custom_loss_function
        if custom is not None:
            return custom

        def loss_func(loss_mask: torch.Tensor, output_tensor: Any) -> tuple[torch.Tensor, dict]:
            losses, logits = output_tensor if self.return_logits else (output_tensor, None)
            loss = _masked_mean(losses, loss_mask)
            if loss.isnan():
                raise FloatingPointError(
                    f"the GPT loss of rank {torch.distributed.get_rank() if torch.distributed.is_initialized() else 0} "
                    "is NaN before the data-parallel average; got NaN. Check the inputs and the "
                    "learning rate."
                )
            report = {"lm loss": avg_losses_across_data_parallel_group([loss])[0]}
            if logits is not None:
                report["logits"] = logits
            return loss, report

        return loss_func

    def get_forward_step_func(self) -> Callable[..., Any]:
        def forward_step(data_iterator: Any, model: Any) -> tuple[Any, Callable[..., Any]]:
            tokens, labels, loss_mask, attention_mask, position_ids = self.get_batch(data_iterator)
            output = model(tokens, position_ids, attention_mask, labels=labels)
            return output, partial(self.loss_func, loss_mask)

        return forward_step


class BertTrainStep(AbstractTrainStep):
    """BERT: masked-LM (+ sentence-order) loss in pre-training; regression, single-label or
    multi-label classification loss in fine-tuning.

    Args:
        accelerator: The ``Accelerator`` (its plugin's custom functions are used).
        args: Megatron arguments (see `megatron_args`).
    """

    def __init__(self, accelerator: Any, args: Any) -> None:
        super().__init__("BertTrainStep")
        self.num_labels = args.num_labels
        self.get_batch = self.get_batch_func(accelerator, args.megatron_dataset_flag)
        self.loss_func = self.get_loss_func(accelerator, args.pretraining_flag, args.num_labels)
        self.forward_step = self.get_forward_step_func(args.pretraining_flag, args.bert_binary_head)

    def get_batch_func(self, accelerator: Any, megatron_dataset_flag: bool) -> Callable[..., Any]:
        custom = _plugin(accelerator).custom_get_batch_function
        if custom is not None:
            return custom

        def from_megatron(data_iterator: Iterator[Any] | None) -> tuple[Any, ...]:
            keys = ["text", "types", "labels", "is_random", "loss_mask", "padding_mask"]
            data = _broadcast(keys, data_iterator)
            return (
                data["text"].long(),
                data["types"].long(),
                data["is_random"].long(),
                data["loss_mask"].float(),
                data["labels"].long(),
                data["padding_mask"].long(),
            )

        def from_transformers(data_iterator: Iterator[Any]) -> tuple[Any, ...]:
            data = {k: v.to(accelerator.device) for k, v in next(data_iterator).items()}
            labels = data.get("labels")
            types = data.get("token_type_ids")
            order = data.get("next_sentence_label")
            return (
                data["input_ids"].long(),
                None if types is None else types.long(),
                None if order is None else order.long(),
                None if labels is None else (labels != -100).float(),
                None if labels is None else labels.long(),
                data["attention_mask"].long(),
            )

        return from_megatron if megatron_dataset_flag else from_transformers

    def get_loss_func(  # type: ignore[override]  # the reference's signature
        self, accelerator: Any, pretraining_flag: bool, num_labels: int
    ) -> Callable[..., Any]:
        custom = _plugin(accelerator).custom_loss_function
        if custom is not None:
            return custom

        def pretraining(loss_mask: Any, sentence_order: Any, output_tensor: Any) -> Any:
            lm_losses, sop_logits = output_tensor
            lm_loss = _masked_mean(lm_losses, loss_mask)
            if sop_logits is None:
                return lm_loss, {"lm loss": avg_losses_across_data_parallel_group([lm_loss])[0]}
            sop_loss = F.cross_entropy(
                sop_logits.view(-1, 2).float(), sentence_order.view(-1), ignore_index=-1
            )
            averaged = avg_losses_across_data_parallel_group([lm_loss, sop_loss])
            return lm_loss + sop_loss, {"lm loss": averaged[0], "sop loss": averaged[1]}

        def finetuning(labels: torch.Tensor, logits: torch.Tensor) -> Any:
            if num_labels == 1:
                loss = F.mse_loss(logits.view(-1), labels.view(-1))
            elif labels.dtype in (torch.long, torch.int):
                loss = F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
            else:
                loss = F.binary_cross_entropy_with_logits(logits, labels)
            return loss, {"loss": avg_losses_across_data_parallel_group([loss])[0]}

        return pretraining if pretraining_flag else finetuning

    def get_forward_step_func(  # type: ignore[override]  # the reference's signature
        self, pretraining_flag: bool, bert_binary_head: bool
    ) -> Callable[..., Any]:
        def forward_step(data_iterator: Any, model: Any) -> tuple[Any, Callable[..., Any]]:
            tokens, types, order, loss_mask, labels, padding = self.get_batch(data_iterator)
            types = types if bert_binary_head else None
            if pretraining_flag:
                output = model(tokens, padding, tokentype_ids=types, lm_labels=labels)
                return output, partial(self.loss_func, loss_mask, order)
            logits = model(tokens, padding, tokentype_ids=types)
            return logits, partial(self.loss_func, labels)

        return forward_step


class T5TrainStep(AbstractTrainStep):
    """T5: encoder / decoder / cross masks from the batch, the masked mean of the per-token
    losses the model returns.

    Args:
        accelerator: The ``Accelerator`` (its plugin's custom functions are used).
        args: Megatron arguments (see `megatron_args`).
    """

    def __init__(self, accelerator: Any, args: Any) -> None:
        super().__init__("T5TrainStep")
        self.get_batch = self.get_batch_func(accelerator, args.megatron_dataset_flag)
        self.loss_func = self.get_loss_func(accelerator)
        self.forward_step = self.get_forward_step_func()

    @staticmethod
    def attn_mask_postprocess(attention_mask: torch.Tensor) -> torch.Tensor:
        """``[b, s]`` padding mask -> ``[b, s, s]`` mask, True where attention is forbidden."""
        return (attention_mask.unsqueeze(1) * attention_mask.unsqueeze(2)) < 0.5

    @staticmethod
    def get_decoder_mask(seq_length: int, device: Any) -> torch.Tensor:
        """``[1, s, s]`` causal mask, True above the diagonal."""
        return torch.tril(torch.ones((1, seq_length, seq_length), device=device)) < 0.5

    @staticmethod
    def get_enc_dec_mask(
        attention_mask: torch.Tensor, dec_seq_length: int, device: Any
    ) -> torch.Tensor:
        """``[b, s_dec, s_enc]`` mask of the encoder's padding, True where forbidden."""
        batch = attention_mask.shape[0]
        ones = torch.ones((batch, dec_seq_length, 1), device=device)
        return (ones * attention_mask.unsqueeze(1)) < 0.5

    def get_batch_func(self, accelerator: Any, megatron_dataset_flag: bool) -> Callable[..., Any]:
        custom = _plugin(accelerator).custom_get_batch_function
        if custom is not None:
            return custom

        def from_megatron(data_iterator: Iterator[Any] | None) -> tuple[Any, ...]:
            keys = ["text_enc", "text_dec", "labels", "loss_mask", "enc_mask", "dec_mask"]
            data = _broadcast([*keys, "enc_dec_mask"], data_iterator)
            return (
                data["text_enc"].long(),
                data["text_dec"].long(),
                data["loss_mask"].float(),
                data["labels"].long(),
                data["enc_mask"] < 0.5,
                data["dec_mask"] < 0.5,
                data["enc_dec_mask"] < 0.5,
            )

        def from_transformers(data_iterator: Iterator[Any]) -> tuple[Any, ...]:
            data = {k: v.to(accelerator.device) for k, v in next(data_iterator).items()}
            labels = data["labels"].long()
            if "decoder_input_ids" in data:
                tokens_dec = data["decoder_input_ids"].long()
            else:  # labels shifted right, starting with 0, padding (-100) as 0
                tokens_dec = torch.zeros_like(labels)
                tokens_dec[..., 1:] = labels[..., :-1]
                tokens_dec.masked_fill_(tokens_dec == -100, 0)
            padding = data["attention_mask"].long()
            device = tokens_dec.device
            return (
                data["input_ids"].long(),
                tokens_dec,
                (labels != -100).float(),
                labels,
                self.attn_mask_postprocess(padding),
                self.get_decoder_mask(tokens_dec.shape[1], device),
                self.get_enc_dec_mask(padding, tokens_dec.shape[1], device),
            )

        return from_megatron if megatron_dataset_flag else from_transformers

    def get_loss_func(self, accelerator: Any) -> Callable[..., Any]:
        custom = _plugin(accelerator).custom_loss_function
        if custom is not None:
            return custom

        def loss_func(loss_mask: torch.Tensor, output_tensor: torch.Tensor) -> Any:
            loss = _masked_mean(output_tensor, loss_mask)
            return loss, {"lm loss": avg_losses_across_data_parallel_group([loss])[0]}

        return loss_func

    def get_forward_step_func(self) -> Callable[..., Any]:
        def forward_step(data_iterator: Any, model: Any) -> tuple[Any, Callable[..., Any]]:
            enc, dec, loss_mask, labels, enc_mask, dec_mask, enc_dec_mask = self.get_batch(
                data_iterator
            )
            output = model(
                enc, dec, enc_mask, dec_mask, enc_dec_mask, tokentype_ids=None, lm_labels=labels
            )
            return output, partial(self.loss_func, loss_mask)

        return forward_step


__all__ = [
    "AbstractTrainStep",
    "BertTrainStep",
    "GPTTrainStep",
    "T5TrainStep",
    "causal_masks",
    "megatron_args",
]
