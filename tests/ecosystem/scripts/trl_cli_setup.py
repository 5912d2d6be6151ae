"""Save what ``trl sft`` needs to run offline: a tiny causal LM built from a config with its
tokenizer (``WORK_DIR/model``) and a tiny text dataset as a local JSON-lines file
(``WORK_DIR/data/train.jsonl``, which ``datasets.load_dataset(WORK_DIR/data)`` reads).

Usage: python trl_cli_setup.py WORK_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from sft_run import tokenizer  # the character-level tokenizer of the SFTTrainer test
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    work = Path(sys.argv[1])
    torch.manual_seed(0)
    tok = tokenizer()
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            pad_token_id=0,
            eos_token_id=1,
        )
    )
    model.save_pretrained(work / "model")
    tok.save_pretrained(work / "model")
    (work / "data").mkdir(parents=True)
    rows = [{"text": f"the cat sat on mat number {'abcdefgh'[i % 8]}."} for i in range(16)]
    (work / "data" / "train.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8"
    )
    print("RESULT " + json.dumps({"model": str(work / "model")}), flush=True)


if __name__ == "__main__":
    main()
