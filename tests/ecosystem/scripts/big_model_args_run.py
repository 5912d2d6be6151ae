"""The big-model calls of transformers and PEFT with the arguments they pass themselves, on a
tiny saved model: ``from_pretrained(device_map=<strategy>)`` without ``max_memory``, a model
with ``_no_placement_params`` dispatched under transformers' replacement of
``accelerate.big_modeling.check_device_map``, PEFT's re-dispatch of an offloaded base with a
float budget, and a bitsandbytes 4-bit load with ``device_map="auto"``. Prints one JSON
``RESULT`` line: per case, the device map and the logits, or the error. Run under either
library.

Usage: python big_model_args_run.py WORK_DIR
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

IDS = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(1))


class NoPlacement(LlamaForCausalLM):
    """A model whose ``lm_head.weight`` is left out of its device map (as transformers does for
    a model too large to place, through ``_no_placement_params``)."""

    _no_placement_params = ["lm_head.weight"]


def _outcome(model: torch.nn.Module) -> dict[str, Any]:
    device_map = getattr(model, "hf_device_map", None)
    result: dict[str, Any] = {
        "device_map": None if device_map is None else {k: str(v) for k, v in device_map.items()},
        "devices": sorted({str(p.device) for p in model.parameters()}),
    }
    try:
        with torch.no_grad():
            result["logits"] = model(IDS).logits.flatten().tolist()
    except Exception as error:  # bitsandbytes' CPU kernels may not run here: the load still counts
        result["forward_error"] = f"{type(error).__name__}: {error}"[:500]
    return result


def _no_placement(folder: Path) -> dict[str, Any]:
    import accelerate
    from transformers.integrations.accelerate import skip_device_map_check

    model = NoPlacement.from_pretrained(folder).eval()
    with skip_device_map_check():  # replaces accelerate.big_modeling.check_device_map
        accelerate.dispatch_model(model, device_map={"model": "cpu"})
    return _outcome(model)


def _peft_redispatch(folder: Path, work: Path) -> dict[str, Any]:
    from peft import LoraConfig, PeftModel, get_peft_model

    torch.manual_seed(2)
    adapter = get_peft_model(
        LlamaForCausalLM.from_pretrained(folder),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    adapter.save_pretrained(work / "adapter")
    base = LlamaForCausalLM.from_pretrained(folder, device_map={"": "cpu"}).eval()
    # transformers 5 records no map for a model on one device (4.x recorded this one); with
    # "cpu" in it, PEFT plans ("auto") and dispatches again, with a float budget.
    base.hf_device_map = {"": "cpu"}
    budget = {"cpu": 0.9 * 999_999_999}  # not a whole number, as measured budgets are
    model = PeftModel.from_pretrained(base, work / "adapter", max_memory=budget).eval()
    return _outcome(model)


def _bnb_4bit(folder: Path) -> dict[str, Any]:
    from transformers import BitsAndBytesConfig

    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float32)
    model = LlamaForCausalLM.from_pretrained(folder, device_map="auto", quantization_config=config)
    return _outcome(model.eval())


def main() -> None:
    work = Path(sys.argv[1])
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=False,
    )
    folder = work / "model"
    LlamaForCausalLM(config).save_pretrained(folder)
    cases: dict[str, Callable[[], dict[str, Any]]] = {
        f"from_pretrained_{strategy}": (
            lambda strategy=strategy: _outcome(
                LlamaForCausalLM.from_pretrained(folder, device_map=strategy).eval()
            )
        )
        for strategy in ("auto", "balanced", "balanced_low_0", "sequential")
    }
    cases["no_placement_params"] = lambda: _no_placement(folder)
    if importlib.util.find_spec("peft") is not None:
        cases["peft_redispatch"] = lambda: _peft_redispatch(folder, work)
    if importlib.util.find_spec("bitsandbytes") is not None:
        cases["bnb_4bit_auto"] = lambda: _bnb_4bit(folder)
    results: dict[str, Any] = {}
    for name, case in cases.items():
        try:
            results[name] = case()
        except Exception as error:  # the case's error is its result
            results[name] = {"error": f"{type(error).__name__}: {error}"[:2000]}
            traceback.print_exc()
    import accelerate

    print("RESULT " + json.dumps({"accelerate_file": accelerate.__file__, "cases": results}))


if __name__ == "__main__":
    main()
