"""Offloaded inference with a cold page cache and a memory budget below the model size.

A Llama-like plain ``nn.Module`` of ~480 MB (float32, built from its shapes, no download) is
saved as sharded safetensors and loaded with ``max_memory`` at half its size, so the last layers
stay on disk and are read from the files at every forward. Each row runs in a fresh process:
load, evict every checkpoint and offload file from the page cache, time the first forward
(cold), then a second one (the page cache is warm again), then a few more, each after evicting
the files again (a server's steady state: every forward reads the offloaded part from the
disk). The disk's cold read bandwidth on the
same files (one stream and two, the faster counts) and the in-RAM forward time are measured in the same run, giving the floor
max(bytes read / bandwidth, in-RAM compute). Writes benchmarks/results/bigmodel_offload_cold.md.

Run: uv run --group bench python benchmarks/bigmodel/bench_offload_cold.py
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _machine import COLD_SETTLE, evict  # noqa: E402  (benchmarks/_machine.py)
from _workers import run_worker_process  # noqa: E402  (benchmarks/_workers.py)

RESULTS = os.path.join(HERE, "..", "results", "bigmodel_offload_cold.md")

TOKENS = 32
VOCAB = 8000
# One intra-op thread: on a shared 2-CPU machine a second one waits for the busier core; the
# prefetcher's reading thread gets the other core.
THREADS = 1
REPEATS = 4
"""Fresh processes per row; the main table shows the best of them, the second the medians."""
CHUNK = 8 * 2**20
STEADY = 2
"""Cold forwards per process after its first two (evicted before each): the serving case."""


def build():
    from _models import LlamaLike

    return LlamaLike(vocab=VOCAB, width=1024, hidden=2816, layers=8)


def files_of(*folders: str) -> list[str]:
    return [
        os.path.join(folder, name)
        for folder in folders
        for name in sorted(os.listdir(folder))
        if os.path.isfile(os.path.join(folder, name))
    ]


def resident_fraction(files: list[str]) -> float:
    """Fraction of the files' pages in the page cache (``mincore`` of a fresh mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    libc.mmap.argtypes += [ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    pages = resident = 0
    for path in files:
        size = os.path.getsize(path)
        if not size:
            continue
        fd = os.open(path, os.O_RDONLY)
        address = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        os.close(fd)
        count = (size + 4095) // 4096
        vector = (ctypes.c_ubyte * count)()
        libc.mincore(address, size, vector)
        libc.munmap(address, size)
        pages += count
        resident += sum(v & 1 for v in vector)
    return resident / pages if pages else 0.0


def try_drop_caches(files: list[str]) -> str:
    """Whether writing /proc/sys/vm/drop_caches evicts the files here (read them first)."""
    for path in files:
        with open(path, "rb") as handle:
            while handle.read(CHUNK):
                pass
    before = resident_fraction(files)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("1\n")
    except OSError as exc:
        return f"refused ({exc.strerror})"
    return f"worked: resident {before:.0%} -> {resident_fraction(files):.0%}"


def read_bandwidth(files: list[str]) -> tuple[float, float]:
    """Bytes per second of a plain read loop over the files, evicted first (best of 3), and
    the CPU seconds that loop spends per byte (kernel copy and page-cache fill included)."""
    total = sum(os.path.getsize(f) for f in files)
    best = cpu = float("inf")
    buffer = bytearray(CHUNK)
    for _ in range(3):
        evict(files)
        start, start_cpu = time.perf_counter(), time.process_time()
        for path in files:
            with open(path, "rb", buffering=0) as handle:
                while handle.readinto(buffer):
                    pass
        best = min(best, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return total / best, cpu / total


def read_bandwidth_two_streams(files: list[str]) -> float:
    """Bytes per second of two threads reading alternate 8 MiB chunks of the files (positional
    reads, evicted first, best of 3): with two requests in flight this virtual disk delivers
    more than one stream does, as the prefetcher's reads alongside the forward's faults do."""
    from concurrent.futures import ThreadPoolExecutor

    chunks = [(f, at) for f in files for at in range(0, os.path.getsize(f), CHUNK)]
    total = sum(os.path.getsize(f) for f in files)

    def read(part: list[tuple[str, int]]) -> None:
        buffer = bytearray(CHUNK)
        descriptors: dict[str, int] = {}
        try:
            for path, at in part:
                fd = descriptors.get(path)
                if fd is None:
                    fd = descriptors[path] = os.open(path, os.O_RDONLY)
                os.preadv(fd, [buffer], at)
        finally:
            for fd in descriptors.values():
                os.close(fd)

    best = float("inf")
    with ThreadPoolExecutor(2) as pool:
        for _ in range(3):
            evict(files)
            start = time.perf_counter()
            list(pool.map(read, [chunks[0::2], chunks[1::2]]))
            best = min(best, time.perf_counter() - start)
    return total / best


def worker(mode: str, checkpoint: str, offload: str) -> dict:
    import torch

    torch.set_num_threads(THREADS)
    if mode == "reference":
        from accelerate import init_empty_weights, load_checkpoint_and_dispatch
        from accelerate.utils import compute_module_sizes
    else:
        from accel_bigmodel import (
            attach_prefetcher,
            compute_module_sizes,
            init_empty_weights,
            load_checkpoint_and_dispatch,
        )
    with init_empty_weights():
        model = build()
    model.eval()
    sizes = compute_module_sizes(model)
    kwargs: dict = {"max_memory": {"cpu": sizes[""] // 2, "disk": 10**12}}
    if mode == "ram":
        kwargs = {"max_memory": {"cpu": 10**11}}
    if mode != "reference":
        kwargs["mmap"] = False  # in-RAM layers are private memory, as the reference's are
    model = load_checkpoint_and_dispatch(
        model,
        checkpoint,
        # The reference's "auto" crashes on a max_memory with a "disk" key; "sequential" is the
        # same placement on a CPU-only machine.
        device_map="sequential",
        no_split_module_classes=["DecoderLayer"],
        offload_folder=offload,
        **kwargs,
    )
    if mode == "accel-noprefetch":
        attach_prefetcher(model, layers_ahead=0)
    if mode == "accel-prefetch-copy":  # no leased map: the pool's buffers, as on a GPU
        model._accel_prefetcher.map_files = False
    waits: list[float] = []
    prefetcher = getattr(model, "_accel_prefetcher", None)
    if prefetcher is not None:
        take = prefetcher.take

        def timed_take(hook):  # time the forward spends waiting for the background reads
            start = time.perf_counter()
            try:
                return take(hook)
            finally:
                waits.append(time.perf_counter() - start)

        prefetcher.take = timed_take
    on_disk = [n for n, d in model.hf_device_map.items() if d == "disk"]
    files = files_of(checkpoint, offload)
    ids = torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(0))
    result: dict = {"disk_bytes": sum(sizes[n] for n in on_disk), "disk_modules": len(on_disk)}
    with torch.no_grad():
        if mode == "ram":
            times = []
            for _ in range(6):
                cpu = time.process_time()
                start = time.perf_counter()
                out = model(ids)
                times.append((time.perf_counter() - start, time.process_time() - cpu))
            result["compute"], result["compute_cpu"] = min(times[1:])
            result["first"] = times[0][0]
        else:
            evict(files)
            result["resident_after_evict"] = resident_fraction(files)
            cpu = time.process_time()
            start = time.perf_counter()
            out = model(ids)
            result["cold"] = time.perf_counter() - start
            result["cold_cpu"] = time.process_time() - cpu
            result["cold_wait"] = sum(waits)
            start = time.perf_counter()
            model(ids)
            result["warm"] = time.perf_counter() - start
            # Serving: the process has run forwards before, and each new forward reads the
            # offloaded part from the disk again (evicted before every one).
            result["steady"], result["steady_cpu"], result["steady_wait"] = [], [], []
            result["steady_resident"] = []
            for _ in range(STEADY):
                evict(files)
                result["steady_resident"].append(resident_fraction(files))
                waits.clear()
                cpu = time.process_time()
                start = time.perf_counter()
                model(ids)
                result["steady"].append(time.perf_counter() - start)
                result["steady_cpu"].append(time.process_time() - cpu)
                result["steady_wait"].append(sum(waits))
    result["checksum"] = float(out.double().sum())
    if prefetcher is not None:
        result["pool"] = {"capacity": prefetcher.pool.capacity, "peak": prefetcher.pool.peak}
    return result


def run_worker(mode: str, checkpoint: str) -> dict:
    offload = tempfile.mkdtemp(prefix="bench-offload-")
    try:
        done = run_worker_process(
            __file__, "--worker", mode, checkpoint, offload, env={"ACCEL_BIGMODEL_QUIET": "1"}
        )
    finally:
        shutil.rmtree(offload, ignore_errors=True)
    if done.returncode != 0:
        return {"error": done.error_line("Error")}
    return done.result()


def write_checkpoint(folder: str) -> list[str]:
    import torch
    from accel_bigmodel import SAFE_WEIGHTS_INDEX_NAME, init_empty_weights, shard_checkpoint
    from safetensors.torch import save_file

    with init_empty_weights():
        model = build()
    generator = torch.Generator().manual_seed(0)
    shards, index = shard_checkpoint(model.state_dict(), "100MB", "model.safetensors")
    for file_name, shard in shards.items():
        tensors = {k: torch.randn(v.shape, generator=generator) * 0.02 for k, v in shard.items()}
        save_file(tensors, os.path.join(folder, file_name), metadata={"format": "pt"})
    with open(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME), "w") as handle:
        json.dump(index, handle)
    return [os.path.join(folder, f) for f in shards]


MODES = {
    "accel-noprefetch": "accel-bigmodel, prefetch off (`attach_prefetcher(model, layers_ahead=0)`)",
    "accel-prefetch": "accel-bigmodel, prefetcher (defaults)",
    "accel-prefetch-copy": "accel-bigmodel, prefetcher, copies (`prefetcher.map_files = False`)",
    "reference": "accelerate",
}


def main() -> dict:
    root = tempfile.mkdtemp(prefix="bench-cold-")
    started = time.perf_counter()
    try:
        files = write_checkpoint(root)
        os.sync()
        raw: dict = {
            "files": len(files),
            "checkpoint_bytes": sum(os.path.getsize(f) for f in files),
            "drop": try_drop_caches(files),
            "bandwidth": 0.0,
            "samples": {mode: [] for mode in ("ram", *MODES)},
        }
        raw["bandwidth_one"], raw["read_cpu_per_byte"] = read_bandwidth(files)
        raw["bandwidth_two"] = read_bandwidth_two_streams(files)
        raw["bandwidth"] = max(raw["bandwidth_one"], raw["bandwidth_two"])
        for _ in range(REPEATS):  # interleaved, so the machine's load weighs on all alike
            for mode, runs in raw["samples"].items():
                runs.append(run_worker(mode, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    raw["elapsed"] = time.perf_counter() - started
    return raw


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def write_page(raw: dict) -> None:
    from run_all import machine, versions

    bandwidth, drop, samples, elapsed = (
        raw[k] for k in ("bandwidth", "drop", "samples", "elapsed")
    )

    ok = {mode: [r for r in runs if "error" not in r] for mode, runs in samples.items()}
    compute = min(r["compute"] for r in ok["ram"])
    compute_cpu = min(r["compute_cpu"] for r in ok["ram"])
    disk_bytes = next(r["disk_bytes"] for runs in ok.values() for r in runs if r["disk_bytes"])
    read_time = disk_bytes / bandwidth
    floor = max(read_time, compute)
    # A cold forward is also the process's first forward: the same floor with the in-RAM first
    # forward (allocator and caches warming up) instead of the best warm one.
    first = min(r["first"] for r in ok["ram"])
    first_floor = max(read_time, first)
    modules = next(r["disk_modules"] for r in ok["reference"] or ok["accel-prefetch"])
    lines = [
        "# Offloaded inference, cold page cache, budget below the model size",
        "",
        f"- Machine: {machine()}",
        f"- Versions: {versions()}",
        f"- Whole run: {elapsed:.0f} s (`uv run --group bench python "
        "benchmarks/bigmodel/bench_offload_cold.py`)",
        f"- Model: Llama-like plain `nn.Module`, 8 layers of width 1024 (MLP 2816), vocabulary "
        f"{VOCAB}, float32, {raw['checkpoint_bytes'] / 1e6:.0f} MB in "
        f"{raw['files']} safetensors shards; `max_memory` cpu = half the model, "
        f'`device_map="sequential"`: {disk_bytes / 1e6:.0f} MB on disk ({modules} modules), '
        f"read from the files at every forward. Forward of {TOKENS} tokens, {THREADS} intra-op "
        f"thread. Each row: {REPEATS} fresh processes, rows interleaved (the machine's load weighs "
        "on all alike).",
        "- Cold cache: after the load, every checkpoint and offload file gets "
        "`posix_fadvise(POSIX_FADV_DONTNEED)` before each cold forward, after the process's own "
        "mappings of them are paged out (`madvise(MADV_PAGEOUT)`: mapped pages survive "
        "`posix_fadvise`, as they would not under memory pressure), and the forward starts "
        f"{COLD_SETTLE:.0f} s later (a read right after an eviction ran 3-4x faster here: the "
        "virtual disk's host still held the data; the bandwidth floor waits as long). Column "
        "*resident* is the highest fraction of their pages still cached before a cold forward "
        "(`mincore`). Writing "
        f"`/proc/sys/vm/drop_caches` (as root): {drop}; it empties the whole machine's cache, "
        "so the runs use `posix_fadvise` only.",
        f"- Disk: the faster of a plain 8 MiB read loop over the same files, cold "
        f"({raw.get('bandwidth_one', bandwidth) / 1e9:.2f} GB/s), and two threads reading "
        f"alternate 8 MiB chunks ({raw.get('bandwidth_two', bandwidth) / 1e9:.2f} GB/s): "
        f"{bandwidth / 1e9:.2f} GB/s; the disk part takes {read_time:.3f} s to read. In-RAM forward (every weight in "
        f"RAM, best of 5 warm forwards per process, best process): {compute:.3f} s ({compute_cpu:.3f} "
        f"s of CPU; its first forward in a fresh process, warm page cache: "
        f"{min(r['first'] for r in ok['ram']):.3f} s). Floor = max({read_time:.3f}, "
        f"{compute:.3f}) = {floor:.3f} s.",
        "",
        "## Serving: every forward reads the offloaded part from the disk",
        "",
        f"Each process runs two forwards, then {STEADY} more, each right after every file was "
        "evicted again: the steady state of a server whose model does not fit its budget. A "
        "process's figure is the median of its cold forwards; the table shows the best process "
        "and the median process of each row.",
        "",
        "| run | resident | cold forward, best process (s) | tokens/s | × floor | cold forward, "
        "median process (s) | × floor (median) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    steady = {mode: [median(r["steady"]) for r in ok[mode] if r.get("steady")] for mode in MODES}
    for mode, label in MODES.items():
        runs = ok[mode]
        if not runs or not steady[mode]:
            error = samples[mode][-1].get("error", "no cold forwards")
            lines.append(f"| {label} | failed: {error} | | | | | |")
            continue
        best, middle = min(steady[mode]), median(steady[mode])
        resident = max(max(r.get("steady_resident", [r["resident_after_evict"]])) for r in runs)
        lines.append(
            f"| {label} | {resident:.0%} | {best:.3f} | {TOKENS / best:.0f} | "
            f"{best / floor:.2f}x | {middle:.3f} | {middle / floor:.2f}x |"
        )
    lines += [
        f"| floor: max(disk bytes / bandwidth, in-RAM forward) | | {floor:.3f} | "
        f"{TOKENS / floor:.0f} | 1.00x | {floor:.3f} | 1.00x |",
        "",
        "## The first forward of a fresh process, cold",
        "",
        f"- First-forward floor = max({read_time:.3f}, {first:.3f}) = {first_floor:.3f} s: this "
        "forward is also the first of its process (allocator and caches warming up).",
        "",
        "| run | cold first forward (s) | tokens/s | × first-forward floor | × floor | warm "
        "forward (s) | warm / in-RAM |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, label in MODES.items():
        runs = ok[mode]
        if not runs:
            continue
        cold, warm = min(r["cold"] for r in runs), min(r["warm"] for r in runs)
        lines.append(
            f"| {label} | {cold:.3f} | {TOKENS / cold:.0f} | {cold / first_floor:.2f}x | "
            f"{cold / floor:.2f}x | {warm:.3f} | {warm / compute:.2f}x |"
        )
    lines += [
        f"| floor: max(disk bytes / bandwidth, first in-RAM forward) | {first_floor:.3f} | "
        f"{TOKENS / first_floor:.0f} | 1.00x | | {compute:.3f} | 1.00x |",
        "",
        "## Where a serving forward's time goes",
        "",
        "Medians over every cold serving forward of the row: *waiting* is the time the forward "
        "waited for the prefetcher's reads; *CPU* is the process's CPU time during the forward "
        f"(all threads; the in-RAM forward needs {compute_cpu:.3f} s); the rest of the wall time "
        "is I/O the forward waited for itself, or a core held by another process.",
        "",
        "| run | cold forward (s) | waiting for reads (s) | process CPU (s) | samples (s) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for mode, label in MODES.items():
        runs = [r for r in ok[mode] if r.get("steady")]
        if not runs:
            continue
        every = [t for r in runs for t in r["steady"]]
        lines.append(
            f"| {label} | {median(every):.3f} | "
            f"{median([t for r in runs for t in r['steady_wait']]):.3f} | "
            f"{median([t for r in runs for t in r['steady_cpu']]):.3f} | "
            f"{', '.join(format(t, '.2f') for t in every)} |"
        )
    ours = steady["accel-prefetch"] or [float("nan")]
    best, middle = min(ours), median(ours)
    read_cpu = raw.get("read_cpu_per_byte", 0.0) * disk_bytes
    cpu = median([t for r in ok["accel-prefetch"] for t in r.get("steady_cpu", [])] or [0.0])
    lines += [
        "",
        f"- Target, a cold serving forward with the prefetcher <= 1.2x the floor: best process "
        f"{best / floor:.2f}x, median process {middle / floor:.2f}x. It uses {cpu:.3f} s of CPU "
        f"(median) against {compute_cpu:.3f} s for the in-RAM forward; reading the disk part "
        f"costs {read_cpu:.3f} s of CPU by itself (the plain read loop's CPU time per byte, "
        "kernel page-cache fill included), on the core the compute does not use.",
        "",
    ]
    pools = [r["pool"] for r in ok["accel-prefetch"] if "pool" in r]
    if pools:
        lines.append(
            f"- Prefetch pool: bound {pools[0]['capacity'] / 1e6:.1f} MB, highest peak "
            f"{max(p['peak'] for p in pools) / 1e6:.1f} MB (weights read ahead, the running "
            "module's included)."
        )
    sums = sorted({round(r["checksum"], 4) for runs in ok.values() for r in runs})
    lines.append(f"- Output checksums over every row and process: {sums} (one value: same output).")
    lines.append("")
    # Sections other scripts generate on this page (bench_offload_checks.py) are kept.
    old = open(RESULTS, encoding="utf-8").read() if os.path.exists(RESULTS) else ""
    lines += re.findall(r"<!-- generated: .*?<!-- end generated: [^>]*-->\n", old, re.DOTALL)
    with open(RESULTS, "w") as handle:
        handle.write("\n".join(lines))
    from _charts import write_charts

    write_charts(RESULTS)
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(*sys.argv[2:5])))
    elif len(sys.argv) > 2 and sys.argv[1] == "--page-from":  # redraw from a saved raw JSON
        with open(sys.argv[2]) as handle:
            write_page(json.load(handle))
    else:
        results = main()
        print(json.dumps(results))
        write_page(results)
