"""``quantize_and_offload_8bit``: an 8-bit weight goes to disk as int8 with its row scales."""

import pytest
import torch

bnb = pytest.importorskip(
    "bitsandbytes", reason='needs bitsandbytes: pip install "accel-precision[bnb]"'
)

from accel_bigmodel import OffloadedWeightsLoader  # noqa: E402

from accel_precision import quantize_and_offload_8bit  # noqa: E402


def test_a_full_precision_weight_is_quantized_then_offloaded(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4))
    weight = model[0].weight.detach().clone()
    index: dict = {}
    quantize_and_offload_8bit(model, weight, "0.weight", torch.float16, tmp_path, index, None)
    values, scales, _ = bnb.functional.int8_vectorwise_quant(weight.half())
    import zlib

    # Each entry records the CRC-32 of the bytes written, checked at the first read.
    assert index == {
        "0.weight": {"dtype": "int8", "shape": [4, 8], "crc32": zlib.crc32(values.numpy())},
        "0.SCB": {"dtype": "float32", "shape": [4], "crc32": zlib.crc32(scales.numpy())},
    }
    loader = OffloadedWeightsLoader(state_dict={}, save_folder=str(tmp_path), index=index)
    assert torch.equal(loader["0.weight"], values) and torch.equal(loader["0.SCB"], scales)
    restored = loader["0.weight"].float() * loader["0.SCB"][:, None] / 127
    assert torch.allclose(restored, weight, atol=weight.abs().max().item() / 100)
    assert model[0].weight.device.type == "meta" and model[0].weight.dtype == torch.float16
    with pytest.raises(ValueError, match="int8 '0.weight' with fp16_statistics=None"):
        quantize_and_offload_8bit(model, values, "0.weight", torch.int8, tmp_path, index, None)
