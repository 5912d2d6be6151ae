"""Cost of refusing untrusted checkpoint files: DeepSpeed ZeRO-2 validation and the safe DCP read.

Two measurements, each against the same work without the check, median of ``BENCH_REPEATS``
runs from a warm page cache:

- ``deepspeed``: a ZeRO-2 checkpoint written by ``save_state`` (1 process, gloo, AdamW over a
  model of ``DS_LAYERS`` x ``Linear(DS_WIDTH, DS_WIDTH)``); ``validate_model_state`` (every
  ``.pt`` file read with ``weights_only=True``) vs DeepSpeed's own ``load_checkpoint``.
- ``dcp``: a ``torch.distributed.checkpoint`` folder of ``DCP_TENSORS`` tensors plus
  non-tensor entries (1 process, no process group); ``read_dcp_metadata_safely`` vs torch's
  ``FileSystemReader.read_metadata``, and ``safe_dcp_load`` vs ``dcp.load``.

Beside them, the reference library's way (its FSDP sharded load calls torch's ``dcp.load``
with a ``FileSystemReader``; its ``load_state`` of a DeepSpeed engine calls DeepSpeed's own
``load_checkpoint``: neither checks anything) and the floors: a raw read of the DCP files'
bytes, and ``torch.load`` of the DeepSpeed ``.pt`` files with no engine and no check.

Run: uv run --no-sync python benchmarks/untrusted/bench_validation.py
(the DeepSpeed part starts itself under torchrun with one process). Sizes: ``--repeats``,
``--ds-layers``, ``--ds-width``, ``--dcp-tensors`` (or the environment variables
``BENCH_REPEATS``, ``DS_LAYERS``, ``DS_WIDTH``, ``DCP_TENSORS``). ``--out PAGE`` also writes the
table into its own section of that page (``benchmarks/results/untrusted_files.md``), keeping
the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
DS_LAYERS = int(os.environ.get("DS_LAYERS", "8"))
DS_WIDTH = int(os.environ.get("DS_WIDTH", "1024"))
DCP_TENSORS = int(os.environ.get("DCP_TENSORS", "2000"))


def _median(work: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _size(folder: str) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def _read_bytes(paths: list[Path]) -> int:
    """Read every file whole (the floor of a load: the bytes, no parsing)."""
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            total += len(handle.read())
    return total


def _files(folder: str) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())


def bench_dcp(folder: str) -> dict[str, float]:
    import torch
    import torch.distributed.checkpoint as dcp
    from accel_bigmodel import read_dcp_metadata_safely, safe_dcp_load

    state = {f"model.layer{i}.weight": torch.randn(64, 64) for i in range(DCP_TENSORS)}
    state.update({f"optim.group{i}.lr": 1e-3 * i for i in range(DCP_TENSORS // 10)})
    dcp.save(state, checkpoint_id=folder, no_dist=True)

    def fresh() -> dict[str, object]:
        return {k: torch.empty_like(v) if torch.is_tensor(v) else 0.0 for k, v in state.items()}

    return {
        "dcp_bytes": _size(folder),
        "metadata_bytes": os.path.getsize(os.path.join(folder, ".metadata")),
        "read_metadata_plain_s": _median(lambda: dcp.FileSystemReader(folder).read_metadata()),
        "read_metadata_safe_s": _median(lambda: read_dcp_metadata_safely(folder)),
        "load_plain_s": _median(lambda: dcp.load(fresh(), checkpoint_id=folder, no_dist=True)),
        "load_safe_s": _median(lambda: safe_dcp_load(fresh(), folder, no_dist=True)),
        "reference_load_s": _median(lambda: _reference_dcp_load(fresh(), folder)),
        "floor_metadata_s": _median(lambda: _read_bytes([Path(folder, ".metadata")])),
        "floor_load_s": _median(lambda: _read_bytes(_files(folder))),
    }


def _reference_dcp_load(state: dict[str, object], folder: str) -> None:
    """What the reference library does to read a DCP folder (its FSDP sharded-state load):
    torch's ``dcp.load`` with a ``FileSystemReader`` and the default planner, no check."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    reader = dcp.FileSystemReader(folder)
    dcp.load(state, storage_reader=reader, planner=DefaultLoadPlanner(), no_dist=True)


def bench_deepspeed(folder: str) -> dict[str, float]:
    import torch
    from accel import Accelerator, DeepSpeedPlugin
    from torch.utils.data import DataLoader, TensorDataset

    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=2))
    torch.manual_seed(0)
    layers = [torch.nn.Linear(DS_WIDTH, DS_WIDTH) for _ in range(DS_LAYERS)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(8, DS_WIDTH), torch.randn(8, DS_WIDTH))
    model, opt, loader = acc.prepare(model, opt, DataLoader(data, batch_size=4))
    for x, y in loader:
        acc.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
        opt.zero_grad()
    path = acc.save_state(folder)
    engine_dir = os.path.join(path, "deepspeed_model_0")
    load = lambda: model.load_checkpoint(path, tag="deepspeed_model_0")  # noqa: E731
    pt_files = [p for p in _files(engine_dir) if p.suffix == ".pt"]
    floor = lambda: [torch.load(p, weights_only=False) for p in pt_files]  # noqa: E731
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "deepspeed_bytes": _size(engine_dir),
        "validate_s": _median(lambda: acc.engine.validate_model_state(path, 0)),
        "deepspeed_load_s": _median(load),
        "floor_deepspeed_s": _median(floor),
        "load_state_s": _median(lambda: acc.load_state(path)),
        "load_state_trusted_s": _median(lambda: acc.load_state(path, trust_pickles=True)),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "deepspeed":
        with tempfile.TemporaryDirectory() as tmp:
            print("DEEPSPEED " + json.dumps(bench_deepspeed(os.path.join(tmp, "ckpt"))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each measurement")
    parser.add_argument("--ds-layers", type=int, default=DS_LAYERS, help="DeepSpeed model layers")
    parser.add_argument("--ds-width", type=int, default=DS_WIDTH, help="their width")
    parser.add_argument("--dcp-tensors", type=int, default=DCP_TENSORS, help="tensors of DCP")
    parser.add_argument("--out", default=None, help="page to write the table into")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _machine import share_sizes, write_section  # benchmarks/_machine.py

    share_sizes(
        globals(),
        BENCH_REPEATS=("REPEATS", args.repeats),
        DS_LAYERS=("DS_LAYERS", args.ds_layers),
        DS_WIDTH=("DS_WIDTH", args.ds_width),
        DCP_TENSORS=("DCP_TENSORS", args.dcp_tensors),
    )
    from accel_state.testing import run_distributed

    with tempfile.TemporaryDirectory() as tmp:
        results = bench_dcp(os.path.join(tmp, "dcp"))
    env = {"TORCH_EXTENSIONS_DIR": os.path.expanduser("~/.cache/accel/torch_extensions")}
    run = run_distributed(__file__, "deepspeed", num_processes=1, timeout=1800, env=env)
    line = next(x for x in run.stdout.splitlines() if x.startswith("DEEPSPEED "))
    results.update(json.loads(line[len("DEEPSPEED ") :]))
    r = results

    def ratio(seconds: float, floor: float) -> str:
        return f"{seconds / floor:.2f}"

    meta, dcp_floor, ds_floor = (
        r["floor_metadata_s"],
        r["floor_load_s"],
        r["floor_deepspeed_s"],
    )
    rows = [
        ("measure", "without the check (s)", "with the check (s)", "check alone (s)", "× floor"),
        ("---", "---", "---", "---", "---"),
        (
            f"DCP `.metadata` read ({r['metadata_bytes'] / 1e3:.0f} kB, {DCP_TENSORS} tensors)",
            f"{r['read_metadata_plain_s']:.4f}",
            f"{r['read_metadata_safe_s']:.4f}",
            "",
            ratio(r["read_metadata_safe_s"], meta),
        ),
        ("floor: raw read of the `.metadata` bytes", f"{meta:.4f}", "", "", "1.00"),
        (
            f"DCP load ({r['dcp_bytes'] / 1e6:.1f} MB)",
            f"{r['load_plain_s']:.3f}",
            f"{r['load_safe_s']:.3f}",
            "",
            ratio(r["load_safe_s"], dcp_floor),
        ),
        (
            "accelerate: torch's `dcp.load` with a `FileSystemReader` (its FSDP sharded load; "
            "no check)",
            f"{r['reference_load_s']:.3f}",
            "",
            "",
            ratio(r["reference_load_s"], dcp_floor),
        ),
        ("floor: raw read of the DCP files' bytes", f"{dcp_floor:.4f}", "", "", "1.00"),
        (
            f"`load_state`, DeepSpeed ZeRO-2 ({r['parameters'] / 1e6:.0f}M parameters, "
            f"{r['deepspeed_bytes'] / 1e6:.0f} MB of DeepSpeed files)",
            f"{r['load_state_trusted_s']:.3f}",
            f"{r['load_state_s']:.3f}",
            f"{r['validate_s']:.4f}",
            ratio(r["load_state_s"], ds_floor),
        ),
        (
            "accelerate: its `load_state` calls DeepSpeed's own `load_checkpoint`, measured "
            "here (no check)",
            f"{r['deepspeed_load_s']:.3f}",
            "",
            "",
            ratio(r["deepspeed_load_s"], ds_floor),
        ),
        (
            "floor: `torch.load` of the DeepSpeed `.pt` files, no engine, no check",
            f"{ds_floor:.3f}",
            "",
            "",
            "1.00",
        ),
    ]
    table = ["| " + " | ".join(row) + " |" for row in rows]
    print("\n".join(table))
    print(json.dumps(results))
    if args.out is not None:
        heading = (
            f"## Latest run of `bench_validation.py` ({DS_LAYERS} x Linear({DS_WIDTH}, "
            f"{DS_WIDTH}), {DCP_TENSORS} DCP tensors, median of {REPEATS})"
        )
        write_section(
            args.out, "bench_validation", "Untrusted files", f"{heading}\n\n" + "\n".join(table)
        )


if __name__ == "__main__":
    main()
