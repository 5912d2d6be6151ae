"""The 7B-class benchmark part (``tools/gpu_checks/_bench_llm.py``) at its tiny CPU sizes.

Every step runs as on the GPU: the sharded checkpoint is written, each side loads it through
transformers in a fresh interpreter (accel through ``accel.install_as_accelerate()``) and decodes
greedily, all on the CPU and with half of the layers offloaded (to the disk here), and the floor
is measured. Both sides must give the same tokens.
"""

from __future__ import annotations

import importlib.machinery
import sys
import time
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "gpu_checks"


@pytest.mark.timeout(300)
def test_llm_part_runs_and_both_sides_give_the_same_tokens() -> None:
    for name in ("transformers", "accelerate"):
        if importlib.machinery.PathFinder.find_spec(name) is None:
            pytest.skip(f"{name} is not installed")
    sys.path.insert(0, str(TOOLS))
    try:
        import _bench_llm as bench
    finally:
        sys.path.remove(str(TOOLS))

    settings = {**bench.DRY_SIZES, "device": "cpu"}
    results = bench.run_all(settings, timeout=240, deadline=time.monotonic() + 280)

    assert "checkpoint_bytes" in results["prepare"], results["prepare"]
    for scenario, sides in results["rows"].items():
        for side, figures in sides.items():
            assert "error" not in figures and "skipped" not in figures, (scenario, side, figures)
    assert results["tokens_equal"] == {"gpu": True, "half": True}, results["rows"]
    half = results["rows"]["half"]["accel"]
    layers = settings["config"]["num_hidden_layers"]
    assert half["layers_per_device"] == {"cpu": layers // 2, "disk": layers - layers // 2}
    floor = results["rows"]["half"]["floor"]
    assert floor["seconds_per_token"] >= floor["compute_seconds_per_token"] > 0
    text = "\n".join(bench.markdown(results))
    assert "| accel |" in text and "| reference |" in text and "floor: max(" in text
