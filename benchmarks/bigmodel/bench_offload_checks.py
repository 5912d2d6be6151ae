"""The cost of checking offload files at every fetch, before and after, on the offload benchmark.

Every fetch of a disk weight first checks (one ``fstat``) that its file has the size and
modification time it had when the model opened it; a weight of a file accel wrote also has its
bytes checked against the CRC-32 recorded at offload time, once per process. This script times
the offloaded forwards of ``bench_offload_cold.py``'s Llama-like model with the checks (this
tree) and, with ``--baseline REV``, without them (``packages/accel-bigmodel/src`` of that git
revision, put first on ``PYTHONPATH``), in fresh processes whose sides alternate:

- *checkpoint in place*: ``load_checkpoint_and_dispatch`` with ``max_memory`` at half the
  model, so the last layers are read from the checkpoint's own safetensors files (no CRC: accel
  did not write them): warm forwards, and cold ones (every file evicted first).
- *accel-written*: ``disk_offload`` of the in-memory model (accel writes the offload file and
  its CRCs): the first forward (every CRC checked) and warm forwards.

Writes the section ``integrity-checks`` of ``benchmarks/results/bigmodel_offload_cold.md``.

Run: uv run --group bench python benchmarks/bigmodel/bench_offload_checks.py --baseline 3d034dd
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import bench_offload_cold as cold  # noqa: E402  (beside this file)
from _machine import evict, write_section  # noqa: E402  (benchmarks/_machine.py)

PAGE = os.path.join(HERE, "..", "results", "bigmodel_offload_cold.md")


def build(layers: int, width: int):
    from _models import LlamaLike

    return LlamaLike(vocab=cold.VOCAB, width=width, hidden=width * 11 // 4, layers=layers)


def worker(checkpoint: str, layers: int, width: int, cold_forwards: int, warm: int) -> dict:
    import accel_bigmodel
    import torch
    from accel_bigmodel import (
        compute_module_sizes,
        disk_offload,
        init_empty_weights,
        load_checkpoint_and_dispatch,
    )

    try:
        from accel_bigmodel.hooks._prefetch_attach import offloaded_hooks
    except ImportError:  # the baseline revision keeps it beside the prefetcher
        from accel_bigmodel.hooks._prefetch import offloaded_hooks  # type: ignore[no-redef]
    from safetensors.torch import load_file

    torch.set_num_threads(cold.THREADS)
    ids = torch.randint(0, cold.VOCAB, (1, cold.TOKENS), generator=torch.Generator().manual_seed(0))
    result: dict = {"library": os.path.dirname(accel_bigmodel.__file__)}

    def timed(model) -> float:
        start = time.perf_counter()
        model(ids)
        return time.perf_counter() - start

    with torch.no_grad():
        with init_empty_weights():
            model = build(layers, width)
        budget = compute_module_sizes(model)[""] // 2
        offload = tempfile.mkdtemp(prefix="bench-checks-")
        model = load_checkpoint_and_dispatch(
            model.eval(),
            checkpoint,
            device_map="sequential",
            no_split_module_classes=["DecoderLayer"],
            offload_folder=offload,
            max_memory={"cpu": budget, "disk": 10**12},
            mmap=False,
        )
        result["fetches"] = sum(len(h.offloaded_names) for h in offloaded_hooks(model))
        timed(model)
        result["in_place_warm"] = [timed(model) for _ in range(warm)]
        files = cold.files_of(checkpoint)
        result["in_place_cold"] = []
        for _ in range(cold_forwards):
            evict(files)
            result["in_place_cold"].append(timed(model))
        del model
        shutil.rmtree(offload, ignore_errors=True)

        model = build(layers, width).eval()
        for name in sorted(os.listdir(checkpoint)):
            if name.endswith(".safetensors"):
                model.load_state_dict(load_file(os.path.join(checkpoint, name)), strict=False)
        offload = tempfile.mkdtemp(prefix="bench-checks-")
        try:
            disk_offload(model, offload, execution_device="cpu")
            result["written_first"] = timed(model)
            result["written_warm"] = [timed(model) for _ in range(warm)]
        finally:
            shutil.rmtree(offload, ignore_errors=True)
    return result


def run_worker(side: str, source: str | None, args: argparse.Namespace, checkpoint: str) -> dict:
    env = {**os.environ, "ACCEL_BIGMODEL_QUIET": "1"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    argv = [sys.executable, __file__, "--worker", checkpoint]
    argv += [str(args.layers), str(args.width), str(args.cold), str(args.warm)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {side} worker failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["side"] = side
    return result


def micro() -> dict:
    """The check's own cost: one ``fstat`` per fetch, and CRC-32 throughput."""
    data = os.urandom(64 * 2**20)
    start = time.perf_counter()
    zlib.crc32(data)
    crc = len(data) / (time.perf_counter() - start)
    fd = os.open(__file__, os.O_RDONLY)
    try:
        start = time.perf_counter()
        for _ in range(100_000):
            os.fstat(fd)
        fstat = (time.perf_counter() - start) / 100_000
    finally:
        os.close(fd)
    return {"crc_bytes_per_s": crc, "fstat_s": fstat}


def baseline_source(revision: str, into: str) -> str:
    """Extracts ``packages/accel-bigmodel/src`` of a git revision; returns its import root."""
    archive = subprocess.run(
        ["git", "archive", revision, "packages/accel-bigmodel/src"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return os.path.join(into, "packages", "accel-bigmodel", "src")


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def write(results: list[dict], args: argparse.Namespace, facts: dict, seconds: float) -> None:
    sides = [s for s in ("before", "after") if any(r["side"] == s for r in results)]
    rows = [
        ("checkpoint in place, warm forward", "in_place_warm"),
        ("checkpoint in place, cold forward", "in_place_cold"),
        ("accel-written, first forward (every CRC checked)", "written_first"),
        ("accel-written, warm forward", "written_warm"),
    ]
    label = {"before": f"before (`{args.baseline}`, no checks)", "after": "after (checks)"}
    lines = [
        "## The cost of checking offload files (`bench_offload_checks.py`)",
        "",
        f"Same model family as above, {args.layers} layers of width {args.width} "
        f"({facts['checkpoint_bytes'] / 1e6:.0f} MB), {cold.TOKENS} tokens, "
        f"{cold.THREADS} intra-op thread; {args.repeats} fresh processes per side, sides "
        f"alternating; {facts['fetches']} disk weights fetched per forward in the checkpoint "
        f"case; {args.warm} warm and {args.cold} cold forwards per case and process. Seconds, "
        f"median over every forward of the side (min in brackets). Whole run: {seconds:.0f} s (`python benchmarks/bigmodel/bench_offload_checks.py"
        f"{' --baseline ' + args.baseline if args.baseline else ''}`).",
        "",
        "| forward | "
        + " | ".join(label[s] for s in sides)
        + " |"
        + (" after / before |" if len(sides) == 2 else ""),
        "| --- |" + " ---: |" * (len(sides) + (len(sides) == 2)),
    ]
    for title, key in rows:
        cells, medians = [], []
        for side in sides:
            values = []
            for r in results:
                if r["side"] == side:
                    value = r[key]
                    values += value if isinstance(value, list) else [value]
            medians.append(med(values))
            shown = f"{medians[-1]:.4f} ({min(values):.4f})" if values else "n/a"
            cells.append(shown)
        if all(cell == "n/a" for cell in cells):
            continue
        ratio = [f"{medians[1] / medians[0]:.3f}x"] if len(sides) == 2 and medians[0] else []
        lines.append(f"| {title} | " + " | ".join(cells + ratio) + " |")
    per_forward = facts["fetches"] * facts["fstat_s"]
    lines += [
        "",
        f"- The check at each fetch is one `fstat`: {facts['fstat_s'] * 1e6:.2f} µs here, "
        f"{per_forward * 1e3:.3f} ms for the {facts['fetches']} fetches of a forward.",
        f"- CRC-32 (`zlib.crc32`) runs at {facts['crc_bytes_per_s'] / 1e9:.2f} GB/s here: checked "
        "once per weight and process, it adds about one pass over the accel-written bytes to "
        "the first forward that reads them; weights read in place from a checkpoint have no CRC.",
        "",
    ]
    write_section(
        args.out,
        "integrity-checks",
        "Offloaded inference, cold page cache, budget below the model size",
        "\n".join(lines),
    )
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", help="git revision without the checks (the before side)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per side")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--cold", type=int, default=2, help="cold forwards per process")
    parser.add_argument("--warm", type=int, default=8, help="warm forwards timed per case")
    parser.add_argument("--out", default=PAGE, help="the results page to write the section into")
    args = parser.parse_args()
    started = time.perf_counter()
    root = tempfile.mkdtemp(prefix="bench-checks-")
    try:
        source = baseline_source(args.baseline, root) if args.baseline else None
        checkpoint = os.path.join(root, "checkpoint")
        os.makedirs(checkpoint)
        cold.build = lambda: build(args.layers, args.width)
        files = cold.write_checkpoint(checkpoint)
        index = os.path.join(checkpoint, "model.safetensors.index.json")
        with open(index, encoding="utf-8") as handle:
            single = json.load(handle) is None  # one shard (small sizes): no index
        if single:
            os.remove(index)
        facts = {"checkpoint_bytes": sum(os.path.getsize(f) for f in files), **micro()}
        results = []
        for _ in range(args.repeats):
            if source is not None:
                results.append(run_worker("before", source, args, checkpoint))
            results.append(run_worker("after", None, args, checkpoint))
        if source is not None:  # the before side really ran the baseline's code
            assert all(r["library"].startswith(source) for r in results if r["side"] == "before")
        facts["fetches"] = results[-1]["fetches"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write(results, args, facts, time.perf_counter() - started)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], *(int(a) for a in sys.argv[3:7]))))
    else:
        main()
