"""Damages an offload file under a running disk-offloaded model and reports what the next
forward did, one JSON line per case.

Run as a child process (a truncated memory-mapped file can kill its process with SIGBUS):
``python offload_tamper.py KIND`` with KIND one of ``accel-written``, ``checkpoint``, ``dat``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import (
    attach_prefetcher,
    disk_offload,
    dispatch_model,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    offload_state_dict,
)

DISK_MAP = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}
DAMAGES = ("truncate", "random")
PREFETCH = ("off", "new-memory", "pool-buffers", "leased-map")


def build(kind: str, tiny: TinyLM, root: str) -> tuple[torch.nn.Module, str]:
    """A disk-offloaded copy of ``tiny`` and the file that holds ``blocks.1.up.weight``."""
    if kind == "accel-written":
        model = TinyLM().eval()
        model.load_state_dict(tiny.state_dict())
        folder = os.path.join(root, "offload")
        disk_offload(model, folder, execution_device="cpu")
        return model, os.path.join(folder, "model-offload.safetensors")
    if kind == "checkpoint":
        checkpoint = save_safetensors_checkpoint(tiny, os.path.join(root, "ckpt"))
        with init_empty_weights():
            model = TinyLM()
        model = load_checkpoint_and_dispatch(
            model, checkpoint, device_map=DISK_MAP, offload_folder=os.path.join(root, "offload")
        )
        with open(os.path.join(root, "offload", "index.json"), encoding="utf-8") as handle:
            entry = json.load(handle)["blocks.1.up.weight"]
        return model.eval(), entry["safetensors_file"]
    if kind == "dat":
        folder = os.path.join(root, "dat")
        state = {k: v for k, v in tiny.state_dict().items() if k.startswith("blocks.")}
        offload_state_dict(folder, state)
        with init_empty_weights():
            model = TinyLM()
        model.embed.weight = torch.nn.Parameter(tiny.embed.weight.detach().clone())
        model.head.weight = model.embed.weight
        model = dispatch_model(model, DISK_MAP, offload_dir=folder)
        return model.eval(), os.path.join(folder, "blocks.1.up.weight.dat")
    raise SystemExit(f"unknown kind {kind!r}")


def damage(path: str, how: str) -> None:
    """Truncates ``path`` to half its size, or overwrites it with random bytes of its size."""
    # File times have the kernel clock's tick as their resolution: step past the tick of the
    # file's last write, as a change made while a model serves would be.
    time.sleep(0.05)
    size = os.path.getsize(path)
    if how == "truncate":
        os.truncate(path, size // 2)
        return
    with open(path, "r+b") as handle:
        handle.write(os.urandom(size))


def run_case(kind: str, how: str, prefetch: str) -> dict:
    torch.manual_seed(0)
    tiny = TinyLM().eval()
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as root:
        model, path = build(kind, tiny, root)
        if prefetch == "off":
            attach_prefetcher(model, layers_ahead=0)
        elif prefetch == "new-memory":
            model._accel_prefetcher.map_files = False
            model._accel_prefetcher.read_into_buffers = False  # each module read into new memory
        elif prefetch == "pool-buffers":
            model._accel_prefetcher.map_files = False  # every file read into the pool's buffers
        else:  # the default on the CPU: computed on the leased file's pages
            assert model._accel_prefetcher.map_files
        with torch.no_grad():
            expected = tiny(ids)
            first = model(ids)
            damage(path, how)
            result = {"kind": kind, "damage": how, "prefetch": prefetch, "path": path}
            result["first_ok"] = bool(torch.equal(first, expected))
            try:
                second = model(ids)
            except Exception as exc:  # what the test checks: the type and the message
                result["error"] = type(exc).__name__
                result["message"] = str(exc)
            else:
                result["error"] = None
                result["finite"] = bool(torch.isfinite(second).all())
                result["same"] = bool(torch.equal(second, expected))
        prefetcher = getattr(model, "_accel_prefetcher", None)
        if prefetcher is not None:
            prefetcher.close()
    return result


if __name__ == "__main__":
    for damage_kind in DAMAGES:
        for prefetch_mode in PREFETCH:
            print(json.dumps(run_case(sys.argv[1], damage_kind, prefetch_mode)), flush=True)
