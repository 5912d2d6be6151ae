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
from _fsdp_profile_report import PROFILED, REPEATS, VARIANTS, write_page  # beside this file
from bench_fsdp import _local_state_mib, _model, torchrun_command  # the same model and run


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
    write_page(args, rows)


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
        write_page(args, json.loads(Path(args.render).read_text()))
    else:
        driver(args)


if __name__ == "__main__":
    main()
