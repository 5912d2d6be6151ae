"""transformers' Trainer with FSDP or DeepSpeed on the processes it is launched on: train a
tiny causal LM, checkpoint mid-run, resume from the checkpoint in a fresh Trainer; print the
losses as JSON on the main process. Run under either library: under ``accel launch
--as_accelerate`` transformers' ``import accelerate`` gets accel, else the reference.

Usage: python trainer_engine_run.py OUTPUT_DIR ENGINE [ENGINE ...], each ENGINE one of
``fsdp`` (FSDP2, full state dict), ``ds-auto`` (ZeRO-2, optimizer and scheduler sections with
"auto" values), ``ds-explicit`` (the same sections with values), ``ds-no-optimizer`` (no
optimizer or scheduler section: the Trainer's own AdamW and schedule). The engines run one
after another in the one launch; each writes under OUTPUT_DIR/ENGINE.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
from _leave_group import leave_process_group
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

STEPS = 4
SAVE_STEPS = 2
LEARNING_RATE = 1e-2


class TokenData(torch.utils.data.Dataset):
    """Fixed random token sequences (labels = inputs)."""

    def __init__(self, n: int, seq: int = 16, vocab: int = 64, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config)


def deepspeed_config(engine: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": "auto",
        "train_batch_size": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "zero_optimization": {"stage": 2},
    }
    if engine == "ds-auto":
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
        config["scheduler"] = {
            "type": "WarmupDecayLR",
            "params": {
                "total_num_steps": "auto",
                "warmup_min_lr": "auto",
                "warmup_max_lr": "auto",
                "warmup_num_steps": "auto",
            },
        }
    elif engine == "ds-explicit":
        config["optimizer"] = {
            "type": "AdamW",
            "params": {
                "lr": LEARNING_RATE,
                "betas": [0.9, 0.999],
                "eps": 1e-8,
                "weight_decay": 0.0,
            },
        }
        config["scheduler"] = {
            "type": "WarmupDecayLR",
            "params": {
                "total_num_steps": STEPS,
                "warmup_min_lr": 0.0,
                "warmup_max_lr": LEARNING_RATE,
                "warmup_num_steps": 1,  # transformers checks it against its own count: 1
            },
        }
    return config


def arguments(out: str, engine: str) -> TrainingArguments:
    engine_args: dict[str, Any]
    if engine == "fsdp":
        engine_args = {
            "fsdp": True,
            "fsdp_config": {"version": 2, "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]},
        }
    else:
        engine_args = {"deepspeed": deepspeed_config(engine)}
    return TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=4,
        max_steps=STEPS,
        learning_rate=LEARNING_RATE,
        logging_steps=1,
        save_steps=SAVE_STEPS,
        save_strategy="steps",
        eval_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
        **engine_args,
    )


def run(out: str, engine: str) -> dict[str, Any]:
    train = TokenData(32)
    trainer = Trainer(model=tiny_model(), args=arguments(out, engine), train_dataset=train)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    trainer.save_model(f"{out}/final")
    checkpoint = f"{out}/checkpoint-{SAVE_STEPS}"
    processes = trainer.accelerator.num_processes
    kind = trainer.accelerator.distributed_type
    distributed_type = str(getattr(kind, "value", kind))
    resumed = Trainer(model=tiny_model(), args=arguments(out, engine), train_dataset=train)
    resumed.train(resume_from_checkpoint=checkpoint)
    resumed_losses = [h["loss"] for h in resumed.state.log_history if "loss" in h]
    return {
        "losses": losses,
        "resumed_losses": resumed_losses,
        "num_processes": processes,
        "distributed_type": distributed_type,
        "checkpoint": sorted(os.listdir(checkpoint)),
        "saved": sorted(os.listdir(f"{out}/final")),
    }


def main() -> None:
    out, engines = sys.argv[1], sys.argv[2:]
    results = {engine: run(os.path.join(out, engine), engine) for engine in engines}
    import accelerate
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_rank() == 0:
        results["accelerate_file"] = accelerate.__file__  # type: ignore[assignment]
        print("RESULT " + json.dumps(results), flush=True)
    leave_process_group()


if __name__ == "__main__":
    main()
