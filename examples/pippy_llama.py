"""Pipeline-parallel inference of a Llama-style decoder too big for one process.

The model is built without weights (``init_empty_weights``), cut into one stage per process by
``prepare_pippy``, and each process reads only its stage's tensors from a sharded safetensors
checkpoint: no process ever holds the whole model. The batch of 4 prompts flows through the
stages in 4 chunks, and ``gather_output=True`` sends the logits to every process. Run it with:

    accel-launch --num_processes 2 examples/pippy_llama.py [--checkpoint FOLDER]

Without ``--checkpoint``, the first process saves a small random model (built from a config, no
download) to a folder under the system's temporary directory first, and removes it at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import torch
from accel import PartialState
from accel.inference import prepare_pippy
from accel.utils import init_empty_weights, set_seed
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

REFERENCE = "reference_logits.safetensors"

CONFIG = LlamaConfig(
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


def save_random_model(state: PartialState, folder: str, prompts: torch.Tensor) -> None:
    """Saves a random model as a sharded checkpoint (stands in for a downloaded one), with its
    logits for ``prompts`` to compare with the pipeline's."""
    if state.is_main_process:
        set_seed(0)
        model = LlamaForCausalLM(CONFIG).eval()
        model.save_pretrained(folder, max_shard_size="200KB")
        with torch.no_grad():
            logits = model(input_ids=prompts, attention_mask=torch.ones_like(prompts)).logits
        save_file({"logits": logits.contiguous()}, os.path.join(folder, REFERENCE))
    state.wait_for_everyone()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", help="folder of a saved LlamaForCausalLM")
    args = parser.parse_args()
    state = PartialState()
    config = CONFIG if args.checkpoint is None else LlamaConfig.from_pretrained(args.checkpoint)
    prompts = torch.randint(
        3, config.vocab_size, (4, 32), generator=torch.Generator().manual_seed(0)
    )
    checkpoint = args.checkpoint
    if checkpoint is None:
        # The same path on every process of this machine.
        checkpoint = os.path.join(tempfile.gettempdir(), "accel_pippy_llama_example")
        save_random_model(state, checkpoint, prompts)
    with init_empty_weights():
        model = LlamaForCausalLM(config).eval()  # no memory for weights

    mask = torch.ones_like(prompts)
    # Keyword inputs: every call must pass the same keywords as the example.
    model = prepare_pippy(
        model,
        example_kwargs={"input_ids": prompts, "attention_mask": mask},
        num_chunks=4,
        gather_output=True,
        checkpoint=checkpoint,  # each process loads only its stage's tensors
    )
    with torch.no_grad():
        logits = model(input_ids=prompts, attention_mask=mask).logits

    weights = model.pippy_stage_weights
    next_tokens = logits[:, -1].argmax(-1).tolist()
    print(f"process {state.process_index}: next tokens {next_tokens}", flush=True)
    print(
        f"process {state.process_index} holds {weights.stage_bytes / 2**20:.2f} MiB of weights "
        f"({len(weights.kept)} tensors)",
        flush=True,
    )
    state.wait_for_everyone()
    if state.is_last_process:
        print(f"split points: {model.pippy_split_points}")
        print(f"logits shape: {tuple(logits.shape)}")
        reference = os.path.join(checkpoint, REFERENCE)
        if os.path.exists(reference):
            diff = (logits - load_file(reference)["logits"]).abs().max().item()
            print(f"max abs difference with the unsplit model: {diff:.2e}")
    # The last process reads the reference file above: remove the folder only after it did.
    state.wait_for_everyone()
    if args.checkpoint is None and state.is_main_process:
        shutil.rmtree(checkpoint, ignore_errors=True)


if __name__ == "__main__":
    main()
