"""transformers' ``from_pretrained(device_map="auto")`` with disk offload, accel against the
reference, and the in-memory load as the floor.

A small Llama is built from a config and saved once with ``save_pretrained`` (safetensors).
Each side loads it in fresh interpreters, ``repeats`` times each (a new offload folder every
time), with ``max_memory={"cpu": budget}`` where the budget holds about half the weights, so the
rest goes to disk; the floor is ``from_pretrained`` with no ``device_map``, timed in the same
interpreters. The page cache holds the saved files after the first load: these are warm loads.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
from typing import Any

from _eco_trainer import environment

SAVE = textwrap.dedent(
    """
    import json, sys, torch
    from transformers import LlamaConfig, LlamaForCausalLM
    hidden, layers, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=4096, hidden_size=hidden,
        intermediate_size=hidden * 8 // 3, num_hidden_layers=layers, num_attention_heads=8,
        num_key_value_heads=4, max_position_embeddings=256, tie_word_embeddings=False))
    model.save_pretrained(path)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    print("RESULT " + json.dumps({"bytes": size}), flush=True)
    """
)

WORKER = textwrap.dedent(
    """
    import gc, json, sys, tempfile, time, torch
    from transformers import AutoModelForCausalLM
    path, budget, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ids = torch.arange(16).unsqueeze(0)
    offload, floor, devices, same = [], [], {}, []
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(path).eval()(ids).logits
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(path, device_map="auto",
                max_memory={"cpu": budget}, offload_folder=folder)
            offload.append(time.perf_counter() - start)
            devices = {}
            for device in model.hf_device_map.values():
                devices[str(device)] = devices.get(str(device), 0) + 1
            with torch.no_grad():
                same.append(bool(torch.allclose(model.eval()(ids).logits, want)))
            del model
            gc.collect()
        start = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(path)
        floor.append(time.perf_counter() - start)
        del model
        gc.collect()
    import accelerate
    print("RESULT " + json.dumps({"offload_s": offload, "floor_s": floor, "devices": devices,
        "same_logits": all(same), "accelerate": accelerate.__file__}), flush=True)
    """
)


def _result(argv: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{what} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    result: dict[str, Any] = json.loads(lines[0][len("RESULT ") :])
    return result


def run_all(work: str, hidden: int, layers: int, repeats: int, runs: int) -> dict[str, Any]:
    """Save the model once, then load it on each side ``runs`` times, alternating."""
    path = os.path.join(work, "llama")
    saved = _result(
        [sys.executable, "-c", SAVE, str(hidden), str(layers), path],
        environment(False),
        "saving the model",
    )
    budget = saved["bytes"] // 2
    script = os.path.join(work, "load_worker.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(WORKER)
    sides: dict[str, list[dict]] = {"accel": [], "reference": []}
    for _ in range(runs):
        for side in sides:
            result = _result(
                [sys.executable, script, path, str(budget), str(repeats)],
                environment(side == "accel"),
                f"loading on {side}",
            )
            if ("/accel/" in result["accelerate"]) != (side == "accel"):
                raise SystemExit(f"the {side} load ran on the wrong side: {result['accelerate']}")
            if not result["same_logits"]:
                raise SystemExit(f"the {side} offloaded model's logits differ from the saved one")
            sides[side].append(result)
            print(f"  load {side}: {result['offload_s']} floor {result['floor_s']}", flush=True)
    return {"bytes": saved["bytes"], "budget": budget, "sides": sides}


def table(found: dict[str, Any], hidden: int, layers: int, repeats: int, runs: int) -> list[str]:
    """The markdown of the load table."""
    mib = found["bytes"] / 2**20

    def row(label: str, times: list[float], devices: str) -> str:
        ms = [t * 1000 for t in times]
        return (
            f"| {label} | {statistics.median(ms):.0f} | {min(ms):.0f} | {max(ms):.0f} | "
            f"{len(ms)} | {devices} |"
        )

    def placed(side: str) -> str:
        devices = found["sides"][side][-1]["devices"]
        return ", ".join(f"{k}: {v}" for k, v in sorted(devices.items()))

    floor = [t for side in found["sides"].values() for r in side for t in r["floor_s"]]
    return [
        f'### `from_pretrained(device_map="auto")` with disk offload ({mib:.0f} MiB Llama)',
        "",
        f"A Llama of hidden size {hidden} and {layers} layers ({mib:.1f} MiB of fp32 weights), "
        'saved once with `save_pretrained`, loaded with `max_memory={"cpu": '
        f"{found['budget']}}}` (half the weights) and an `offload_folder`: the rest goes to "
        f"disk. {runs} fresh interpreters per side, alternating, {repeats} loads in each (warm "
        "page cache); the offloaded model's logits were checked equal to the in-memory "
        "model's. Floor: `from_pretrained` with no `device_map`, timed in the same "
        "interpreters (both sides).",
        "",
        "| load | median ms | min | max | loads | modules per device |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
        row(
            "accel, device_map=auto + disk",
            [t for r in found["sides"]["accel"] for t in r["offload_s"]],
            placed("accel"),
        ),
        row(
            "reference, device_map=auto + disk",
            [t for r in found["sides"]["reference"] for t in r["offload_s"]],
            placed("reference"),
        ),
        row("in-memory load, no device_map (floor)", floor, "cpu: all"),
    ]
