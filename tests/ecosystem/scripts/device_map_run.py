"""transformers' ``from_pretrained(device_map=...)`` with CPU and disk, on a tiny saved model:
each case's forward logits and greedy ``generate`` against the in-memory model. Prints one JSON
``RESULT`` line: per case, ``"ok"`` or the error. Run under either library.

Usage: python device_map_run.py WORK_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM


def main() -> None:
    work = Path(sys.argv[1])
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(work / "model")
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).logits
    want_gen = model.generate(ids, max_new_tokens=4, do_sample=False)
    names = [n for n, _ in model.named_children()]
    cases = {
        "string_max_memory_cpu_and_disk": {"device_map": "auto", "max_memory": {"cpu": "60KB"}},
        "int_max_memory_cpu_and_disk": {
            "device_map": "auto",
            "max_memory": {"cpu": 60_000, "disk": 10**9},
        },
        "cpu_budget_too_small_no_disk_listed": {
            "device_map": "auto",
            "max_memory": {"cpu": 60_000},
        },
        "explicit_map_with_disk": {
            "device_map": {
                "model.embed_tokens": "cpu",
                "model.layers.0": "cpu",
                "model.layers.1": "disk",
                "model.layers.2": "disk",
                "model.layers.3": "cpu",
                "model.norm": "cpu",
                "model.rotary_emb": "cpu",
                "lm_head": "cpu",
            }
        },
    }
    results = {}
    for name, kwargs in cases.items():
        try:
            loaded = AutoModelForCausalLM.from_pretrained(
                work / "model", offload_folder=str(work / f"offload_{name}"), **kwargs
            ).eval()
            placed = sorted({str(d) for d in getattr(loaded, "hf_device_map", {}).values()})
            with torch.no_grad():
                got = loaded(ids).logits
            got_gen = loaded.generate(ids, max_new_tokens=4, do_sample=False)
            results[name] = {
                "devices": placed,
                "max_abs_diff": float((got - want).abs().max()),
                "generate_equal": bool(torch.equal(got_gen, want_gen)),
            }
        except Exception as err:  # reported per case: the test names the failure
            results[name] = {"error": f"{type(err).__name__}: {err}"[:600]}
    import accelerate

    print(
        "RESULT "
        + json.dumps({"cases": results, "children": names, "accelerate_file": accelerate.__file__}),
        flush=True,
    )


if __name__ == "__main__":
    main()
