"""Truncates an offload file from another process in the middle of a forward of a model that
reads its weights from it, and reports what that forward did, as one JSON line.

Run as a child process (compute on a memory map of a file that shrinks kills the process with
SIGBUS): ``python truncate_during_forward.py KIND BLOCK`` with KIND ``checkpoint`` (a
safetensors checkpoint used in place, ``device_map={"": "disk"}``) or ``dat`` (``.dat`` files
written by ``offload_state_dict``), and BLOCK the block before whose forward the file shrinks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import (
    dispatch_model,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    offload_state_dict,
)


def build(kind: str, tiny: TinyLM, root: str) -> tuple[torch.nn.Module, list[str]]:
    """A disk-offloaded copy of ``tiny`` and the files its offloaded weights are read from."""
    with init_empty_weights():
        model = TinyLM(depth=6)
    if kind == "checkpoint":
        folder = save_safetensors_checkpoint(tiny, os.path.join(root, "ckpt"), "1GB")
        model = load_checkpoint_and_dispatch(
            model, folder, device_map={"": "disk"}, offload_folder=os.path.join(root, "offload")
        )
        return model.eval(), [os.path.join(folder, "model.safetensors")]
    folder = os.path.join(root, "dat")
    offload_state_dict(folder, tiny.state_dict())
    model = dispatch_model(model, {"": "disk"}, offload_dir=folder)
    names = [n for n in os.listdir(folder) if n.endswith(".dat")]
    return model.eval(), [os.path.join(folder, n) for n in sorted(names)]


def truncate_elsewhere(paths: list[str]) -> None:
    """Another process cuts every file to a handful of bytes, as a download or copy in progress
    over the same path would."""
    code = "import os, sys\nfor path in sys.argv[1:]:\n    os.truncate(path, 3)\n"
    subprocess.run([sys.executable, "-c", code, *paths], check=True, timeout=60)


def main(kind: str, block: int) -> None:
    torch.manual_seed(0)
    tiny = TinyLM(depth=6).eval()
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    result: dict = {"kind": kind, "block": block}
    with tempfile.TemporaryDirectory() as root:
        model, paths = build(kind, tiny, root)
        with torch.no_grad():
            expected = tiny(ids)
            result["first_ok"] = bool(torch.equal(model(ids), expected))
            model.blocks[block].register_forward_pre_hook(lambda *_: truncate_elsewhere(paths))
            try:
                out = model(ids)
            except Exception as exc:  # what the test checks: the type and the message
                result["error"] = type(exc).__name__
                result["message"] = str(exc)
            else:
                result["error"] = None
                result["same"] = bool(torch.equal(out, expected))
        prefetcher = getattr(model, "_accel_prefetcher", None)
        if prefetcher is not None:
            prefetcher.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
