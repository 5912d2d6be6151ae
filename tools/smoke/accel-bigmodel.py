"""Smoke run of accel-bigmodel installed alone (torch and safetensors, nothing else): build a
model without memory, place it over CPU and disk, offload to disk and run forwards that match
the original model.

Run: ``python tools/smoke/accel-bigmodel.py`` (prints ``ok: accel-bigmodel`` on success).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from accel_bigmodel import (
    compute_module_sizes,
    disk_offload,
    dispatch_model,
    infer_auto_device_map,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    write_safetensors,
)
from torch import nn


def build() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)
    )


def main() -> None:
    torch.manual_seed(0)
    reference = build().eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        expected = reference(x)

    with init_empty_weights():
        empty = build()
    assert all(p.device.type == "meta" for p in empty.parameters())
    sizes = compute_module_sizes(empty)
    # Room on the CPU for all but the last layer: that one goes to disk.
    budget = sizes[""] - sizes["4"]
    device_map = infer_auto_device_map(empty, max_memory={"cpu": budget, "disk": "1GB"})
    assert "disk" in device_map.values() and "cpu" in device_map.values(), device_map

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "model.safetensors"
        state = {k: v.contiguous() for k, v in reference.state_dict().items()}
        write_safetensors(checkpoint, state, metadata={"format": "pt"})
        model = load_checkpoint_and_dispatch(
            empty, str(checkpoint), device_map=device_map, offload_folder=str(Path(tmp) / "off")
        )
        with torch.no_grad():
            torch.testing.assert_close(model(x), expected)

        # A model in RAM: written to an offload folder and read back forward by forward.
        copy = build().eval()
        copy.load_state_dict(reference.state_dict())
        on_disk = disk_offload(copy, str(Path(tmp) / "disk"))
        with torch.no_grad():
            torch.testing.assert_close(on_disk(x), expected)

        copy = build().eval()
        copy.load_state_dict(reference.state_dict())
        mixed = dispatch_model(
            copy, {"0": "cpu", "2": "disk", "4": "disk"}, offload_dir=str(Path(tmp) / "mixed")
        )
        with torch.no_grad():
            torch.testing.assert_close(mixed(x), expected)
    print("ok: accel-bigmodel")


if __name__ == "__main__":
    main()
