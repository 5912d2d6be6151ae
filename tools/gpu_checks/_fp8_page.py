"""The results-page section of the FP8 benchmark (``_bench_fp8.py``): the table, FP8 over bf16
per side and mode, and accel over the reference."""

from __future__ import annotations

from typing import Any

VARIANTS: tuple[str, ...] = ("bf16", "fp8", "bf16+compile", "fp8+compile")
SIDES: tuple[str, ...] = ("accel", "reference", "floor")


def parse_variant(variant: str) -> tuple[str, bool]:
    """``(precision, compiled)`` of a variant name (``"fp8+compile"``: ``("fp8", True)``)."""
    precision, _, extra = variant.partition("+")
    if precision not in ("bf16", "fp8") or extra not in ("", "compile"):
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    return precision, extra == "compile"


def _ran(f: dict[str, Any] | None) -> bool:
    return bool(f) and "tokens_per_second" in f  # type: ignore[operator]


def _text(f: dict[str, Any] | None) -> str:
    if not f:
        return "-"
    text = f.get("error") or f"skipped: {f.get('skipped', 'no result')}"
    return " ".join(str(text).split()).replace("|", "/")[:200]


def _count(n: float) -> str:
    mantissa, exponent = f"{n:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f} GiB"


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if _ran(a) and _ran(b):
        return a["tokens_per_second"] / b["tokens_per_second"]  # type: ignore[index]
    return None


def _baseline(variant: str) -> str:
    return "bf16+compile" if parse_variant(variant)[1] else "bf16"


def speedups(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per side and mode (``eager``, ``compiled``): fp8 tokens/s over bf16 tokens/s and the
    last-step loss of fp8 minus bf16's (None where a row did not run)."""
    rows = results["rows"]
    out: dict[str, dict[str, Any]] = {}
    for side in SIDES:
        out[side] = {}
        for mode, fp8, bf16 in (
            ("eager", "fp8", "bf16"),
            ("compiled", "fp8+compile", "bf16+compile"),
        ):
            a, b = rows.get(fp8, {}).get(side), rows.get(bf16, {}).get(side)
            gap = a["last_loss"] - b["last_loss"] if _ran(a) and _ran(b) else None  # type: ignore[index]
            out[side][mode] = {"speedup": _ratio(a, b), "loss_gap": gap}
    return out


def markdown(results: dict[str, Any]) -> list[str]:
    """The section of the results page: every row, then where FP8 wins and by how much."""
    s, rows = results["settings"], results["rows"]
    m = s["model"]
    first = next(
        (f for sides in rows.values() for f in sides.values() if _ran(f) and "parameters" in f),
        None,
    )
    params = f", {_count(first['parameters'])} parameters" if first else ""
    recipe = (
        "`AORecipeKwargs(config=Float8LinearConfig())` (torchao's defaults on both sides"
        if s.get("fp8_config", "library") == "torchao"
        else "`AORecipeKwargs()` (each library's defaults"
    )
    optimizer = (
        "AdamW built before `prepare(model, optimizer)`"
        if s.get("optimizer_before_prepare")
        else "AdamW built from the prepared model's parameters"
    )
    compile_how = "regional" if s.get("compile", "regional") == "regional" else "whole-model"
    lines = [
        f"### FP8 training that pays (torchao Float8Linear against bf16, on {s.get('device', '?')})",
        "",
        f"{m['layers']} decoder blocks of width {m['width']}, MLP {m['hidden']}, vocabulary "
        f"{m['vocab']}{params}; {optimizer}; a fixed batch of {s['batch']} x {s['tokens']} tokens; "
        f"{s['steps']} steps, tokens/s the median of the last {s['steps'] - s['warmup']} (the "
        f'first {s["warmup"]} are warm-up). FP8: `mixed_precision="fp8"` with '
        f"{recipe}; first and last linear layers stay bf16). "
        f'Compiled: `TorchDynamoPlugin(backend="{s.get("compile_backend", "inductor")}")`, '
        f"{compile_how} compilation, a cold cache in each process; compile s = the warm-up "
        "steps' time beyond a warm step. vs bf16 = tokens/s over the same side's bf16 row of "
        "the same mode (eager or compiled).",
        "",
        "| variant | side | tokens/s | step s | vs bf16 | loss first -> last | peak memory "
        "| compile s | fp8 layers |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for variant, sides in rows.items():
        texts = {_text(sides.get(side)) for side in SIDES}
        if not any(_ran(sides.get(side)) for side in SIDES) and len(texts) == 1:
            lines.append(f"| {variant} | every side | {texts.pop()} | | | | | | |")
            continue
        for side in SIDES:
            f = sides.get(side)
            if not _ran(f):
                lines.append(f"| {variant} | {side} | {_text(f)} | | | | | | |")
                continue
            assert f is not None
            ratio = _ratio(f, rows.get(_baseline(variant), {}).get(side))
            compile_s = f.get("compile_seconds")
            layers = f"{f.get('fp8_layers', 0)} of {f.get('linear_layers', '?')}"
            if f.get("fp8_weight_class") and f["fp8_weight_class"] != "Parameter":
                layers += f" ({f['fp8_weight_class']} weights)"
            if f.get("untrained_parameters"):
                layers += f"; {_count(f['untrained_parameters'])} parameters never updated"
            lines.append(
                f"| {variant} | {side} | {f['tokens_per_second']:,.0f} | "
                f"{f['step_seconds']:.4f} | {'-' if ratio is None else f'{ratio:.2f}x'} | "
                f"{f['first_loss']:.4f} -> {f['last_loss']:.4f} | {_gib(f.get('peak_bytes'))} | "
                f"{'-' if compile_s is None else f'{compile_s:.1f}'} | {layers} |"
            )
    gains = speedups(results)
    table = [
        "",
        "FP8 over bf16 (tokens/s ratio; loss gap = fp8's last loss minus bf16's):",
        "",
        "| side | eager | compiled | loss gap eager | loss gap compiled |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += table
    wins, losses = [], []
    for side in SIDES:
        cells = []
        for mode in ("eager", "compiled"):
            ratio = gains[side][mode]["speedup"]
            if ratio is None:
                cells.append("-")
                continue
            cells.append(f"{ratio:.2f}x")
            (wins if ratio > 1 else losses).append(f"{side} {mode} ({(ratio - 1) * 100:+.0f} %)")
        gaps = [
            "-" if g["loss_gap"] is None else f"{g['loss_gap']:+.4f}"
            for g in (gains[side]["eager"], gains[side]["compiled"])
        ]
        if cells == ["-", "-"] and gaps == ["-", "-"]:
            continue
        lines.append(f"| {side} | {cells[0]} | {cells[1]} | {gaps[0]} | {gaps[1]} |")
    if lines[-1] == table[-1]:
        del lines[-len(table) :]
        lines += ["", "FP8 over bf16: no side ran both an fp8 and a bf16 row."]
    elif wins or losses:
        lines += [
            "",
            f"FP8 wins: {', '.join(wins) or 'nowhere'}. "
            f"FP8 loses: {', '.join(losses) or 'nowhere'}.",
        ]
    versus = []
    for variant, sides in rows.items():
        ratio = _ratio(sides.get("accel"), sides.get("reference"))
        if ratio is not None:
            versus.append(f"{variant} {ratio:.2f}x")
    if versus:
        lines += ["", f"accel tokens/s over the reference's: {', '.join(versus)}."]
    return lines
