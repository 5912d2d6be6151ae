"""The pipeline-parallel examples run end to end on 2 CPU processes through the launcher."""

import re
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = [sys.executable, "-m", "accel_launch.cli", "launch", "--quiet", "--num_processes", "2"]


def test_prepare_pippy_is_exposed_at_accel_inference():
    import accel.inference
    import accel_pipeline

    assert accel.inference.prepare_pippy is accel_pipeline.prepare_pippy
    assert "prepare_pippy" in accel.inference.__all__


def _max_difference(out: str) -> float:
    found = re.search(r"max abs difference with the unsplit model: (\S+)", out)
    assert found, out
    return float(found.group(1))


@pytest.mark.multiprocess
def test_pippy_gpt2_on_two_processes():
    pytest.importorskip("transformers", reason="the example builds a transformers model")
    out = run_command([*LAUNCH, str(ROOT / "examples/pippy_gpt2.py")], timeout=300).stdout
    assert "split points: ['transformer.h.1']" in out
    assert "logits shape: (2, 3)" in out
    assert _max_difference(out) <= 1e-5
    # Only the last process prints: the output lives there.
    assert out.count("logits shape") == 1


@pytest.mark.multiprocess
def test_pippy_llama_on_two_processes():
    pytest.importorskip("transformers", reason="the example builds a transformers model")
    out = run_command([*LAUNCH, str(ROOT / "examples/pippy_llama.py")], timeout=300).stdout
    assert "split points: ['model.layers.2']" in out
    assert "logits shape: (4, 32, 512)" in out
    assert _max_difference(out) <= 1e-5
    # gather_output=True: both processes hold the same logits.
    tokens = re.findall(r"process (\d): next tokens (\[[^\]]*\])", out)
    assert sorted(rank for rank, _ in tokens) == ["0", "1"], out
    assert tokens[0][1] == tokens[1][1], out
