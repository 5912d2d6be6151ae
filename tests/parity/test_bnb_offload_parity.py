"""Differential test: ``quantize_and_offload_8bit`` of an already quantized weight writes the
same offload files and index, and leaves the same meta parameter, in accel and in the reference
library (whose quantizing branch needs a CUDA device; accel's is tested in accel-precision)."""

from __future__ import annotations

import zlib

import pytest
import torch

pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)
pytest.importorskip("bitsandbytes", reason='needs bitsandbytes: pip install "accel-precision[bnb]"')

from accel.utils import bnb as our_bnb
from accelerate.utils import bnb as ref_bnb


def test_offloading_an_int8_weight_with_its_statistics(tmp_path):
    values = torch.randint(-127, 128, (4, 6), dtype=torch.int8)
    scales = torch.rand(4) * 3
    results = []
    for name, module in (("ours", our_bnb), ("ref", ref_bnb)):
        model = torch.nn.Sequential(torch.nn.Linear(6, 4))
        index: dict = {}
        folder = tmp_path / name
        folder.mkdir()  # the reference does not create it
        module.quantize_and_offload_8bit(
            model, values, "0.weight", torch.float16, str(folder), index, scales
        )
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
        if name == "ours":
            # accel's entries also record the CRC-32 of the bytes written (a deliberate
            # difference, checked at the first read): the rest is the reference's index.
            for key, entry in index.items():
                assert entry.pop("crc32") == zlib.crc32(files[f"{key}.dat"]), key
        weight = model[0].weight
        results.append((index, files, weight.device.type, weight.dtype, tuple(weight.shape)))
    assert results[0] == results[1]
    assert results[0][2:] == ("meta", torch.float16, (4, 6))
