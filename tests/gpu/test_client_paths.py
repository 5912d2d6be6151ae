"""The clients' most common GPU paths on accel and on the reference, side by side.

transformers' ``from_pretrained(device_map="auto")`` with no ``max_memory``, a ``Trainer`` in
bf16, PEFT LoRA through the ``Trainer`` and bitsandbytes 4-bit through transformers: each runs in
a fresh interpreter per side (``_client_paths_child.py``), accel through
``accel.install_as_accelerate()``, the reference as installed. accel must give what the reference
gives (the same device map, logits and losses). The CPU variant runs in the dry run, so the
paths that do not need CUDA are exercised everywhere; on the GPU the rows and their times go to
``$GPU_CHECK_OUT/clients-DEVICE.json`` for the results page.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _gpu_models import DEVICES

CHILD = Path(__file__).with_name("_client_paths_child.py")


def _run(side: str, device: str, folder: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env.update(ACCEL_AS_ACCELERATE="0", PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1")
    env.update(TOKENIZERS_PARALLELISM="false", ACCEL_BIGMODEL_QUIET="1")
    done = subprocess.run(
        [sys.executable, str(CHILD), side, device, str(folder)],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and len(lines) == 1, (done.stdout + done.stderr)[-6000:]
    return json.loads(lines[0][len("RESULT ") :])


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6) for x, y in zip(a, b)
    )


def _differences(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    if "error" in theirs or "skipped" in theirs:
        return []  # nothing to match: the reference could not run this path here either
    if "error" in mine or "skipped" in mine:
        return [mine.get("error") or f"skipped: {mine['skipped']}"]
    found = []
    if mine.get("device_map") != theirs.get("device_map"):
        found.append(f"device map {mine.get('device_map')} != {theirs.get('device_map')}")
    for key in ("logits", "losses"):
        if key in theirs and not _close(mine.get(key, []), theirs[key]):
            found.append(f"{key} {mine.get(key)} != {theirs[key]}")
    return found


@pytest.mark.timeout(900)
@pytest.mark.parametrize("device", DEVICES)
def test_client_paths_match_the_reference(device: str, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="the reference side needs accelerate installed")
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=512,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    folder = tmp_path / "llama"
    transformers.LlamaForCausalLM(config).save_pretrained(folder)

    sides = {side: _run(side, device, folder) for side in ("accel", "reference")}
    rows = []
    problems = {}
    for name, theirs in sides["reference"]["paths"].items():
        mine = sides["accel"]["paths"].get(name, {"error": "not run"})
        rows.append({"path": name, "accel": mine, "reference": theirs})
        if found := _differences(mine, theirs):
            problems[name] = found
    out = os.environ.get("GPU_CHECK_OUT")
    if out:
        record = {"device": device, "versions": sides["reference"]["versions"], "rows": rows}
        Path(out, f"clients-{device}.json").write_text(json.dumps(record, indent=1), "utf-8")
    assert not problems, json.dumps(problems, indent=1)
