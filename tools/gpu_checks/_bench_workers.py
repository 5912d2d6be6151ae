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
from _models import LlamaLike


def _model(settings: dict[str, Any]) -> LlamaLike:
    return LlamaLike(**settings["model"])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def _library(side: str) -> Any:
    if side == "accel":
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


def load(side: str, settings: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The whole checkpoint onto ``device`` (or the copy floor of its bytes)."""
    if side == "floor":
        return copy_floor(device, settings["checkpoint_bytes"])
    model = _empty(side, settings)
    target = 0 if device.type == "cuda" else "cpu"
    _sync(device)
    start = time.perf_counter()
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
        }
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
    times = _forwards(model, ids, 4)
    return {
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


PARTS = {"load": load, "offload": offload, "train": train}


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
