"""Context parallelism on 2 processes: output, loss and gradients of cp_size=2 against the
unsplit model on one process, for both ways of passing keys and values around the ring and
for balanced and unbalanced splits; buffers restored; the batch shared by both processes; the
sharded model and optimizer through save_state / load_state (folder: first argument)."""

import copy
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from accel import Accelerator
from accel.utils import ParallelismConfig, TorchContextParallelConfig

VOCAB, DIM, HEADS, MAX_LEN = 32, 16, 2, 64


class TinyAttention(nn.Module):
    """Embedding with learned positions, one causal attention block, an MLP and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(MAX_LEN, DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids) + self.pos(position_ids)
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, DIM))
        x = x + self.mlp(x)
        return self.head(x)


def batch(length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(length)
    ids = torch.randint(0, VOCAB, (2, length), generator=g)
    positions = torch.arange(length).expand(2, length).contiguous()
    labels = torch.randint(0, VOCAB, (2, length), generator=g)
    return ids, positions, labels


def loss_of(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def main() -> None:
    torch.manual_seed(0)
    model = TinyAttention()
    reference = copy.deepcopy(model)
    handler = TorchContextParallelConfig(cp_comm_strategy="allgather")
    acc = Accelerator(parallelism_config=ParallelismConfig(cp_size=2, cp_handler=handler))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.arange(8), batch_size=2)
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    rank = acc.process_index
    checks = {
        "type": acc.distributed_type.value,
        "cp_rank": acc.context_parallel_rank == rank,
        "mesh": acc.torch_device_mesh.mesh_dim_names,
    }
    # Both processes of the cp group read the same batches.
    mine = torch.cat(list(loader))
    both = [torch.zeros_like(mine) for _ in range(2)]
    dist.all_gather(both, mine)
    checks["same_batches"] = torch.equal(both[0], both[1]) and mine.numel() == 8

    worst = 0.0
    for strategy, length in (("allgather", 16), ("alltoall", 16), ("alltoall", 18)):
        handler.cp_comm_strategy = strategy
        ids, positions, labels = batch(length)
        reference.zero_grad()
        ref_logits = reference(ids, positions)
        ref_loss = loss_of(ref_logits, labels)
        ref_loss.backward()
        optimizer.zero_grad()
        expected = ref_logits.detach().clone()
        original_ids = ids.clone()
        with acc.maybe_context_parallel(
            buffers=[ids, positions, labels, expected],
            buffer_seq_dims=[1, 1, 1, 1],
            no_restore_buffers={labels, expected},
        ):
            assert ids.shape[1] == length // 2, ids.shape
            logits = model(ids, positions)
            loss = loss_of(logits, labels)
            acc.backward(loss)
        worst = max(worst, float((logits.detach() - expected).abs().max()))
        checks[f"out_{strategy}_{length}"] = torch.allclose(logits, expected, atol=1e-5)
        total = loss.detach().clone()
        dist.all_reduce(total)
        checks[f"loss_{strategy}_{length}"] = torch.allclose(total / 2, ref_loss, atol=1e-5)
        grads_ok = True
        for (name, p), (_, q) in zip(
            acc.unwrap_model(model).named_parameters(), reference.named_parameters()
        ):
            grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            worst = max(worst, float((grad - q.grad).abs().max()))
            if not torch.allclose(grad, q.grad, atol=1e-5, rtol=1e-4):
                grads_ok = False
                print(f"rank {rank} {strategy} {length}: gradient of {name} differs", flush=True)
        checks[f"grads_{strategy}_{length}"] = grads_ok
        checks[f"restored_{strategy}_{length}"] = torch.equal(ids, original_ids) and (
            labels.shape[1] == length // 2
        )

    # The sharded model and optimizer go through save_state / load_state.
    optimizer.step()
    folder = sys.argv[1]
    acc.save_state(folder)
    saved = acc.get_state_dict(model)
    optimizer.step()  # move away from the saved weights (the gradients are still there)
    moved = acc.get_state_dict(model)
    acc.load_state(folder)
    again = acc.get_state_dict(model)
    if rank == 0:
        checks["checkpoint_moved"] = any(not torch.equal(saved[k], moved[k]) for k in saved)
        checks["checkpoint"] = bool(saved) and all(torch.equal(saved[k], again[k]) for k in saved)

    try:
        with acc.maybe_context_parallel(buffers=[torch.zeros(1, 7)], buffer_seq_dims=[1]):
            pass
        checks["odd_length_refused"] = False
    except ValueError as err:
        checks["odd_length_refused"] = "multiple of" in str(err) and "got sequence length 7" in str(
            err
        )
    failed = [k for k, v in checks.items() if v is False]
    print(f"rank {rank} checks {checks} worst difference {worst:.2e}", flush=True)
    if rank == 0:
        print(f"RESULT type={checks['type']} mesh={checks['mesh']} failed={failed}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
