"""Where the FSDP2 step goes on gloo: collectives per step (calls, MiB, ms) for DDP and FSDP2
variants, the same collectives timed alone (the floor), and the step time of each variant.

Run (2 gloo processes per variant, each variant in fresh processes, rows of one run compared):

    uv sync --all-packages --group bench
    uv run python benchmarks/engines/bench_fsdp_profile.py [--steps 10] [--dim 512] \
        [--depth 12] [--batch 32] [--out benchmarks/results/engines_fsdp.md]

The model and loop are those of ``bench_fsdp.py`` (``depth`` residual MLP blocks, one FSDP2 unit
per block, AdamW). After the timed steps each variant runs ``PROFILED`` more steps with the
collectives counted: FSDP2's synchronous ``all_gather_into_tensor`` / ``reduce_scatter_tensor``
/ ``all_to_all_single`` calls are wrapped and timed where they are called (the training thread
waits for each one), DDP's bucket all-reduces run on gloo's thread while the backward pass goes
on, so they are read from ``torch.profiler`` (the ``gloo:all_reduce`` events on that thread).
Then every (collective, size) seen is timed alone, ``REPEATS`` times back to back on both
processes: the floor of that collective at that size on this machine, now.

The section is written into the results page between ``BEGIN`` and ``END`` markers; the rest of
the page (written by ``bench_fsdp.py``) is kept.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fsdp import _local_state_mib, _model, torchrun_command  # the same model and run

PROFILED = 2
"""Steps run with the collectives counted, after the timed steps."""
REPEATS = 7
"""Back-to-back runs of each collective alone; the median is the floor."""
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


# --------------------------------------------------------------------- one variant, in torchrun
class _TorchReduceScatter:
    """torch's own gloo path (``reduce_scatter_tensor``), to measure accel's previous default."""

    def allocate(self, size, *, dtype, device):
        import torch

        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        import torch.distributed as dist

        return dist.reduce_scatter_tensor(
            output_tensor, input_tensor, op=op, group=group, async_op=async_op
        )


class _Counter:
    """Counts, sizes and times the synchronous collectives FSDP2 calls (on the caller)."""

    NAMES = {
        "all_gather_single": "all_gather_into_tensor",
        "all_gather_into_tensor": "all_gather_into_tensor",
        "reduce_scatter_single": "reduce_scatter_tensor",
        "reduce_scatter_tensor": "reduce_scatter_tensor",
        "all_to_all_single": "all_to_all_single",
    }

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []  # (collective, bytes moved, seconds)
        self.active = False
        self._depth = 0  # one collective may call another (an alias): count the outer one
        self._saved: dict[str, object] = {}

    def install(self) -> None:
        import torch.distributed as dist

        for attr, name in self.NAMES.items():
            if hasattr(dist, attr):
                self._saved[attr] = getattr(dist, attr)
                setattr(dist, attr, self._wrap(self._saved[attr], name))

    def _wrap(self, function, name):
        def counted(*args, **kwargs):
            if not self.active or self._depth:
                return function(*args, **kwargs)
            label = f"{name} (async)" if kwargs.get("async_op") else name
            tensors = [a for a in (*args, *kwargs.values()) if hasattr(a, "numel")]
            size = max(t.numel() * t.element_size() for t in tensors)  # the full buffer
            self._depth += 1
            try:
                start = time.perf_counter()
                result = function(*args, **kwargs)
                self.calls.append((label, size, time.perf_counter() - start))
            finally:
                self._depth -= 1
            return result

        return counted


def _group_blocks(model, size: int) -> None:
    """Put ``size`` consecutive blocks in one ``Sequential`` (same parameters, same function):
    each becomes one FSDP2 unit."""
    import torch

    blocks = list(model.blocks)
    model.blocks = torch.nn.ModuleList(
        torch.nn.Sequential(*blocks[i : i + size]) for i in range(0, len(blocks), size)
    )


def _prepare(args, options: dict):
    """The Accelerator, model and optimizer of a variant (accel's engine, then the variant's
    changes through torch's public FSDP2 methods)."""
    import torch
    from accel import Accelerator
    from accel.utils import FullyShardedDataParallelPlugin as Plugin

    kwargs: dict = {"cpu": True}
    if options.get("mode") != "ddp":
        plugin = {
            "fsdp_version": 2,
            "auto_wrap_policy": "transformer_based_wrap",
            "transformer_cls_names_to_wrap": ["Block"],
            "state_dict_type": "SHARDED_STATE_DICT",
            "reshard_after_forward": options.get("reshard", True),
        }
        if options.get("group"):
            plugin["transformer_cls_names_to_wrap"] = ["Sequential"]
        kwargs["fsdp_plugin"] = Plugin(**plugin)
    acc = Accelerator(**kwargs)
    torch.manual_seed(0)
    model = _model(args.dim, args.depth)()
    if options.get("group"):
        _group_blocks(model, options["group"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, opt = acc.prepare(model, opt)
    fsdp_modules = [m for m in model.modules() if hasattr(m, "set_custom_reduce_scatter")]
    if options.get("torch_rs"):
        for module in fsdp_modules:
            module.set_custom_reduce_scatter(_TorchReduceScatter())
    if options.get("prefetch"):
        # torch's private switch: all-gathers return at once and are waited for at use, so the
        # next block's all-gather runs on gloo's thread while this block computes.
        for module in fsdp_modules:
            module._set_unshard_async_op(True)
        blocks = list(model.blocks)
        for block, after in zip(blocks, blocks[1:]):
            block.set_modules_to_forward_prefetch([after])
            after.set_modules_to_backward_prefetch([block])
    if options.get("keep_ends"):
        model.set_reshard_after_forward(False, recurse=False)
        model.blocks[-1].set_reshard_after_forward(False)
    return acc, model, opt


def child(args: argparse.Namespace) -> None:
    """One variant on this process (started by torchrun): time, count, then time alone."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    options = VARIANTS[args.variant]
    counter = _Counter()
    counter.install()  # before prepare: FSDP2 looks the collectives up at call time
    acc, model, opt = _prepare(args, options)
    g = torch.Generator().manual_seed(acc.process_index)

    state: list[float] = []

    def step(last: bool = False) -> float:
        x = torch.randn(args.batch, args.dim, generator=g)
        dist.barrier()
        start = time.perf_counter()
        acc.backward(model(x).pow(2).mean())
        opt.step()
        if last:
            state.append(_local_state_mib(model, opt))  # gradients still held
        opt.zero_grad()
        elapsed = torch.tensor(time.perf_counter() - start, dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        return elapsed.item()

    times = [step() for _ in range(args.steps + 2)][2:]
    ddp = options.get("mode") == "ddp"
    counter.active = not ddp
    profiler = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    with profiler if ddp else nullcontext():
        for index in range(PROFILED):
            step(last=index == PROFILED - 1)
    counter.active = False
    calls = list(counter.calls)
    if ddp:
        calls = [
            ("all_reduce (DDP buckets)", _event_bytes(e), e.cpu_time_total / 1e6)
            for e in profiler.events()
            if e.name == "gloo:all_reduce" and _event_bytes(e) > 1024
        ]
    kinds = _per_step(calls)
    floors = _floors(calls)
    report = [None] * dist.get_world_size()
    dist.all_gather_object(report, (kinds, floors))
    if acc.is_main_process:
        result = {
            "variant": args.variant,
            "step_ms": statistics.median(times) * 1000,
            "step_min_ms": min(times) * 1000,
            "state_mib": state[0],
            "kinds": report[0][0],
            "floors": report[0][1],
            "load": os.getloadavg()[0],
        }
        print("RESULT " + json.dumps(result), flush=True)


def _event_bytes(event) -> int:
    shapes = [s for s in (event.input_shapes or []) if s]
    if not shapes:
        return 0
    numel = 1
    for dim in shapes[0]:
        numel *= dim
    return numel * 4  # fp32 gradients


def _per_step(calls: list[tuple[str, int, float]]) -> dict[str, dict]:
    """Calls, MiB and ms per step of each collective, and the sizes seen."""
    kinds: dict[str, dict] = {}
    for name, size, seconds in calls:
        kind = kinds.setdefault(name, {"calls": 0, "mib": 0.0, "ms": 0.0, "sizes": {}})
        kind["calls"] += 1 / PROFILED
        kind["mib"] += size / 2**20 / PROFILED
        kind["ms"] += seconds * 1000 / PROFILED
        kind["sizes"][str(size)] = kind["sizes"].get(str(size), 0) + 1 / PROFILED
    return kinds


def _floors(calls: list[tuple[str, int, float]]) -> dict[str, float]:
    """ms of each (collective, size) seen, run alone: the median of ``REPEATS`` runs."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    floors = {}
    for name, size in sorted({(name, size) for name, size, _ in calls}):
        numel = size // 4
        full, part, out = torch.randn(numel), torch.randn(numel // world), torch.empty(numel)
        run = functools.partial(_collective, name, full, part, out)
        samples = []
        for _ in range(REPEATS):
            dist.barrier()
            start = time.perf_counter()
            run()
            samples.append(time.perf_counter() - start)
        floors[f"{name}|{size}"] = statistics.median(samples) * 1000
    return floors


def _collective(name: str, full, part, out) -> None:
    """One run of collective ``name`` on buffers of the profiled size."""
    import torch.distributed as dist

    if name.startswith("all_reduce"):
        dist.all_reduce(full)
    elif name.startswith("all_gather_into_tensor"):
        dist.all_gather_into_tensor(full, part)
    elif name.startswith("reduce_scatter_tensor"):
        dist.reduce_scatter_tensor(part, full)
    else:
        dist.all_to_all_single(out, full)


# --------------------------------------------------------------------------------- the driver
def driver(args: argparse.Namespace) -> None:
    """Run every variant in fresh processes, ``--rounds`` times in turn, and write the section."""
    runs: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
    for round_index in range(args.rounds):
        for index, variant in enumerate(VARIANTS):
            result = _run_variant(args, variant, 29650 + 20 * round_index + index)
            runs[variant].append(result)
            print(round_index, {k: v for k, v in result.items() if k != "floors"}, flush=True)
    rows = []
    for results in runs.values():
        ok = [r for r in results if "error" not in r]
        if not ok:
            rows.append(results[0])
            continue
        ok.sort(key=lambda r: r["step_ms"])
        row = dict(ok[(len(ok) - 1) // 2])  # the profile of the median round
        row["rounds_ms"] = [r["step_ms"] for r in results if "error" not in r]
        row["step_ms"] = statistics.median(row["rounds_ms"])
        row["step_min_ms"] = min(r["step_min_ms"] for r in ok)
        row["load"] = statistics.mean(r["load"] for r in ok)
        rows.append(row)
    print("ROWS " + json.dumps(rows), flush=True)  # --render re-writes the page from this
    _write(args, rows)


def _run_variant(args: argparse.Namespace, variant: str, port: int) -> dict:
    """One variant on 2 fresh processes: its RESULT line, or the error that stopped it."""
    command = torchrun_command(__file__, port, variant, args)
    env = {**os.environ, "OMP_NUM_THREADS": "1", **VARIANTS[variant].get("env", {})}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"variant": variant, "error": tail[:160]}
    return json.loads(lines[0][len("RESULT ") :])


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


def _write(args: argparse.Namespace, rows: list[dict]) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--render", help=argparse.SUPPRESS)  # a ROWS json: write the page only
    parser.add_argument("--variant", default="DDP", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="runs of every variant, in turn")
    parser.add_argument("--out", default="benchmarks/results/engines_fsdp.md")
    args = parser.parse_args()
    if args.child:
        child(args)
    elif args.render:
        _write(args, json.loads(Path(args.render).read_text()))
    else:
        driver(args)


if __name__ == "__main__":
    main()
