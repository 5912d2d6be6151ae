"""Launched by tests/test_launch_engines.py: the Accelerator takes its engine from the
launcher's flags alone (no plugin in the script), trains a few steps and reports what it ran."""

import torch
from accel import Accelerator
from torch.utils.data import DataLoader, TensorDataset

acc = Accelerator()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
model, optimizer, loader = acc.prepare(model, optimizer, loader)
losses = []
for inputs, targets in loader:
    with acc.accumulate(model):
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        acc.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    losses.append(acc.reduce(loss.detach(), "mean").item())
detail = ""
if acc.distributed_type.value == "DEEPSPEED":
    detail = f" zero_stage={acc.state.deepspeed_plugin.zero_stage}"
acc.print(
    f"RESULT type={acc.distributed_type.value} processes={acc.num_processes} "
    f"accumulation={acc.gradient_accumulation_steps}{detail} "
    f"decreased={losses[-1] < losses[0]}"
)
