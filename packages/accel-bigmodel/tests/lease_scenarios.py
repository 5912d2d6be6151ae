"""Scenarios of a disk-offloaded model computing on the pages of its leased checkpoint while
the file is wanted by a writer, each reported as one JSON line.

Run as a child process (a map of a file that shrinks under compute kills the process with
SIGBUS): ``python lease_scenarios.py SCENARIO`` with SCENARIO

- ``escaped``: a forward hook keeps a weight of block 0 (a view of the file's pages) after the
  forward; another process then truncates the file. Reports how long the truncation waited,
  whether the kept weight still holds its values, and what the next forward does.
- ``own-writer``: this process itself opens the leased file for writing (as a save over the
  checkpoint would); reports how long the open waited.
- ``writer-first``: another process holds the file open for writing while the model is
  loaded (no lease can be taken); reports whether the forwards copy and are right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch.overrides import TorchFunctionMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import init_empty_weights, load_checkpoint_and_dispatch


class _KeepFirstWeight(TorchFunctionMode):
    def __init__(self, kept: list[torch.Tensor]) -> None:
        super().__init__()
        self.kept = kept

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.linear and not self.kept:
            self.kept.append(args[1])
        return func(*args, **(kwargs or {}))


def _mapped_from(address: int) -> str | None:
    """The file mapped at ``address`` ("" for anonymous memory), from /proc/self/maps."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                return fields[5].strip() if len(fields) > 5 else ""
    return None


def _guards(model: torch.nn.Module) -> list:
    prefetcher = model._accel_prefetcher
    storages = {id(s): s for p in prefetcher.plans.values() if p for s in (t.storage for t in p)}
    return [g for s in storages.values() for g in s._guards.values()]


def main(scenario: str) -> None:
    torch.manual_seed(0)
    tiny = TinyLM(width=64, depth=6).eval()
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    result: dict = {"scenario": scenario}
    with tempfile.TemporaryDirectory() as root:
        folder = save_safetensors_checkpoint(tiny, os.path.join(root, "ckpt"), "1GB")
        path = os.path.join(folder, "model.safetensors")
        holder = None
        if scenario == "writer-first":
            code = "import sys, time\nf = open(sys.argv[1], 'r+b')\nprint('open', flush=True)\ntime.sleep(600)\n"
            holder = subprocess.Popen(
                [sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True
            )
            assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with init_empty_weights():
            model = TinyLM(width=64, depth=6)
        model = load_checkpoint_and_dispatch(
            model, folder, device_map={"": "disk"}, offload_folder=os.path.join(root, "off")
        ).eval()
        kept: list[torch.Tensor] = []
        with torch.no_grad():
            expected = tiny(ids)
            result["first_ok"] = bool(torch.equal(model(ids), expected))
            result["leased"] = [g.leased_map() is not None for g in _guards(model)]
            result["mapped_modules"] = len(model._accel_prefetcher.mapped)
            if scenario == "escaped":
                # Keep the first weight a linear layer computes with (a view of the file's
                # pages): it outlives the forward.
                with _KeepFirstWeight(kept):
                    model(ids)
                values = kept[0].clone()
                result["kept_mapped_from"] = _mapped_from(kept[0].data_ptr())
                start = time.perf_counter()
                code = "import os, sys\nos.truncate(sys.argv[1], 3)\n"
                subprocess.run([sys.executable, "-c", code, path], check=True, timeout=120)
                result["truncate_waited_s"] = time.perf_counter() - start
                result["kept_same"] = bool(torch.equal(kept[0], values))
                result["kept_mapped_from_after"] = _mapped_from(kept[0].data_ptr())
                try:
                    model(ids)
                    result["after"] = None
                except Exception as exc:
                    result["after"] = type(exc).__name__
                    result["after_message"] = str(exc)
            elif scenario == "own-writer":
                start = time.perf_counter()
                with open(path, "r+b"):
                    result["open_waited_s"] = time.perf_counter() - start
                result["second_ok"] = bool(torch.equal(model(ids), expected))
            else:
                result["second_ok"] = bool(torch.equal(model(ids), expected))
        model._accel_prefetcher.close()
        if holder is not None:
            holder.kill()
            holder.wait()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
