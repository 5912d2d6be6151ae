"""Train, evaluate, save and resume a tiny causal LM with transformers' Trainer; print the
losses as JSON on the main process. Run under either library: with ACCEL_AS_ACCELERATE=1 (or
accel launch --as_accelerate) transformers' `import accelerate` gets accel, else the reference.

Usage: python trainer_run.py OUTPUT_DIR [--peft]
"""

from __future__ import annotations

import json
import sys

import torch
from _leave_group import leave_process_group
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


class TokenData(torch.utils.data.Dataset):
    """Fixed random token sequences (labels = inputs)."""

    def __init__(self, n: int, seq: int = 16, vocab: int = 64, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def tiny_model(peft: bool) -> torch.nn.Module:
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
    model = LlamaForCausalLM(config)
    if peft:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    return model


def arguments(out: str, max_steps: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        max_steps=max_steps,
        learning_rate=1e-2,
        logging_steps=1,
        save_steps=3,
        save_strategy="steps",
        eval_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def main() -> None:
    out = sys.argv[1]
    peft = "--peft" in sys.argv
    train, evaluation = TokenData(48), TokenData(16, seed=1)
    trainer = Trainer(
        model=tiny_model(peft), args=arguments(out, 6), train_dataset=train, eval_dataset=evaluation
    )
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    metrics = trainer.evaluate()
    trainer.save_model(f"{out}/final")
    # Resume from the step-3 checkpoint in a fresh Trainer: the last three steps again.
    resumed = Trainer(
        model=tiny_model(peft), args=arguments(out, 6), train_dataset=train, eval_dataset=evaluation
    )
    resumed.train(resume_from_checkpoint=f"{out}/checkpoint-3")
    resumed_losses = [h["loss"] for h in resumed.state.log_history if "loss" in h]
    import accelerate

    if trainer.accelerator.is_main_process:
        print(
            "RESULT "
            + json.dumps(
                {
                    "losses": losses,
                    "eval_loss": metrics["eval_loss"],
                    "resumed_losses": resumed_losses,
                    "num_processes": trainer.accelerator.num_processes,
                    "accelerate_file": accelerate.__file__,
                    "saved": sorted(__import__("os").listdir(f"{out}/final")),
                }
            ),
            flush=True,
        )
    del trainer, resumed  # the DDP wrappers go while the process group is still registered
    leave_process_group()


if __name__ == "__main__":
    main()
