"""What ``bench_fsdp_profile.py`` measures and how it reports it: the variants, the counts, the
table of collectives per step against their floors, what it concludes, and the page."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PROFILED = 2
"""Steps run with the collectives counted, after the timed steps."""
REPEATS = 7
"""Back-to-back runs of each collective alone; the median is the floor."""
_MMAP = {"MALLOC_MMAP_THRESHOLD_": "65536"}
"""The allocator setting of ``bench_fsdp.py`` (RSS follows live memory): every freed buffer of
64 KiB or more goes back to the system, so each new one is fresh pages the kernel must zero."""

VARIANTS: dict[str, dict] = {
    "DDP": {"mode": "ddp"},
    "DDP, MALLOC_MMAP_THRESHOLD_=65536": {"mode": "ddp", "env": _MMAP},
    "FSDP2, torch's gloo reduce-scatter (accel before)": {"torch_rs": True},
    "FSDP2, torch's gloo reduce-scatter, MALLOC_MMAP_THRESHOLD_=65536": {
        "torch_rs": True,
        "env": _MMAP,
    },
    "FSDP2, all-to-all reduce-scatter (accel default)": {},
    "FSDP2, + root and last block kept after forward": {"keep_ends": True},
    "FSDP2, + 2 blocks per unit": {"group": 2},
    "FSDP2, + reshard_after_forward=False": {"reshard": False},
    "FSDP2, + async all-gathers, prefetch 1 block ahead (torch private switch)": {"prefetch": True},
}
"""Rows of the table: DDP, accel's FSDP2 before and now, and each change tried on top."""

HOW = [
    "How it is measured. FSDP2 on a CPU device calls its collectives synchronously (there are "
    "no streams to overlap them on), so the wrapped `all_gather_single` / "
    "`reduce_scatter_single` / `all_to_all_single` calls give each collective's cost as the "
    "training thread pays it, waiting for the other process included. DDP's bucket "
    "all-reduces run on gloo's thread while the backward pass goes on: their time is that "
    "thread's `gloo:all_reduce` events in `torch.profiler` (busy time, partly hidden behind "
    "the backward pass). Calls marked `(async)` are timed until they return, not until "
    "they complete (the wait is at use). The floor is each (collective, size) run alone on "
    "both processes "
    f"(median of {REPEATS}) times its calls per step. MiB are the full buffers: the all-gather "
    "output, the reduce-scatter input, the all-reduce buffer. The rows marked "
    "`MALLOC_MMAP_THRESHOLD_=65536` run with that allocator setting (RSS then follows live "
    "memory; earlier runs of the table above used it); the other rows use glibc's default, as "
    "a training script and the table above do.",
]
BEGIN = "<!-- bench_fsdp_profile.py: begin -->"
END = "<!-- bench_fsdp_profile.py: end -->"


def _floor_ms(row: dict, name: str, kind: dict) -> float:
    """The floor of one step's calls of a collective: each size's count x its alone-time."""
    return sum(
        count * row["floors"][f"{name}|{size}"]
        for size, count in kind["sizes"].items()
        if f"{name}|{size}" in row["floors"]
    )


def _section(args: argparse.Namespace, rows: list[dict]) -> list[str]:
    ok = [r for r in rows if "error" not in r]
    ddp = next((r["step_ms"] for r in ok if r["variant"] == "DDP"), None)
    lines = [
        BEGIN,
        "## Where the FSDP2 step goes on gloo (`bench_fsdp_profile.py`)",
        "",
        "Command: `uv run python benchmarks/engines/bench_fsdp_profile.py "
        f"--steps {args.steps} --dim {args.dim} --depth {args.depth} --batch {args.batch}` "
        f"(same model as above, {args.steps} timed steps after 2 warm-up steps, then "
        f"{PROFILED} counted steps, every variant run {args.rounds} times in turn; the load "
        f"average is the 1-minute one at the end of each run, on {os.cpu_count()} cores).",
        "",
        *HOW,
        "",
        "### Step time, side by side (one run)",
        "",
        "| variant | step ms (median of rounds / min) | x DDP | collectives ms per step "
        "(measured) | floor of those collectives (ms, run alone) | params + grads + AdamW "
        "state per process (MiB) | step ms, each round | load average |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['variant']} | failed: `{row['error']}` | | | | | | |")
            continue
        comm = sum(k["ms"] for k in row["kinds"].values())
        floor = sum(_floor_ms(row, n, k) for n, k in row["kinds"].items())
        ratio = f"{row['step_ms'] / ddp:.2f}" if ddp else ""
        each = " ; ".join(f"{ms:.0f}" for ms in row["rounds_ms"])
        lines.append(
            f"| {row['variant']} | {row['step_ms']:.0f} / {row['step_min_ms']:.0f} | {ratio} "
            f"| {comm:.0f} | {floor:.0f} | {row['state_mib']:.0f} | {each} "
            f"| {row['load']:.1f} |"
        )
    lines += ["", "### Collectives per step, by type", ""]
    lines += [
        "| variant: collective | calls per step | MiB per step (full buffers) | sizes (MiB "
        "x calls) | ms per step (measured) | ms per step (floor, run alone) |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in ok:
        for name, kind in sorted(row["kinds"].items()):
            sizes = ", ".join(
                f"{int(size) / 2**20:.2f} x {count:g}"
                for size, count in sorted(kind["sizes"].items(), key=lambda s: -int(s[0]))
            )
            lines.append(
                f"| {row['variant']}: `{name}` | {kind['calls']:g} | {kind['mib']:.0f} "
                f"| {sizes} | {kind['ms']:.0f} | {_floor_ms(row, name, kind):.0f} |"
            )
    return [*lines, "", *_conclusion(rows), END]


def _conclusion(rows: list[dict]) -> list[str]:
    """What the rows show, with their numbers."""
    by = {r["variant"]: r for r in rows if "error" not in r}
    keys = list(VARIANTS)
    ddp, ddp_mmap, before, before_mmap, now, ends, pairs, keep, early = (by.get(k) for k in keys)
    if not (ddp and ddp_mmap and before and before_mmap and now and ends and pairs and keep):
        return ["(a row failed: no conclusion from this run)"]

    def ms(row: dict) -> str:
        return f"{row['step_ms']:.0f} ms"

    def vs_now(row: dict) -> str:
        """The row's step against accel's default, in words."""
        change = row["step_ms"] / now["step_ms"] - 1
        if abs(change) < 0.05:
            return f"{ms(row)}, within 5% of the default: no gain measurable here"
        return f"{ms(row)}, {abs(change):.0%} {'slower' if change > 0 else 'faster'}"

    def x(row: dict, base: dict) -> str:
        return f"{row['step_ms'] / base['step_ms']:.2f}x"

    def floor(row: dict, name: str) -> float:
        return _floor_ms(row, name, row["kinds"][name])

    def kind(row: dict, name: str) -> dict:
        return row["kinds"][name]

    ag, rs, a2a = "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"
    ar = "all_reduce (DDP buckets)"
    rs_each = floor(before, rs) / kind(before, rs)["calls"]
    a2a_each = floor(now, a2a) / kind(now, a2a)["calls"]
    comm_floor = floor(now, ag) + floor(now, a2a)
    state = (ddp["state_mib"], now["state_mib"])
    model_mib = ddp["state_mib"] / 4  # parameters, gradients and two AdamW moments
    block_mib = max(int(size) for size in kind(now, ag)["sizes"]) / 2**20
    sent = (kind(now, ag)["mib"] + kind(now, a2a)["mib"]) / 2
    ratio = now["step_ms"] / ddp["step_ms"]
    verdict = "within the 1.5x asked" if ratio <= 1.5 else "still above the 1.5x asked"
    early_ms = f" ({vs_now(early)})" if early else ""
    return [
        "What the profile shows:",
        "",
        f"- Per step FSDP2 runs {kind(now, ag)['calls']:g} all-gathers "
        f"({kind(now, ag)['mib']:.0f} MiB: each block's {block_mib:.0f} MiB before its forward and "
        "again "
        "before its backward, and the root's head twice, since accel passes "
        "`reshard_after_forward=True` to the root as the reference does) and "
        f"{kind(now, a2a)['calls']:g} reduce-scatters ({kind(now, a2a)['mib']:.0f} MiB). DDP runs "
        f"{kind(ddp, ar)['calls']:g} all-reduces of its ~25 MiB buckets "
        f"({kind(ddp, ar)['mib']:.0f} MiB). Sent per process on 2 processes: DDP's ring "
        f"all-reduce sends the model once ({model_mib:.0f} MiB), FSDP2 half of each buffer "
        f"({sent:.0f} MiB): {sent / model_mib:.1f}x DDP's bytes by construction.",
        "- torch runs gloo's `reduce_scatter_tensor` as a `gloo:all_reduce` of the whole input "
        "(that is the event `torch.profiler` shows for it) and then copies out the kept chunk: "
        f"alone, {rs_each:.1f} ms per {block_mib:.0f} MiB reduce-scatter against {a2a_each:.1f} ms "
        "for the "
        "`all_to_all_single` that sends each process only the chunk it keeps. accel now "
        "reduce-scatters that way on gloo (`set_custom_reduce_scatter`; same sums, bit for bit "
        f"on 2 processes): {ms(before)} -> {ms(now)} per step in this run.",
        "- The 2-3x that earlier runs of the table above showed came mostly from "
        "`MALLOC_MMAP_THRESHOLD_=65536`: on CPU "
        "there is no caching allocator, and FSDP2 allocates every all-gather output and every "
        "unsharded parameter anew for each unit, twice per step; with the threshold each of "
        f"those {block_mib:.0f} MiB buffers is fresh pages the kernel must zero and map. Same "
        "run: FSDP2 "
        f"(before) {ms(before_mmap)} with the setting against {ms(before)} without; DDP, which "
        f"reuses its buckets, {ms(ddp_mmap)} against {ms(ddp)}. Ratio to DDP with the setting: "
        f"{x(before_mmap, ddp_mmap)}; without it: {x(before, ddp)}.",
        f"- Options on top, and what they cost: keeping the root and the last block gathered "
        f"after forward saves {kind(now, ag)['calls'] - kind(ends, ag)['calls']:g} all-gathers "
        f"({vs_now(ends)}); the peak is unchanged (backward gathers them first thing) but a forward "
        "without backward would leave them gathered, so it is not the default. 2 blocks per "
        f"unit halves the calls, not the bytes ({vs_now(pairs)}; its all-gathers of twice the size take "
        f"{floor(pairs, ag):.0f} ms per step even alone, against {floor(now, ag):.0f} ms), and gathers 2 blocks at a time "
        f"(+{block_mib:.0f} MiB at the peak). `reshard_after_forward=False` (a plugin field) drops "
        "the "
        f"backward all-gathers ({kind(keep, ag)['calls']:g} left, {vs_now(keep)}) and holds every "
        f"block's full parameters from its forward to its backward: +{model_mib / 2:.0f} MiB per "
        "process at the peak here (the whole model's parameters, as DDP); gradients and AdamW "
        "state stay "
        f"sharded ({state[1]:.0f} MiB per process against DDP's {state[0]:.0f} MiB). Async "
        "all-gathers with prefetch need a private torch switch (`_set_unshard_async_op`)"
        f"{early_ms}: accel does not use a private switch.",
        "",
        f"Conclusion: accel's FSDP2 step is {ms(now)}, {x(now, ddp)} DDP's {ms(ddp)} in this "
        f"run, {verdict}, with the all-to-all reduce-scatter (now the default on gloo). "
        f"What is left is gloo's: FSDP2's collectives take {comm_floor:.0f} ms per step "
        f"even run alone with nothing else (DDP's: {floor(ddp, ar):.0f} ms), since it moves "
        f"{sent / model_mib:.1f}x DDP's bytes and, on CPU, waits for each one instead of "
        "overlapping it with compute.",
    ]


def write_page(args: argparse.Namespace, rows: list[dict]) -> None:
    page = Path(args.out)
    text = page.read_text() if page.exists() else "# Engines: DDP vs FSDP2\n"
    before = text.split(BEGIN)[0].rstrip("\n")
    after = text.split(END, 1)[1].lstrip("\n") if END in text else ""
    section = _section(args, rows)
    page.write_text("\n".join([before, "", *section, *([after] if after else [])]) + "\n")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(str(page))
    print("\n".join(section))
