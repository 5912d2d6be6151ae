"""Pipeline-parallel inference of a Llama-style decoder with ``prepare_pippy``.

A small ``LlamaForCausalLM`` (random weights from a config, no download) is cut into one stage
per process; the batch of 4 prompts flows through the stages in 4 chunks, and
``gather_output=True`` sends the logits to every process. Run it with:

    accel-launch --num_processes 2 examples/pippy_llama.py
"""

from __future__ import annotations

import torch
from accel import PartialState
from accel.inference import prepare_pippy
from accel.utils import set_seed
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    state = PartialState()
    set_seed(0)  # the same weights on every process
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = LlamaForCausalLM(config).eval()

    prompts = torch.randint(3, config.vocab_size, (4, 32))
    mask = torch.ones_like(prompts)
    reference = model(input_ids=prompts, attention_mask=mask).logits

    # Keyword inputs: every call must pass the same keywords as the example.
    model = prepare_pippy(
        model,
        example_kwargs={"input_ids": prompts, "attention_mask": mask},
        num_chunks=4,
        gather_output=True,
    )
    with torch.no_grad():
        logits = model(input_ids=prompts, attention_mask=mask).logits

    # With gather_output=True every process holds the logits.
    next_tokens = logits[:, -1].argmax(-1).tolist()
    diff = (logits - reference).abs().max().item()
    print(f"process {state.process_index}: next tokens {next_tokens}", flush=True)
    if state.is_last_process:
        print(f"split points: {model.pippy_split_points}")
        print(f"logits shape: {tuple(logits.shape)}")
        print(f"max abs difference with the unsplit model: {diff:.2e}")


if __name__ == "__main__":
    main()
