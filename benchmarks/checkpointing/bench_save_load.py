"""save_state + load_state of a ~1 GB model (16 fp32 Linear(4096, 4096) layers, 1 process),
against the reference library (accelerate) and the floors of the machine.

Every measurement runs in a fresh subprocess (``OMP_NUM_THREADS=1``), alternating libraries:

- load: ``load_state`` (accel: with its default crc32 check of every file, and with
  ``verify_checksums=False``, which reads the weights once) from a warm page cache (the files were just written) and from a cold one
  (every file of the checkpoint flushed, then evicted with ``posix_fadvise(DONTNEED)``), and the
  read baseline: ``cat`` of the same files to ``/dev/null``, warm and cold (not a floor: ``cat``
  copies every byte through a pipe, which a memory-mapped load does not, so a load can beat it);
- save: ``save_state`` (accel flushes every file to storage; the reference does not), and the
  write floors: the model's bytes written to one file without ``fsync`` (page cache) and with
  one ``fsync`` at the end (durable);
- peak RSS of each process, and what it adds over the RSS just before the call.

Writes ``benchmarks/results/checkpointing.md`` (with the machine's load average: the machine
may be shared) and its charts, prints one JSON object. Temporary files are deleted.

Run: uv run --group bench python benchmarks/checkpointing/bench_save_load.py
(``--repeats`` repeats, medians shown; ``--layers`` / ``--width`` for the model; or the
environment variables ``BENCH_REPEATS``, ``BENCH_LAYERS``, ``BENCH_WIDTH``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _machine import COLD_SETTLE, compile_bytecode, status_bytes
from _machine import evict as evict_files
from _workers import run_worker_process

LAYERS = int(os.environ.get("BENCH_LAYERS", "16"))
WIDTH = int(os.environ.get("BENCH_WIDTH", "4096"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
LIBRARIES = ("accel", "accelerate")


def _rss() -> int:
    return status_bytes("VmRSS")


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _model(seed: int):
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        return torch.nn.Sequential(
            *[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)]
        )


def _build(library: str, seed: int):
    import torch

    if library == "accel":
        from accel import Accelerator
    else:
        from accelerate import Accelerator
    accelerator = Accelerator(cpu=True)
    model = _model(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, model


def _write_floor(path: str, durable: bool) -> dict[str, float]:
    """The model's bytes written to one file, as a writer with no overhead would."""
    import ctypes

    model = _model(0)
    before = _rss()
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for param in model.parameters():
            size = param.numel() * param.element_size()
            view = memoryview((ctypes.c_ubyte * size).from_address(param.data_ptr()))
            done = 0
            while done < size:
                done += os.write(fd, view[done:])
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - start
    peak = _peak()
    return {
        "seconds": seconds,
        "rss_before_gb": before / 1e9,
        "peak_rss_gb": peak / 1e9,
        "peak_increase_gb": max(0, peak - before) / 1e9,
    }


def _crc_pass(folder: str) -> dict[str, float]:
    """One CRC-32 pass over every file of ``folder`` (zlib-ng over a whole-file map, no
    library code): the work a checked load does beyond an unchecked one."""
    import mmap

    from zlib_ng.zlib_ng import crc32

    start = time.perf_counter()
    for path in _files(folder):
        if os.path.getsize(path):
            with (
                open(path, "rb") as handle,
                mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
            ):
                crc32(mapped)
    return {"seconds": time.perf_counter() - start}


def worker(library: str, phase: str, folder: str) -> dict[str, float]:
    if phase == "crc":
        return _crc_pass(folder)
    if phase in ("write", "write_fsync"):
        return _write_floor(folder, durable=phase == "write_fsync")
    accelerator, model = _build(library, seed=0 if phase == "save" else 1)
    before = _rss()
    start = time.perf_counter()
    if phase == "save":
        accelerator.save_state(folder)
    elif phase == "load_unverified":
        accelerator.load_state(folder, verify_checksums=False)
    else:
        accelerator.load_state(folder)
    seconds = time.perf_counter() - start
    peak = _peak()
    checksum = float(model[0].weight[0, :8].detach().sum())
    return {
        "seconds": seconds,
        "rss_before_gb": before / 1e9,
        "peak_rss_gb": peak / 1e9,
        "peak_increase_gb": max(0, peak - before) / 1e9,
        "checksum": checksum,
    }


def run(library: str, phase: str, folder: str) -> dict[str, float]:
    done = run_worker_process(
        __file__, "--worker", library, phase, folder, env={"OMP_NUM_THREADS": "1"}, timeout=900
    )
    return done.require(f"{library} {phase}")


def _files(folder: str) -> list[str]:
    return sorted(str(p) for p in Path(folder).rglob("*") if p.is_file())


def evict(folder: str) -> None:
    """Flush every file of ``folder``, drop it from the page cache and wait
    :data:`COLD_SETTLE` seconds (a cold read follows)."""
    evict_files(_files(folder))


def cat(folder: str) -> dict[str, float]:
    """Wall time of ``cat`` reading every file of ``folder`` to /dev/null (the read baseline)."""
    start = time.perf_counter()
    subprocess.run(["cat", *_files(folder)], stdout=subprocess.DEVNULL, check=True, timeout=600)
    return {"seconds": time.perf_counter() - start}


def measure() -> dict[str, list[dict[str, float]]]:
    """Every measurement, ``REPEATS`` times: ``{"<library> <phase>" or floor: [runs]}``."""
    runs: dict[str, list[dict[str, float]]] = {}
    compile_bytecode()
    root = tempfile.mkdtemp(prefix="bench_ckpt_")
    try:
        for _ in range(REPEATS):
            for library in LIBRARIES:
                folder = os.path.join(root, library)
                shutil.rmtree(folder, ignore_errors=True)
                saved = run(library, "save", folder)
                runs.setdefault(f"{library} save", []).append(saved)
                for cache in ("warm", "cold"):
                    if cache == "cold":
                        evict(folder)
                    loaded = run(library, "load", folder)
                    if saved["checksum"] != loaded["checksum"]:
                        raise RuntimeError(f"{library}: the loaded weights are not the saved ones")
                    runs.setdefault(f"{library} load {cache}", []).append(loaded)
                    if library == "accel":
                        if cache == "cold":
                            evict(folder)
                        unverified = run(library, "load_unverified", folder)
                        runs.setdefault(f"accel unverified {cache}", []).append(unverified)
                        if cache == "cold":
                            evict(folder)
                        runs.setdefault(f"cat {cache}", []).append(cat(folder))
                        if cache == "warm":  # the files are cached: a pass in memory
                            runs.setdefault("crc", []).append(run(library, "crc", folder))
                size = sum(os.path.getsize(p) for p in _files(folder))
                runs.setdefault(f"{library} size", []).append({"seconds": 0, "gb": size / 1e9})
                shutil.rmtree(folder)
            for phase in ("write", "write_fsync"):
                path = os.path.join(root, "floor.bin")
                runs.setdefault(phase, []).append(run("accel", phase, path))
                os.remove(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return runs


def _median(runs: list[dict[str, float]], key: str = "seconds") -> float:
    return statistics.median(r[key] for r in runs)


def _timed_rows(
    runs: dict[str, list[dict[str, float]]],
    rows: tuple[tuple[str, str], ...],
    floor: str,
    cell: str,
) -> list[str]:
    """Table rows ``| name |<cell> seconds | ratio to the floor |``."""
    base = _median(runs[floor])
    lines = []
    for name, key in rows:
        seconds = _median(runs[key])
        lines.append(f"| {name} |{cell} {seconds:.3f} | {seconds / base:.2f}x |")
    return lines


def page(runs: dict[str, list[dict[str, float]]], load: tuple[float, ...]) -> str:
    """The results page (markdown)."""
    size = _median(runs["accel size"], "gb")
    lines = [
        "# Checkpointing: save_state + load_state of a 1 GB model",
        "",
        "`uv run --group bench python benchmarks/checkpointing/bench_save_load.py`",
        "",
        f"Model: {LAYERS} × `Linear({WIDTH}, {WIDTH}, bias=False)` in fp32 ({size:.2f} GB of "
        "checkpoint), plain SGD (no optimizer state), 1 process on CPU, accel vs accelerate "
        "in the same run. Every measurement runs in a fresh process (`OMP_NUM_THREADS=1`), with "
        "both libraries byte-compiled first, as installed (without it, the development "
        "machine's `PYTHONDONTWRITEBYTECODE` makes each process compile the modules a call "
        "imports inside the timed call), "
        f"alternating libraries, {REPEATS} repeats, medians shown. Warm: the files were just "
        "written; cold: every file flushed, then evicted with `posix_fadvise(DONTNEED)`, and the "
        f"read started {COLD_SETTLE:.0f} s later (a read right after an eviction ran 3-4x "
        "faster here: the virtual disk's host still held the data). accel's "
        "`load_state` checks the crc32 of every file against the manifest before loading (one "
        "more read of the checkpoint); `verify_checksums=False` reads the weights once. A "
        "checked load's baseline is `cat` plus one CRC-32 pass over the cached files (zlib-ng "
        "over a whole-file map, in a fresh process): a load that must change nothing when a "
        "check fails reads the bytes twice. The read baseline is `cat` of accel's checkpoint "
        "files to /dev/null: not a floor, since `cat` copies every byte through a pipe and a "
        "memory-mapped load does not (accel's loads beat it). The write floors are the model's bytes "
        "written to one file (page cache: no `fsync`; durable: one `fsync` at the end). Peak RSS "
        'is the process peak; "+" is the increase over the RSS just before the call (torch '
        "plus the model). The machine has 2 cores shared with other jobs: load average "
        f"{', '.join(f'{v:.2f}' for v in load)} (1, 5, 15 min) at the end of the run, so "
        "times are noisy.",
        "",
        "## Load",
        "",
        "| reader | page cache | seconds | × cat | × baseline of its work |",
        "| --- | --- | --- | --- | --- |",
    ]
    crc = _median(runs["crc"])
    for cache in ("warm", "cold"):
        runs[f"checked floor {cache}"] = [
            {"seconds": r["seconds"] + crc} for r in runs[f"cat {cache}"]
        ]
        rows = (
            ("accel load_state (checked)", f"accel load {cache}"),
            ("accel load_state(verify_checksums=False)", f"accel unverified {cache}"),
            ("accelerate load_state (unchecked)", f"accelerate load {cache}"),
            ("cat to /dev/null (a baseline, not a floor)", f"cat {cache}"),
            (
                "baseline of a checked load: cat + one CRC-32 pass in memory",
                f"checked floor {cache}",
            ),
        )
        for line, (_, key) in zip(_timed_rows(runs, rows, f"cat {cache}", f" {cache} |"), rows):
            own = (
                f"checked floor {cache}"
                if "checked" in key or key.startswith("accel load")
                else f"cat {cache}"
            )
            lines.append(f"{line} {_median(runs[key]) / _median(runs[own]):.2f}x |")
    lines += [
        "",
        "## Save",
        "",
        "| writer | seconds | × durable floor |",
        "| --- | --- | --- |",
    ]
    rows = (
        ("accel save_state (every file flushed)", "accel save"),
        ("accelerate save_state (no flush)", "accelerate save"),
        ("page-cache write floor (no fsync)", "write"),
        ("durable write floor (write + one fsync)", "write_fsync"),
    )
    lines += _timed_rows(runs, rows, "write_fsync", "")
    lines += [
        "",
        "## Memory",
        "",
        "| process | peak RSS GB | + over model GB |",
        "| --- | --- | --- |",
    ]
    for key in (
        "accel load warm",
        "accel unverified warm",
        "accelerate load warm",
        "accel load cold",
        "accelerate load cold",
        "accel save",
        "accelerate save",
        "write",
        "write_fsync",
    ):
        name = {"write": "page-cache write floor", "write_fsync": "durable write floor"}.get(
            key, key.replace("load", "load_state").replace("save", "save_state")
        )
        peak, extra = _median(runs[key], "peak_rss_gb"), _median(runs[key], "peak_increase_gb")
        lines.append(f"| {name} | {peak:.2f} | +{extra:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/results/checkpointing.md")
    parser.add_argument("--layers", type=int, default=LAYERS, help="Linear layers of the model")
    parser.add_argument("--width", type=int, default=WIDTH, help="width of each layer")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each measurement")
    args = parser.parse_args()
    from _machine import share_sizes  # benchmarks/_machine.py

    share_sizes(
        globals(),
        BENCH_LAYERS=("LAYERS", args.layers),
        BENCH_WIDTH=("WIDTH", args.width),
        BENCH_REPEATS=("REPEATS", args.repeats),
    )
    runs = measure()
    load = os.getloadavg()
    Path(args.output).write_text(page(runs, load), encoding="utf-8")
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(args.output)  # one PNG per table, shown under it
    print(json.dumps({"repeats": REPEATS, "load_average": load, "runs": runs}))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        print(json.dumps(worker(*sys.argv[2:])))
    else:
        main()
