"""Step time and peak RSS per process: DDP vs FSDP2 in accel, side by side with accelerate.

Run (2 gloo processes per variant, each variant in fresh processes so peak RSS is its own):

    uv sync --all-packages --group bench
    uv run python benchmarks/engines/bench_fsdp.py [--steps 10] [--dim 512] [--depth 12] \
        [--out benchmarks/results/engines_fsdp.md]

Every variant trains the same model (``depth`` residual MLP blocks of width ``dim``, AdamW)
on the same batches. A step is forward + backward + optimizer step; the step time is the
median over ``--steps`` steps after two warm-up steps of the slower process. Peak RSS is
``ru_maxrss`` of each process at the end (model build, prepare and training included).
``rank-0 loading`` builds the weights on process 0 only (the others on the meta device) and
lets FSDP send each process its shard.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

VARIANTS = {
    "accel DDP": ("accel", "ddp"),
    "accel FSDP2": ("accel", "fsdp2"),
    "accel FSDP2, rank-0 loading": ("accel", "fsdp2_rank0"),
    "accelerate DDP": ("accelerate", "ddp"),
    "accelerate FSDP2": ("accelerate", "fsdp2"),
    "accelerate FSDP2, rank-0 loading": ("accelerate", "fsdp2_rank0"),
    "floor: torch DDP, no library": ("torch", "ddp"),
    "floor: torch FSDP2 (fully_shard per block), no library": ("torch", "fsdp2"),
}


class _Plain:
    """What the loop needs of an Accelerator, for the rows that use torch alone."""

    def __init__(self) -> None:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        self.process_index = dist.get_rank()
        self.is_main_process = self.process_index == 0
        self.distributed_type = type("Kind", (), {"value": "torch.distributed"})()

    @staticmethod
    def wrap(model, mode: str):
        """The model in DDP, or sharded with ``fully_shard`` per block and at the root."""
        import torch

        if mode == "ddp":
            return torch.nn.parallel.DistributedDataParallel(model)
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        return fully_shard(model)

    @staticmethod
    def backward(loss) -> None:
        loss.backward()


def _model(dim: int, depth: int):
    import torch

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(dim, 4 * dim)
            self.down = torch.nn.Linear(4 * dim, dim)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(torch.relu(self.up(x)))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block() for _ in range(depth))
            self.head = torch.nn.Linear(dim, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    return Net


def child(args: argparse.Namespace) -> None:
    """One variant on this process (started by torchrun)."""
    import torch

    lib, mode = VARIANTS[args.variant]
    if lib == "torch":
        _plain_child(args, mode)
        return
    if lib == "accel":
        from accel import Accelerator
        from accel.utils import FullyShardedDataParallelPlugin as Plugin
        from accel_bigmodel import init_empty_weights
    else:
        from accelerate import Accelerator, init_empty_weights
        from accelerate.utils import FullyShardedDataParallelPlugin as Plugin

    kwargs = {"cpu": True}
    if mode != "ddp":
        kwargs["fsdp_plugin"] = Plugin(
            fsdp_version=2,
            auto_wrap_policy="transformer_based_wrap",
            transformer_cls_names_to_wrap=["Block"],
            cpu_ram_efficient_loading=mode == "fsdp2_rank0",
            state_dict_type="SHARDED_STATE_DICT",
        )
    acc = Accelerator(**kwargs)
    net_cls = _model(args.dim, args.depth)
    torch.manual_seed(0)
    empty = mode == "fsdp2_rank0" and not acc.is_main_process
    with init_empty_weights() if empty else nullcontext():
        model = net_cls()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, opt = acc.prepare(model, opt)
    _train(args, acc, model, opt)


def _plain_child(args: argparse.Namespace, mode: str) -> None:
    """A row of the floor: the same model and loop on torch.distributed alone."""
    import torch

    acc = _Plain()
    torch.manual_seed(0)
    model = acc.wrap(_model(args.dim, args.depth)(), mode)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)  # over the shards, for FSDP2
    _train(args, acc, model, opt)
    import torch.distributed as dist

    dist.destroy_process_group()


def _train(args: argparse.Namespace, acc, model, opt) -> None:
    """The timed loop and the report of one variant (``acc``: an Accelerator or ``_Plain``)."""
    import torch
    import torch.distributed as dist

    rss_prepared = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    g = torch.Generator().manual_seed(acc.process_index)
    times = []
    for step in range(args.steps + 2):
        x = torch.randn(args.batch, args.dim, generator=g)
        dist.barrier()
        start = time.perf_counter()
        loss = model(x).pow(2).mean()
        acc.backward(loss)
        opt.step()
        if step == args.steps + 1:
            state_mib = _local_state_mib(model, opt)
        opt.zero_grad()
        elapsed = torch.tensor(time.perf_counter() - start, dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if step >= 2:
            times.append(elapsed.item())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = [None] * dist.get_world_size()
    dist.all_gather_object(report, (rss_prepared, rss, state_mib))
    if acc.is_main_process:
        print(
            "RESULT "
            + json.dumps(
                {
                    "variant": args.variant,
                    "engine": f"{acc.distributed_type.value}, {_param_kind(model)}",
                    "step_ms": statistics.median(times) * 1000,
                    "step_min_ms": min(times) * 1000,
                    "state": [r[2] for r in report],
                    "rss_prepared": [r[0] for r in report],
                    "rss_peak": [r[1] for r in report],
                }
            ),
            flush=True,
        )


def _local_state_mib(model, opt) -> float:
    """MiB of parameters, gradients and optimizer states held by this process."""
    import torch

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t

    total = 0
    for p in model.parameters():
        total += local(p).numel() * p.element_size()
        if p.grad is not None:
            total += local(p.grad).numel() * p.grad.element_size()
    for per_param in opt.state.values():
        for value in per_param.values():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                total += local(value).numel() * value.element_size()
    return total / 2**20


def _param_kind(model) -> str:
    """What the prepared model holds: DTensor shards, or whole tensors (under which wrapper)."""
    param = next(model.parameters())
    if type(param).__name__ == "DTensor":
        return "DTensor shards"
    return f"whole tensors in {type(model).__name__}"


def torchrun_command(script: str, port: int, variant: str, args: argparse.Namespace) -> list:
    """The command that runs ``script``'s child for ``variant`` on 2 local gloo processes, with
    the model flags of ``args``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        script,
        "--child",
        "--variant",
        variant,
        *(f"--{k}={getattr(args, k)}" for k in ("steps", "dim", "depth", "batch")),
    ]


def driver(args: argparse.Namespace) -> None:
    """Run every variant in fresh processes and write the table."""
    import torch

    params = args.depth * (2 * 4 * args.dim * args.dim + 5 * args.dim) + args.dim + 1
    rows = []
    for variant in VARIANTS:
        command = torchrun_command(__file__, 29600 + len(rows), variant, args)
        # glibc's default allocator, as a training script has (a fixed mmap threshold makes RSS
        # follow live memory but makes every FSDP2 buffer fresh pages: 2x slower steps).
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            # The process that failed first names the cause; its peers report a lost connection.
            errors = [
                ln
                for ln in done.stderr.splitlines()
                if "Error" in ln
                and ":" in ln
                and "ChildFailedError" not in ln
                and "Connection closed" not in ln
            ]
            tail = (errors or done.stderr.strip().splitlines() or ["(no output)"])[-1]
            rows.append({"variant": variant, "error": tail[:160]})
        else:
            rows.append(json.loads(lines[0][len("RESULT ") :]))
        print(rows[-1], flush=True)
    _write(args, rows, params, torch.__version__)


def _write(args: argparse.Namespace, rows: list[dict], params: int, torch_version: str) -> None:
    import accelerate

    lines = [
        "# Engines: DDP vs FSDP2 (accel and accelerate)",
        "",
        f"Model: {args.depth} residual MLP blocks of width {args.dim} ({params / 1e6:.1f} M "
        f"parameters, {params * 4 / 2**20:.0f} MiB in fp32), AdamW, batch {args.batch} per "
        f"process, 2 gloo processes on CPU, {args.steps} measured steps after 2 warm-up steps.",
        f"torch {torch_version}, accelerate {accelerate.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores (shared with other jobs: "
        "compare rows of one run, not across runs).",
        "",
        "Command: `uv run python benchmarks/engines/bench_fsdp.py "
        f"--steps {args.steps} --dim {args.dim} --depth {args.depth} --batch {args.batch}`",
        "",
        "| variant | distributed type, parameters | step ms (median / min) | × torch DDP "
        "| params + grads + AdamW state per process (MiB) "
        "| peak RSS after prepare, rank 0 / 1 (MiB) "
        "| peak RSS at the end, rank 0 / 1 (MiB) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    by_name = {row["variant"]: row for row in rows if "error" not in row}
    floor = by_name.get("floor: torch DDP, no library", {}).get("step_ms")
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['variant']} | failed: `{row['error']}` | | | | | |")
            continue
        prep = " / ".join(f"{v:.0f}" for v in row["rss_prepared"])
        peak = " / ".join(f"{v:.0f}" for v in row["rss_peak"])
        state = " / ".join(f"{v:.0f}" for v in row["state"])
        lines.append(
            f"| {row['variant']} | {row['engine']} | {row['step_ms']:.0f} / "
            f"{row['step_min_ms']:.0f} | {row['step_ms'] / floor:.2f}x | {state} | {prep} | "
            f"{peak} |"
            if floor
            else f"| {row['variant']} | {row['engine']} | {row['step_ms']:.0f} / "
            f"{row['step_min_ms']:.0f} | | {state} | {prep} | {peak} |"
        )
    lines += ["", *_notes(by_name)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines + _profile_section(Path(args.out))) + "\n")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(args.out)  # one PNG per table, shown under it
    print("\n".join(lines))


def _notes(rows: dict[str, dict]) -> list[str]:
    """What the rows of this run show, written from their numbers."""
    notes = ["What the rows show (this run):", ""]
    ddp, fsdp = rows.get("accel DDP"), rows.get("accel FSDP2")
    if ddp and fsdp:
        notes.append(
            f"- accel's FSDP2 step is {fsdp['step_ms'] / ddp['step_ms']:.2f}x accel's DDP step "
            f"({fsdp['step_ms']:.0f} against {ddp['step_ms']:.0f} ms, medians) while each process "
            f"holds {fsdp['state'][0]:.0f} MiB of parameters, gradients and AdamW state "
            f"against {ddp['state'][0]:.0f} MiB. On gloo, accel's FSDP2 reduce-scatters "
            "gradients with an all-to-all (torch's gloo reduce-scatter is an all-reduce of the "
            "whole gradient); the profile below shows where the rest of the step goes."
        )
    torch_fsdp = rows.get("floor: torch FSDP2 (fully_shard per block), no library")
    if fsdp and torch_fsdp:
        notes.append(
            f"- The same FSDP2 wrapping on torch alone takes {torch_fsdp['step_ms']:.0f} ms: "
            "accel's row is the library's overhead plus its reduce-scatter, against the same "
            "model and loop with no library."
        )
    reference = rows.get("accelerate FSDP2")
    if reference and "whole tensors" in reference["engine"]:
        notes.append(
            "- accelerate 1.15 does not shard on CPU: with a `FullyShardedDataParallelPlugin` "
            "and `cpu=True` its state stays `MULTI_CPU` and `prepare` wraps the model in DDP "
            "(its row holds whole tensors), so its step is a DDP step."
        )
    notes.append(
        "- Peak RSS is `ru_maxrss` under glibc's default allocator, which keeps freed "
        "all-gather buffers for reuse: it shows the high-water mark, not the live tensors "
        "(the state column)."
    )
    return notes


def _profile_section(page: Path) -> list[str]:
    """The section ``bench_fsdp_profile.py`` wrote into the page (kept when the table is
    rewritten), or nothing."""
    text = page.read_text() if page.exists() else ""
    begin, end = "<!-- bench_fsdp_profile.py: begin -->", "<!-- bench_fsdp_profile.py: end -->"
    if begin not in text or end not in text:
        return []
    return ["", begin + text.split(begin, 1)[1].split(end, 1)[0] + end]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="accel FSDP2", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--out", default="benchmarks/results/engines_fsdp.md")
    args = parser.parse_args()
    if args.child:
        child(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
