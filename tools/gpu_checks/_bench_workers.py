"""The measurements of ``bench_gpu.py``, each run in its own process.

``python _bench_workers.py PART SIDE SETTINGS_JSON`` prints one JSON object on its last line.
PART is ``load``, ``offload`` or ``train``; SIDE is ``accel``, ``reference`` (the library
``accelerate``) or ``floor`` (plain torch: the copy or the loop the libraries cannot beat).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "bigmodel"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # _machine
from _models import LlamaLike


def _model(settings: dict[str, Any]) -> LlamaLike:
    return LlamaLike(**settings["model"])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def _library(side: str) -> Any:
    if side.startswith("accel"):
        import accel.big_modeling as library
    else:
        import accelerate.big_modeling as library
    return library


def _empty(side: str, settings: dict[str, Any]) -> torch.nn.Module:
    with _library(side).init_empty_weights():
        return _model(settings).eval()


def copy_floor(device: torch.device, nbytes: int) -> dict[str, float]:
    """Seconds of one host-to-device copy of ``nbytes`` from page-locked and from pageable memory
    (the best of 3; on the CPU, one memory copy)."""
    result = {}
    kinds = ("pinned", "pageable") if device.type == "cuda" else ("pageable",)
    for kind in kinds:
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=kind == "pinned")
        host.fill_(1)
        target = torch.empty(nbytes, dtype=torch.uint8, device=device)
        best = float("inf")
        for _ in range(3):
            _sync(device)
            start = time.perf_counter()
            target.copy_(host, non_blocking=kind == "pinned")
            _sync(device)
            best = min(best, time.perf_counter() - start)
        result[f"{kind}_seconds"] = best
        del host, target
    return result


CHUNK = 16 * 2**20
"""Bytes of one staging buffer in the read floor (the loader's own chunk)."""


def _pieces(files: list[Path]) -> list[tuple[Path, int, int]]:
    pieces = []
    for path in files:
        size = path.stat().st_size
        pieces.extend((path, at, min(CHUNK, size - at)) for at in range(0, size, CHUNK))
    return pieces


def read_floor(files: list[Path], threads: int, pin: bool) -> float:
    """Seconds to read ``files`` into (page-locked, with ``pin``) buffers by ``threads`` threads,
    each with two 16 MiB buffers of its own, as accel's loader does; the copy to the device
    is left out (it overlaps)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from accel_bigmodel.files._safetensors_io import writable_buffer

    pieces = _pieces(files)
    local = threading.local()
    handles = {path: os.open(path, os.O_RDONLY) for path in files}

    def read(piece: tuple[Path, int, int]) -> int:
        if getattr(local, "buffers", None) is None:
            local.buffers = [torch.empty(CHUNK, dtype=torch.uint8, pin_memory=pin) for _ in (0, 1)]
            local.views = [writable_buffer(b) for b in local.buffers]
            local.turn = 0
        local.turn ^= 1
        path, at, count = piece
        return os.preadv(handles[path], [local.views[local.turn][:count]], at)

    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(read, pieces[: threads * 2]))  # buffers made, pages faulted in
            start = time.perf_counter()
            done = sum(pool.map(read, pieces))
            seconds = time.perf_counter() - start
    finally:
        for fd in handles.values():
            os.close(fd)
    assert done == sum(p[2] for p in pieces), "short read"
    return seconds


def floors(side: str, settings: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The machine's read floors, measured: the checkpoint read from the page cache into
    (page-locked) buffers by 1 thread, accel's thread count and twice that, and from the disk
    after an eviction (which leaves the files in the page cache again)."""
    files = sorted(Path(settings["checkpoint"]).glob("*.safetensors"))
    nbytes = sum(f.stat().st_size for f in files)
    pin = device.type == "cuda"
    result: dict[str, Any] = {"checkpoint_bytes": nbytes, "threads": THREADS, "pinned": pin}
    for threads in sorted({THREADS, 2 * THREADS, 1}):
        read_floor(files, threads, pin)  # the page cache holds every page
        best = min(read_floor(files, threads, pin) for _ in range(2))
        result[f"page_cache_read_{threads}_seconds"] = best
    from _machine import evict

    evict([str(f) for f in files], settle=False)
    time.sleep(settings.get("evict_pause", 0))
    result["disk_read_seconds"] = read_floor(files, THREADS, pin)
    return result


THREADS = max(1, min(4, os.cpu_count() or 1))
"""Reader threads of accel's loader and prefetcher (``min(4, cpu_count)``)."""


def load(side: str, settings: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The whole checkpoint onto ``device`` (or the copy floor of its bytes)."""
    if side == "floor":
        return copy_floor(device, settings["checkpoint_bytes"])
    model = _empty(side, settings)
    target = 0 if device.type == "cuda" else "cpu"
    _sync(device)
    start = time.perf_counter()
    if side == "accel_more_threads":  # the loader with twice its reader threads
        from accel_bigmodel import load_checkpoint_in_model

        load_checkpoint_in_model(
            model,
            settings["checkpoint"],
            device_map={"": target},
            dtype=torch.bfloat16,
            num_threads=2 * THREADS,
        )
    else:
        model = _library(side).load_checkpoint_and_dispatch(
            model, settings["checkpoint"], device_map={"": target}, dtype=torch.bfloat16
        )
    _sync(device)
    seconds = time.perf_counter() - start
    on_device = all(p.device.type == device.type for p in model.parameters())
    return {"seconds": seconds, "peak_bytes": _peak(device), "all_on_device": on_device}


def _ids(settings: dict[str, Any], device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    shape = (settings["batch"], settings["tokens"])
    return torch.randint(0, settings["model"]["vocab"], shape, generator=g).to(device)


def _forwards(model: torch.nn.Module, ids: torch.Tensor, count: int) -> list[float]:
    times = []
    with torch.no_grad():
        for _ in range(count):
            _sync(ids.device)
            start = time.perf_counter()
            model(ids)
            _sync(ids.device)
            times.append(time.perf_counter() - start)
    return times


def offload(side: str, settings: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """A forward with a third of the layers on the device, a third on the CPU, a third on disk.

    The floor side runs the whole model on the device (the compute time) and measures the
    page-locked copy of the offloaded bytes (the transfer time)."""
    layers = settings["model"]["layers"]
    main: Any = 0 if device.type == "cuda" else "cpu"
    placement: dict[str, Any] = {"embed_tokens": main, "norm": main, "lm_head": main}
    for i in range(layers):
        placement[f"layers.{i}"] = (
            main if i < layers // 3 else "cpu" if i < 2 * layers // 3 else "disk"
        )
    ids = _ids(settings, device)
    if side == "floor":
        model = _library("accel").load_checkpoint_and_dispatch(
            _empty("accel", settings),
            settings["checkpoint"],
            device_map={"": main},
            dtype=torch.bfloat16,
        )
        compute = statistics.median(_forwards(model, ids, 4)[1:])
        from accel_bigmodel import compute_module_sizes

        module_sizes = compute_module_sizes(model)
        offloaded = sum(module_sizes[k] for k, v in placement.items() if v in ("cpu", "disk"))
        copy = copy_floor(device, offloaded)
        transfer = copy.get("pinned_seconds", copy["pageable_seconds"])
        return {
            "compute_seconds": compute,
            "transfer_seconds": transfer,
            "offloaded_bytes": offloaded,
            "disk_bytes": sum(module_sizes[k] for k, v in placement.items() if v == "disk"),
        }
    if side == "accel_pinned" and device.type != "cuda":
        return {"skipped": "pin_offloaded_weights needs a CUDA device"}
    folder = Path(settings["work"]) / f"offload-{side}"
    start = time.perf_counter()
    model = _library(side).load_checkpoint_and_dispatch(
        _empty(side, settings),
        settings["checkpoint"],
        device_map=placement,
        offload_folder=str(folder),
        dtype=torch.bfloat16,
    )
    load_seconds = time.perf_counter() - start
    pinned: dict[str, Any] = {}
    if side == "accel_pinned":
        from accel_bigmodel import pin_offloaded_weights

        start = time.perf_counter()
        done = pin_offloaded_weights(model)
        pinned = {
            "pin_seconds": time.perf_counter() - start,
            "pinned_bytes": done.pinned_bytes,
            "pinned_weight_bytes": done.weight_bytes,
        }
    times = _forwards(model, ids, 4)
    return {
        **pinned,
        "load_seconds": load_seconds,
        "first_seconds": times[0],
        "warm_seconds": statistics.median(times[1:]),
        "peak_bytes": _peak(device),
    }


def train(side: str, settings: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Median seconds of a bf16 training step (AdamW) of the model, with its peak memory."""
    torch.manual_seed(0)
    model = LlamaLike(**settings["train_model"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = settings["train_model"]["vocab"]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (settings["batch"], settings["tokens"] + 1), generator=g)
    if side == "floor":
        model = model.to(device)
        ids = ids.to(device)

        def step() -> float:
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = model(ids[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.float().flatten(0, 1), ids[:, 1:].flatten()
            )
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.item()
    else:
        if side == "accel":
            from accel import Accelerator
        else:
            from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision="bf16", cpu=device.type == "cpu")
        model, optimizer = accelerator.prepare(model, optimizer)
        ids = ids.to(accelerator.device)

        def step() -> float:
            logits = model(ids[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.float().flatten(0, 1), ids[:, 1:].flatten()
            )
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.item()

    times, losses = [], []
    for _ in range(settings["train_steps"]):
        _sync(device)
        start = time.perf_counter()
        losses.append(step())
        _sync(device)
        times.append(time.perf_counter() - start)
    warm = times[2:] or times
    return {
        "step_seconds": statistics.median(warm),
        "tokens_per_second": settings["batch"] * settings["tokens"] / statistics.median(warm),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_bytes": _peak(device),
    }


PARTS = {"floors": floors, "load": load, "offload": offload, "train": train}


def main() -> None:
    part, side, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    device = torch.device(settings["device"])
    if device.type == "cuda":
        torch.empty(1, device=device)  # the CUDA context, outside every clock
        torch.cuda.reset_peak_memory_stats(device)
    os.environ.setdefault("ACCEL_BIGMODEL_QUIET", "1")
    print(json.dumps(PARTS[part](side, settings, device)))


if __name__ == "__main__":
    main()
