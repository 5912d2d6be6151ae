"""A few steps of TRL's SFTTrainer on a tiny causal LM and an in-memory text dataset; print the
losses as JSON. Run under either library (ACCEL_AS_ACCELERATE=1 for accel).

Usage: python sft_run.py OUTPUT_DIR
"""

from __future__ import annotations

import json
import sys

import torch
from datasets import Dataset
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer


def tokenizer() -> PreTrainedTokenizerFast:
    """A character-level tokenizer built in memory (no hub)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    chars = "abcdefghijklmnopqrstuvwxyz ."
    vocab = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>")


def tiny_model(tok: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A 2-layer Llama for ``tok``'s vocabulary, seeded."""
    torch.manual_seed(0)
    return LlamaForCausalLM(
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


def main() -> None:
    tok = tokenizer()
    model = tiny_model(tok)
    texts = [f"the cat sat on mat number {'abcdefgh'[i % 8]}." for i in range(32)]
    args = SFTConfig(
        output_dir=sys.argv[1],
        max_steps=4,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        max_length=48,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"text": texts}),
        processing_class=tok,
    )
    trainer.train()
    import accelerate

    print(
        "RESULT "
        + json.dumps(
            {
                "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
                "accelerate_file": accelerate.__file__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
