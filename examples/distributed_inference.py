"""Distributed inference: split prompts between processes, run a model on each share, gather.

The model is a small GPT-2 built from a config (random weights, no download); prompts are
encoded byte by byte. Run it with:

    accel-launch --num_processes 2 examples/distributed_inference.py
"""

from __future__ import annotations

import torch
from accel import PartialState
from accel.utils import gather_object, set_seed

PROMPTS = ["a dog", "a cat", "a chicken"]


def build_model() -> torch.nn.Module:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:  # the example still runs with a plain module
        return torch.nn.Sequential(torch.nn.Embedding(256, 32), torch.nn.Linear(32, 256))
    config = GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    return GPT2LMHeadModel(config)


@torch.no_grad()
def complete(model: torch.nn.Module, prompt: str, new_tokens: int = 5) -> str:
    ids = torch.tensor([list(prompt.encode())])
    for _ in range(new_tokens):
        out = model(ids)
        logits = out.logits if hasattr(out, "logits") else out
        ids = torch.cat([ids, logits[:, -1:].argmax(-1)], dim=1)
    return bytes(ids[0].tolist()).decode("latin-1")


def main() -> None:
    state = PartialState()
    set_seed(0)  # same weights on every process
    model = build_model().eval().to(state.device)

    # Without padding each process gets its own prompts: ["a dog", "a cat"] / ["a chicken"].
    with state.split_between_processes(PROMPTS) as prompts:
        results = [complete(model, p) for p in prompts]
    print(f"process {state.process_index}: {prompts}", flush=True)

    # With padding every process has the same count, so results can be gathered; the
    # duplicates (padding) are dropped afterwards.
    with state.split_between_processes(PROMPTS, apply_padding=True) as prompts:
        results = [complete(model, p) for p in prompts]
    gathered = gather_object(results)
    per_process = len(gathered) // state.num_processes
    share = -(-len(PROMPTS) // state.num_processes)
    completions = []
    for rank in range(state.num_processes):
        real = max(0, min(share, len(PROMPTS) - rank * share))
        completions += gathered[rank * per_process : rank * per_process + real]
    if state.is_main_process:
        assert [c[: len(p)] for c, p in zip(completions, PROMPTS)] == PROMPTS
        print(f"{len(completions)} completions gathered from {state.num_processes} processes:")
        for text in completions:
            print("  " + repr(text))


if __name__ == "__main__":
    main()
