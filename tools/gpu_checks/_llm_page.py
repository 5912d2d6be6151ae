"""The results-page section of the 7B-class benchmark (``_bench_llm.py``)."""

from __future__ import annotations

import json
from typing import Any

SCENARIOS = ("gpu", "half")
"""The two ways the model is placed: all on the device, and half of its layers offloaded."""

# The results page -----------------------------------------------------------------------------


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _text(f: dict[str, Any]) -> str | None:
    if "error" in f or "skipped" in f:
        return (f.get("error") or f"skipped: {f['skipped']}").replace("|", "/")[:200]
    return None


def _num(value: float | None, fmt: str = "{:.4f}") -> str:
    return "-" if value is None else fmt.format(value)


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "**NO**"


def markdown(results: dict[str, Any]) -> list[str]:
    """The results page's section: the checkpoint, then one table per scenario."""
    s, prep, rows = results["settings"], results.get("prepare", {}), results["rows"]
    c = s["config"]
    lines = [
        f"### A 7B-class model loaded and served ({c['num_hidden_layers']} layers of width "
        f"{c['hidden_size']}, MLP {c['intermediate_size']}, vocabulary {c['vocab_size']}, random "
        "bf16 weights)",
        "",
    ]
    if _text(prep):
        lines += [f"Checkpoint: {_text(prep)}", ""]
    else:
        rate = prep["checkpoint_bytes"] / prep["write_seconds"] / 1e9
        lines += [
            f"Checkpoint: {prep['checkpoint_bytes'] / 1e9:.2f} GB in {prep['shards']} safetensors "
            f"shards, written in {prep['write_seconds']:.1f} s ({rate:.2f} GB/s, into the page "
            f"cache). Prompt of {s['prompt_tokens']} token ids, greedy decoding after a "
            f"{s['warmup_tokens']}-token warm-up; each side in a fresh interpreter, accel through "
            "`accel.install_as_accelerate()`, the reference as installed.",
            "",
        ]
    device = s["device"]
    titles = {
        "gpu": f'All on {device}: `from_pretrained(device_map="auto", dtype=torch.bfloat16)`',
        "half": "Half of the decoder layers offloaded: the same with `max_memory` "
        + (
            f'{{0: {_gib(prep.get("half_budget_bytes"))}, "cpu": {_gib(s.get("cpu_max_memory"))}}}'
            if device == "cuda"
            else f'{{"cpu": {_gib(prep.get("half_budget_bytes"))}}} (the rest on disk)'
        ),
    }
    for scenario in SCENARIOS:
        sides = rows.get(scenario, {})
        lines += [
            f"#### {titles[scenario]}, {s['new_tokens'][scenario]} new tokens",
            "",
        ]
        placed = next(
            (sides[k] for k in ("accel", "reference") if "layers_per_device" in sides.get(k, {})),
            None,
        )
        if scenario == "half" and placed is not None:
            counts = ", ".join(f"{n} on {d}" for d, n in placed["layers_per_device"].items())
            lines += [
                f"Decoder layers: {counts}; offloaded per token: "
                f"{placed['offloaded_bytes'] / 1e9:.2f} GB.",
                "",
            ]
        lines += [
            "| side | load | tokens/s | s/token | floor s/token | ratio to floor | peak device memory | tokens equal |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        floor = sides.get("floor", {})
        floor_token = floor.get("seconds_per_token")
        equal = results.get("tokens_equal", {}).get(scenario)
        for side in ("accel", "reference"):
            f = sides.get(side, {})
            if _text(f):
                lines.append(f"| {side} | {_text(f)} | - | - | - | - | - | - |")
                continue
            per_token = f["seconds_per_token"]
            lines.append(
                f"| {side} | {f['load_seconds']:.1f} s | {f['tokens_per_second']:.2f} | "
                f"{per_token:.4f} | {_num(floor_token)} | "
                f"{_num(floor_token and per_token / floor_token, '{:.2f}')} | "
                f"{_gib(f.get('peak_bytes'))} | {_yes(equal)} |"
            )
        if _text(floor):
            lines.append(f"| floor | {_text(floor)} | - | - | - | - | - | - |")
        else:
            bw = f"{floor['bytes_per_second'] / 1e9:.1f} GB/s ({floor['copy_kind']})"
            compute = floor.get("compute_seconds_per_token")
            compute_text = _num(compute, "{:.4f} s")
            if scenario == "half":
                label = (
                    f"floor: max({floor['offloaded_bytes_per_token'] / 1e9:.2f} GB at {bw} = "
                    f"{floor['transfer_seconds_per_token']:.4f} s, all-on-device time {compute_text})"
                )
            else:
                label = f"floor: the faster side's time per token on the device ({compute_text})"
            rate = floor.get("tokens_per_second")
            lines.append(
                f"| {label} | - | {_num(rate, '{:.2f}')} | {_num(floor_token)} | - | - | - | - |"
            )
        lines.append("")
    matches = results.get("half_matches_gpu", {})
    if any(v is not None for v in matches.values()):
        lines += [
            "The offloaded run's tokens equal the first ones of the all-device run: "
            + ", ".join(f"{side} {_yes(v)}" for side, v in matches.items())
            + ".",
            "",
        ]
    return lines


def brief(figures: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in figures.items() if k not in ("tokens", "other_modules")})
