"""Evaluate a regression model with transformers' Trainer on 66 samples in batches of 8 (the
last batch holds 2) and print the evaluation loss as JSON on the main process. Run under either
library (ACCEL_AS_ACCELERATE=1 for accel).

Usage: python trainer_eval_run.py OUTPUT_DIR [--map] [--memory]
(--map: a map-style dataset instead of an IterableDataset without a length; --memory: also
record the memory metrics and print their names.)
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from _leave_group import leave_process_group
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel, Trainer, TrainingArguments


class LineConfig(PretrainedConfig):
    model_type = "eval-line"

    def __init__(self, a: float = 1.5, b: float = 2.5, **kwargs: object) -> None:
        self.a, self.b = a, b
        super().__init__(**kwargs)


class Line(PreTrainedModel):
    """y = a * x + b, with the mean squared error as the loss."""

    config_class = LineConfig
    base_model_prefix = "line"

    def __init__(self, config: LineConfig) -> None:
        super().__init__(config)
        self.a = nn.Parameter(torch.tensor(config.a).float())
        self.b = nn.Parameter(torch.tensor(config.b).float())
        self.post_init()

    def forward(self, input_x: torch.Tensor, labels: torch.Tensor | None = None) -> tuple:
        y = input_x * self.a + self.b
        if labels is None:
            return (y,)
        return (nn.functional.mse_loss(y, labels), y)


def samples(n: int = 66) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    x = rng.normal(size=(n,)).astype(np.float32)
    y = (2.0 * x + 3.0 + rng.normal(scale=0.1, size=(n,))).astype(np.float32)
    return x, y


class Stream(torch.utils.data.IterableDataset):
    def __init__(self) -> None:
        self.x, self.y = samples()

    def __iter__(self):
        for x, y in zip(self.x, self.y, strict=True):
            yield {"input_x": x, "labels": y}


class Table(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.x, self.y = samples()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"input_x": self.x[i], "labels": self.y[i]}


def main() -> None:
    data = Table() if "--map" in sys.argv else Stream()
    args = TrainingArguments(
        output_dir=sys.argv[1],
        per_device_eval_batch_size=8,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        skip_memory_metrics="--memory" not in sys.argv,
    )
    trainer = Trainer(model=Line(LineConfig()), args=args, eval_dataset=data)
    metrics = trainer.evaluate()
    exact = float(((1.5 * data.x + 2.5 - data.y) ** 2).mean())
    import accelerate

    if trainer.accelerator.is_main_process:
        result = {
            "eval_loss": metrics["eval_loss"],
            "exact": exact,
            "memory_keys": sorted(k for k in metrics if "_mem_" in k),
            "num_processes": trainer.accelerator.num_processes,
            "accelerate_file": accelerate.__file__,
        }
        print("RESULT " + json.dumps(result), flush=True)
    del trainer
    leave_process_group()


if __name__ == "__main__":
    main()
