"""prepare_pippy on one process, argument and input checks, and trace errors (no process group)."""

from __future__ import annotations

import pytest
import torch
from toy_models import ToyLM, Untraceable, toy_inputs

from accel_pipeline import PipelineTraceError, prepare_pippy
from accel_pipeline._inputs import check_call, input_signature, iter_rounds, merge_rounds
from accel_pipeline._trace import trace_pipeline


def test_one_process_runs_the_whole_model() -> None:
    torch.manual_seed(0)
    model = ToyLM().eval()
    x = toy_inputs(3)
    expected = model(x)
    prepared = prepare_pippy(model, example_args=(toy_inputs(2),))
    assert prepared is model and model.pippy_split_points == []
    out = model(x)
    assert torch.equal(out["logits"], expected["logits"])
    assert not out["logits"].requires_grad


def test_one_process_rejects_split_points_for_more_stages() -> None:
    with pytest.raises(ValueError, match="1 processes need 0 split points; got 1"):
        prepare_pippy(ToyLM(), split_points=["blocks.1"], example_args=(toy_inputs(2),))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_num_chunks_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match=f"positive integer; got {bad!r}"):
        prepare_pippy(ToyLM(), example_args=(toy_inputs(2),), num_chunks=bad)  # type: ignore[arg-type]


def test_example_inputs_need_a_tensor_with_one_batch_size() -> None:
    with pytest.raises(ValueError, match="at least one tensor"):
        prepare_pippy(ToyLM())
    with pytest.raises(ValueError, match="same batch size"):
        prepare_pippy(ToyLM(), example_kwargs={"ids": toy_inputs(2), "mask": torch.ones(3, 6)})


def test_calls_must_match_the_example_but_the_batch_size() -> None:
    sig = input_signature((toy_inputs(2),), {"mask": torch.ones(2, 6)})
    assert check_call(sig, (toy_inputs(7),), {"mask": torch.ones(7, 6)}) == 7
    with pytest.raises(ValueError, match=r"traced with \['mask'\], called with \[\]"):
        check_call(sig, (toy_inputs(2),), {})
    with pytest.raises(ValueError, match=r"args\[0\] has shape \(2, 5\)"):
        check_call(sig, (toy_inputs(2, seq=5),), {"mask": torch.ones(2, 6)})
    with pytest.raises(
        ValueError, match=r"kwargs\['mask'\] has shape \(2, 6\) and dtype torch.int64"
    ):
        check_call(sig, (toy_inputs(2),), {"mask": torch.ones(2, 6, dtype=torch.int64)})
    with pytest.raises(ValueError, match=r"kwargs\['mask'\] has 3 rows, an earlier input has 2"):
        check_call(sig, (toy_inputs(2),), {"mask": torch.ones(3, 6)})
    with pytest.raises(ValueError, match="batch size of 0"):
        check_call(sig, (toy_inputs(0),), {"mask": torch.ones(0, 6)})


def test_rounds_pad_with_the_last_row_and_outputs_drop_the_padding() -> None:
    x = torch.arange(5).unsqueeze(1)
    rounds = list(iter_rounds((x,), {}, 5, 2))
    assert [r[0][0].flatten().tolist() for r in rounds] == [[0, 1], [2, 3], [4, 4]]
    merged = merge_rounds([[r[0][0] * 10] for r in rounds], 5)
    assert merged[0].flatten().tolist() == [0, 10, 20, 30, 40]


def test_untraceable_forward_names_the_module_and_leaves_the_model_unchanged() -> None:
    model = Untraceable().eval()
    x = toy_inputs(1)
    with pytest.raises(PipelineTraceError) as info:
        trace_pipeline(model, ["blocks.1"], (x,), None)
    err = info.value
    assert err.module_name == "blocks.1.gate" and err.module_class == "DataDependentGate"
    assert "DataDependentGate.forward of submodule 'blocks.1.gate'" in str(err)
    assert "forward" not in model.blocks[1].__dict__
    assert "_orig_forward" not in model.blocks[1].__dict__
    assert model(x).shape == (1, 6, 3)


def test_tracing_leaves_split_modules_unchanged_and_stages_compute_the_model() -> None:
    model = ToyLM().eval()
    x = toy_inputs(1)
    pipe = trace_pipeline(model, ["blocks.2"], (x,), None)
    assert pipe.num_stages == 2
    assert "forward" not in model.blocks[2].__dict__
    # The stages, run one after the other in this process: the no_grad region of
    # ``positions`` is inlined and the head (stage 1) still reads the input ids.
    with torch.no_grad():
        logits, hidden = pipe(x)
    expected = model(x)
    assert torch.equal(logits, expected["logits"]) and torch.equal(hidden, expected["hidden"])
    # A second trace of the same model works (the split mark was removed).
    assert trace_pipeline(model, ["blocks.1"], (toy_inputs(1),), None).num_stages == 2
