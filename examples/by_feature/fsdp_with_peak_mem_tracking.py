"""FSDP with peak-memory tracking: the model's parameters, gradients and optimizer states are
sharded across processes, and each epoch reports the memory it took.

The script names no plugin: the launcher's FSDP flags (or an ``accel config`` file) choose
FSDP. On a GPU the numbers come from the device allocator; on a CPU from the process's
resident memory, sampled while the block runs. The script also reports how many parameters
this process holds: about 1 / number of processes of the model under FSDP.

    accel launch --num_processes 2 --use_fsdp --fsdp_version 2 \
        examples/by_feature/fsdp_with_peak_mem_tracking.py
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from accel.utils import DistributedType, set_seed
from toy_task import (
    ToyClassifier,
    ToyConfig,
    base_parser,
    compute_loss,
    evaluate,
    make_dataloaders,
    parse,
)

MB = 2**20


class PeakMemory:
    """Context manager: memory in use when it starts, and the peak while it runs (bytes)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.begin = self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _in_use(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.memory_allocated(self.device)
        import psutil  # the CPU has no allocator statistics: read the resident memory

        return int(psutil.Process().memory_info().rss)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._in_use())

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.begin = self.peak = self._in_use()
        if self.device.type != "cuda":
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        else:
            self.peak = torch.cuda.max_memory_allocated(self.device)
        self.peak = max(self.peak, self._in_use())


def local_parameters(model: torch.nn.Module) -> int:
    """Parameters stored on this process (the local shard of each sharded tensor)."""
    return sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--hidden_size", type=int, default=64)
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    if accelerator.distributed_type != DistributedType.FSDP:
        accelerator.print(
            f"note: running as {accelerator.distributed_type.value}, not FSDP; launch with "
            "--use_fsdp to shard the model."
        )
    set_seed(args.seed)
    train_loader, eval_loader = make_dataloaders(args.batch_size)
    model = ToyClassifier(ToyConfig(hidden_size=args.hidden_size, num_layers=4))
    total = sum(p.numel() for p in model.parameters())
    # Prepare the model first: FSDP replaces its parameters by shards, which the optimizer
    # must hold.
    model = accelerator.prepare(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    optimizer, train_loader, eval_loader = accelerator.prepare(optimizer, train_loader, eval_loader)
    held = local_parameters(model)

    for epoch in range(args.num_epochs):
        with PeakMemory(accelerator.device) as memory:
            for batch in train_loader:
                accelerator.backward(compute_loss(model, batch))
                optimizer.step()
                optimizer.zero_grad()
        accelerator.print(
            f"epoch {epoch}: memory at start {memory.begin / MB:.1f} MB, peak "
            f"{memory.peak / MB:.1f} MB (+{(memory.peak - memory.begin) / MB:.1f} MB)"
        )
    accuracy, _ = evaluate(accelerator, model, eval_loader)
    accelerator.print(
        f"fsdp: {accelerator.distributed_type.value} on {accelerator.num_processes} processes, "
        f"this process holds {held} of {total} parameters, accuracy {accuracy:.4f}"
    )
    return {"held": held, "total": total, "accuracy": accuracy}


if __name__ == "__main__":
    main()
