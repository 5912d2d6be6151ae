"""The clients' most common calls, run in one fresh interpreter for one side.

Usage: python _client_paths_child.py SIDE DEVICE FOLDER

SIDE is ``accel`` (``accel.install_as_accelerate()`` first, so transformers and PEFT reach
accel) or ``reference`` (the installed accelerate); DEVICE is ``cuda`` or ``cpu``; FOLDER holds
the small Llama checkpoint both sides load. Prints one ``RESULT {json}`` line: for each path its
seconds and what the other side must match (device map, a logits digest, the losses), or
``skipped`` with the reason.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

SIDE, DEVICE, FOLDER = sys.argv[1], sys.argv[2], sys.argv[3]
if SIDE == "accel":
    import accel

    accel.install_as_accelerate()

import accelerate  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

if SIDE == "accel":
    assert "accel" in (accelerate.__file__ or ""), accelerate.__file__
else:
    assert "accel_" not in (accelerate.__file__ or ""), accelerate.__file__

IDS = torch.arange(2 * 12).reshape(2, 12) % 500


def _digest(t: torch.Tensor) -> list[float]:
    t = t.detach().float().cpu()
    return [round(t.sum().item(), 3), round(t.abs().mean().item(), 5)]


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def device_map_auto() -> dict[str, Any]:
    """``from_pretrained(device_map="auto")`` with no ``max_memory``: transformers measures the
    free memory itself and passes a float budget down."""
    began = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(FOLDER, device_map="auto")
    _sync()
    seconds = time.perf_counter() - began
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(IDS.to(device)).logits
    return {
        "seconds": seconds,
        # transformers sets hf_device_map only when it dispatched (not for one device)
        "device_map": {k: str(v) for k, v in getattr(model, "hf_device_map", {"": device}).items()},
        "logits": _digest(logits),
    }


def _dataset() -> Any:
    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 32

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = (torch.arange(16) * (i + 3)) % 500
            return {"input_ids": ids, "labels": ids}

    return Tokens()


def _train(model: Any, folder: str, **extra: Any) -> dict[str, Any]:
    args = transformers.TrainingArguments(
        output_dir=folder,
        per_device_train_batch_size=4,
        max_steps=8,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        data_seed=0,
        use_cpu=DEVICE == "cpu",
        disable_tqdm=True,
        **extra,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_dataset())
    began = time.perf_counter()
    trainer.train()
    _sync()
    losses = [round(e["loss"], 6) for e in trainer.state.log_history if "loss" in e]
    return {"seconds": time.perf_counter() - began, "losses": losses}


def trainer_bf16() -> dict[str, Any]:
    """A ``Trainer`` in bf16 (autocast through the engine's mixed precision)."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_pretrained(FOLDER)
    return _train(model, FOLDER + "-trainer", bf16=True)


def peft_lora() -> dict[str, Any]:
    """PEFT LoRA on the attention projections, trained by the ``Trainer``."""
    try:
        import peft
    except ImportError as exc:
        return {"skipped": f"peft is not installed ({exc})"}
    torch.manual_seed(0)
    base = transformers.AutoModelForCausalLM.from_pretrained(FOLDER)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    torch.manual_seed(0)
    model = peft.get_peft_model(base, config)
    return _train(model, FOLDER + "-lora")


def bnb_4bit() -> dict[str, Any]:
    """bitsandbytes 4-bit through transformers with ``device_map="auto"`` (the quantizer scales
    the measured budget by 0.9, a float)."""
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"bitsandbytes is not installed ({exc})"}
    if DEVICE != "cuda":
        return {"skipped": "bitsandbytes 4-bit loads through the GPU path only in this check"}
    quant = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
    )
    began = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        FOLDER, device_map="auto", quantization_config=quant
    )
    _sync()
    seconds = time.perf_counter() - began
    with torch.no_grad():
        logits = model(IDS.to("cuda")).logits
    return {
        "seconds": seconds,
        "device_map": {k: str(v) for k, v in model.hf_device_map.items()},
        "logits": _digest(logits),
    }


PATHS = {
    "from_pretrained(device_map='auto'), no max_memory": device_map_auto,
    "Trainer, bf16": trainer_bf16,
    "PEFT LoRA through the Trainer": peft_lora,
    "bitsandbytes 4-bit, device_map='auto'": bnb_4bit,
}

results: dict[str, Any] = {}
for name, path in PATHS.items():
    try:
        results[name] = path()
    except Exception as exc:  # each path reports its own failure; the others still run
        results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
versions = {
    "accelerate": getattr(accelerate, "__version__", "?"),
    "transformers": transformers.__version__,
    "torch": torch.__version__,
}
print("RESULT " + json.dumps({"side": SIDE, "versions": versions, "paths": results}))
