"""``from_pretrained(device_map="auto")`` under transformers, through accel, on the GPU.

``accel.install_as_accelerate()`` makes ``import accelerate`` give accel's modules, so
transformers' big-model loading runs on accel. It runs in a child process: the switch changes
``sys.modules`` for the rest of the process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.cuda

CHILD = textwrap.dedent(
    """
    import sys
    import accel
    accel.install_as_accelerate()
    import accelerate, torch, transformers
    assert accelerate.__name__ == "accelerate" and "accel" in accelerate.__file__, accelerate.__file__
    folder = sys.argv[1]
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder).cuda().eval()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, device_map="auto", max_memory={0: "40MiB", "cpu": "4GiB"}
    ).eval()
    devices = set(model.hf_device_map.values())
    assert 0 in devices and "cpu" in devices, model.hf_device_map
    ids = torch.randint(0, 512, (2, 16), device="cuda")
    with torch.no_grad():
        out, expected = model(ids).logits, reference(ids).logits
    assert out.device.type == "cuda"
    torch.testing.assert_close(out, expected)
    print("DEVICE_MAP_OK", sorted(map(str, devices)))
    """
)


def test_from_pretrained_device_map_auto_through_accel(tmp_path):
    import accel

    if not hasattr(accel, "install_as_accelerate"):
        pytest.skip(
            "accel.install_as_accelerate() is not in this tree yet: transformers would load "
            "through the reference library, which is not what this check is for"
        )
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    import torch

    config = transformers.LlamaConfig(
        num_hidden_layers=4,
        hidden_size=512,
        intermediate_size=1024,
        num_attention_heads=8,
        num_key_value_heads=8,
        vocab_size=512,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "llama")],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ),
    )
    assert result.returncode == 0 and "DEVICE_MAP_OK" in result.stdout, (
        result.stdout[-3000:] + result.stderr[-5000:]
    )
