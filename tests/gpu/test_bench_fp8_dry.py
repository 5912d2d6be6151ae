"""The FP8 benchmark part (tools/gpu_checks/_bench_fp8.py): its dry run on the CPU, and one FP8
step of each library on a GPU.

The dry run starts one process per row that runs (the three bf16 rows); the FP8 rows and the
compiled ones say why they did not run.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "gpu_checks"))
import _bench_fp8

HAVE_REFERENCE = importlib.util.find_spec("accelerate") is not None


def test_dry_run_trains_bf16_and_skips_fp8_with_a_reason():
    if torch.cuda.is_available():
        pytest.skip("on a CUDA machine the benchmark step runs this part at its GPU sizes")
    settings = dict(_bench_fp8.DRY_SIZES, device="cpu")
    start = time.monotonic()
    results = _bench_fp8.run_all(settings, timeout=60, deadline=start + 120)
    print(f"dry run of the FP8 part: {time.monotonic() - start:.1f} s")
    rows = results["rows"]
    assert set(rows) == set(_bench_fp8.VARIANTS)
    assert results["settings"]["device"] == "cpu"
    for side in _bench_fp8.SIDES:
        figure = rows["bf16"][side]
        if side == "reference" and not HAVE_REFERENCE:
            assert "not installed" in figure["skipped"]
            continue
        assert "error" not in figure and "skipped" not in figure, (side, figure)
        losses = figure["losses"]
        assert len(losses) == settings["steps"]
        assert all(math.isfinite(x) for x in losses), (side, losses)
        assert losses[-1] <= losses[0], (side, losses)
        assert figure["tokens_per_second"] > 0
        assert figure["untrained_parameters"] == 0
    for variant in ("fp8", "fp8+compile", "bf16+compile"):
        for side, figure in rows[variant].items():
            assert set(figure) == {"skipped"}, (variant, side, figure)
            assert len(figure["skipped"]) > 20, (variant, side, figure)
    assert "CUDA" in rows["fp8"]["accel"]["skipped"]
    lines = _bench_fp8.markdown(results)
    assert lines[0].startswith("### FP8 training")
    assert any(line.startswith("| bf16 | accel | ") for line in lines)
    assert any("skipped: FP8 training" in line for line in lines)


@pytest.mark.cuda
def test_one_fp8_step_on_each_library():
    if importlib.util.find_spec("torchao") is None:
        pytest.skip("needs torchao, which is not installed here: pip install torchao")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip(
            f"FP8 needs compute capability >= 8.9; got {torch.cuda.get_device_capability()}"
        )
    settings = {
        "model": {"vocab": 512, "width": 256, "hidden": 512, "layers": 2},
        "batch": 2,
        "tokens": 64,
        "steps": 1,
        "warmup": 0,
        "lr": 1e-3,
        "device": "cuda",
    }
    sides = ["accel"] + (["reference"] if HAVE_REFERENCE else [])
    figures = {side: _bench_fp8.run_one(side, "fp8", settings, timeout=120) for side in sides}
    for side, figure in figures.items():
        assert "error" not in figure and "skipped" not in figure, (side, figure)
        assert math.isfinite(figure["last_loss"]), (side, figure)
        assert figure["fp8_layers"] > 0, (side, figure)
        assert figure["untrained_parameters"] == 0, (side, figure)
    layers = {figure["fp8_layers"] for figure in figures.values()}
    assert len(layers) == 1, f"the libraries converted different layers: {figures}"
