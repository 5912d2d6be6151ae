"""FP8 (torchao) training under DDP on 2 processes: converted layers, synchronised weights,
and the same result as one process training on the whole batch."""

import copy

import torch
from torch.nn.parallel import DistributedDataParallel
from torchao.float8.float8_linear import Float8Linear

from accel import Accelerator


def mlp() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 4),
    )


def main() -> None:
    accelerator = Accelerator(mixed_precision="fp8", cpu=True)
    assert accelerator.num_processes == 2
    base = mlp()
    single = copy.deepcopy(base)
    model, optimizer = accelerator.prepare(base, torch.optim.SGD(base.parameters(), lr=0.05))
    assert isinstance(model, DistributedDataParallel)
    assert isinstance(model.module[2], Float8Linear)
    torch.manual_seed(1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    rank = accelerator.process_index
    for _ in range(3):
        loss = torch.nn.functional.mse_loss(
            model(x[rank * 4 : rank * 4 + 4]), y[rank * 4 : rank * 4 + 4]
        )
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    weights = model.module[2].weight.detach()
    gathered = accelerator.gather(weights.unsqueeze(0))
    assert torch.equal(gathered[0], gathered[1]), "ranks diverged"

    # One process on the whole batch, same FP8 conversion and autocast: same weights up to
    # the FP8 scales, which are per shard under DDP (dynamic scaling per micro-batch).
    from accel_precision import AORecipeKwargs, autocast_context, convert_model_to_fp8

    convert_model_to_fp8(single, AORecipeKwargs())
    reference = torch.optim.SGD(single.parameters(), lr=0.05)
    for _ in range(3):
        with autocast_context("fp8", "cpu"):
            out = single(x)
        torch.nn.functional.mse_loss(out.float(), y).backward()
        reference.step()
        reference.zero_grad()
    error = (single[2].weight - weights).norm() / single[2].weight.norm()
    assert error < 0.01, float(error)
    print(f"PASSED fp8_ddp rank={rank} error={float(error):.2e}", flush=True)
    accelerator.end_training()


if __name__ == "__main__":
    main()
