"""Run on 4 processes: FSDP2 x tensor parallelism (dp_shard 2 x tp 2) against one process.

Each tensor-parallel pair reads the same batches; the two pairs read different ones. The
losses averaged over the data-parallel pairs must follow a single-process run on both pairs'
batches (the mean of two half-batch losses is the whole-batch loss).
"""

import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel.utils import FullyShardedDataParallelPlugin, ParallelismConfig, TorchTensorParallelPlugin

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fsdp_checks import TOL, Net


def main() -> None:
    plan = {"blocks.*.lin1": "colwise", "blocks.*.lin2": "rowwise"}
    config = ParallelismConfig(
        dp_shard_size=2, tp_size=2, tp_handler=TorchTensorParallelPlugin(tp_size=2, tp_plan=plan)
    )
    acc = Accelerator(
        parallelism_config=config,
        fsdp_plugin=FullyShardedDataParallelPlugin(
            fsdp_version=2,
            auto_wrap_policy="TRANSFORMER_BASED_WRAP",
            transformer_cls_names_to_wrap=["Block"],
        ),
    )
    assert acc.engine.mesh.mesh_dim_names == ("dp_shard", "tp")
    replicas, replica = acc.engine.data_parallel_rank()
    assert replicas == 2 and replica == acc.process_index // 2
    torch.manual_seed(0)
    model, reference = Net(), Net()
    reference.load_state_dict(model.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True).sin()), batch_size=8)
    model, opt, loader = acc.prepare(model, opt, data)
    whole = list(DataLoader(TensorDataset(x, x.sum(1, keepdim=True).sin()), batch_size=16))
    for (xb, yb), (xw, yw) in zip(loader, whole):
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        ref_loss = torch.nn.functional.mse_loss(reference(xw), yw)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= 4  # each of the 2 data-parallel losses appears on its 2 tensor-parallel ranks
        assert abs(mean.item() - ref_loss.item()) <= TOL, (mean.item(), ref_loss.item())
    full = acc.get_state_dict(model)
    if acc.is_main_process:
        for k, v in reference.state_dict().items():
            assert torch.allclose(full[k], v, atol=TOL), k
        print("PASSED check_fsdp_x_tp", flush=True)


if __name__ == "__main__":
    main()
