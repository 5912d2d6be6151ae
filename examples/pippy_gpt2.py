"""Pipeline-parallel inference of GPT-2 over 2 processes with ``prepare_pippy``.

The model is a small ``GPT2ForSequenceClassification`` built from a config (random weights, no
download). ``prepare_pippy`` traces it on example inputs, cuts it into one stage per process at
balanced split points, and runs each batch through a GPipe schedule. Run it with:

    accel-launch --num_processes 2 examples/pippy_gpt2.py
"""

from __future__ import annotations

import torch
from accel import PartialState
from accel.inference import prepare_pippy
from accel.utils import set_seed
from transformers import GPT2Config, GPT2ForSequenceClassification


def main() -> None:
    set_seed(42)  # the same weights on every process
    config = GPT2Config(
        vocab_size=1000,
        n_positions=128,
        n_embd=64,
        n_layer=4,
        n_head=4,
        num_labels=3,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=1,
    )
    model = GPT2ForSequenceClassification(config).eval()

    # The example inputs are shaped like a real batch: 2 rows x 128 tokens.
    example = torch.randint(1, config.vocab_size, (2, 128))
    reference = model(example).logits  # the unsplit model, for the check below

    model = prepare_pippy(model, example_args=(example,))

    with torch.no_grad():
        output = model(example)

    # The output lives on the last process only (pass gather_output=True to send it everywhere).
    if PartialState().is_last_process:
        logits = output.logits
        diff = (logits - reference).abs().max().item()
        print(f"split points: {model.pippy_split_points}")
        print(f"logits shape: {tuple(logits.shape)}")
        print(f"max abs difference with the unsplit model: {diff:.2e}")
    else:
        assert output is None


if __name__ == "__main__":
    main()
