"""diffusers' ``from_pretrained(device_map="auto")`` with a memory budget smaller than the model,
on whichever ``accelerate`` this interpreter imports (accel under ``ACCEL_AS_ACCELERATE=1``).

Arguments: ``out_dir``. A tiny ``UNet2DConditionModel`` built from a config (no hub) is saved, then loaded
three ways: in memory; with ``device_map="auto"`` and a CPU budget of a fraction of its size
(the rest goes to disk, in ``offload_folder``); with an explicit map holding ``"disk"``. Prints
one ``RESULT`` line: the devices each map uses, the largest difference of the outputs from the
in-memory model's, and which ``accelerate`` answered.
"""

import json
import os
import sys

import accelerate
import torch
from diffusers import UNet2DConditionModel


def tiny_unet() -> UNet2DConditionModel:
    torch.manual_seed(0)
    return UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=8,
    )


def main() -> None:
    out = sys.argv[1]
    model = tiny_unet().eval()
    saved = os.path.join(out, "unet")
    model.save_pretrained(saved)
    torch.manual_seed(1)
    sample, step = torch.randn(2, 4, 16, 16), torch.tensor([10])
    text = torch.randn(2, 5, 32)
    with torch.no_grad():
        expected = model(sample, step, encoder_hidden_states=text).sample
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    cases = {}

    def case(name: str, **kwargs) -> None:
        try:
            loaded = UNet2DConditionModel.from_pretrained(saved, **kwargs).eval()
            with torch.no_grad():
                got = loaded(sample, step, encoder_hidden_states=text).sample
            devices = sorted({str(d) for d in getattr(loaded, "hf_device_map", {}).values()})
            cases[name] = {
                "devices": devices,
                "max_abs_diff": float((got - expected).abs().max()),
            }
        except Exception as exc:  # reported, so the test names the failing case
            cases[name] = {"error": f"{type(exc).__name__}: {exc}"}

    case(
        "auto_budget_smaller_than_the_model",
        device_map="auto",
        max_memory={"cpu": size // 3},
        offload_folder=os.path.join(out, "offload_auto"),
    )
    first = next(iter(dict(model.named_children())))
    explicit = {name: ("disk" if name == first else "cpu") for name, _ in model.named_children()}
    case(
        "explicit_map_with_disk",
        device_map=explicit,
        offload_folder=os.path.join(out, "offload_explicit"),
    )
    print(
        "RESULT "
        + json.dumps({"cases": cases, "accelerate_file": accelerate.__file__, "model_bytes": size}),
        flush=True,
    )


if __name__ == "__main__":
    main()
