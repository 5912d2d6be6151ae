"""Launched by tests/test_megatron_engine.py with ``--use_megatron_lm --megatron_lm_tp_degree 2``
on 2 CUDA GPUs: a model built from megatron-core's tensor-parallel layers trains, each rank
holding half of each layer, and ``save_state`` / ``load_state`` round-trip the shards.

Prints ``MEGATRON-TP ok`` on each process when its checks hold."""

import os
import sys

import torch
from accel import Accelerator

accelerator = Accelerator()  # forms megatron-core's groups: the layers below need them

from megatron.core import parallel_state, tensor_parallel  # noqa: E402
from megatron.core.model_parallel_config import ModelParallelConfig  # noqa: E402

assert parallel_state.get_tensor_model_parallel_world_size() == 2
config = ModelParallelConfig(tensor_model_parallel_size=2, use_cpu_initialization=True)
init = torch.nn.init.normal_


class TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = tensor_parallel.ColumnParallelLinear(
            8, 16, config=config, init_method=init, bias=False, gather_output=False
        )
        self.down = tensor_parallel.RowParallelLinear(
            16,
            8,
            config=config,
            init_method=init,
            bias=False,
            input_is_parallel=True,
            skip_bias_add=True,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.up(x)
        out, _ = self.down(torch.tanh(hidden))
        return out


torch.manual_seed(0)
model = TwoLayers()
assert model.up.weight.shape == (8, 8)  # half of the 16 output features on each rank
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
x = torch.randn(4, 8, device=accelerator.device)
for _ in range(2):
    loss = model(x).pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
accelerator.save_state(os.path.join(sys.argv[1], "tp"))
saved = {k: v.clone() for k, v in accelerator.unwrap_model(model).state_dict().items()}
loss = model(x).pow(2).mean()
accelerator.backward(loss)
optimizer.step()
accelerator.load_state(os.path.join(sys.argv[1], "tp"))
restored = accelerator.unwrap_model(model).state_dict()
assert all(torch.equal(restored[k], v) for k, v in saved.items())
os.write(1, b"MEGATRON-TP ok\n")
accelerator.wait_for_everyone()
