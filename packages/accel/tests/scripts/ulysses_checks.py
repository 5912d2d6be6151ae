"""DeepSpeed Ulysses on 2 processes (launched with --parallelism_config_sp_size 2): each process
sees its half of every sequence, and the attention output, logits, loss and weights after
each of two SGD steps equal those of the unsplit model trained on one process; then a
checkpoint saved inside a group of slices (``save_state`` into the folder given as first
argument) resumes to the same slice and, bit for bit, the same weights, and
``skip_first_batches`` skips slices. Prints ``RESULT failed=[...]`` on the main process."""

import copy
import json
import os
import sys

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from accel import Accelerator
from accel.utils import sequence_parallel_loss

VOCAB, LENGTH, LR = 64, 16, 0.1
TOL = 1e-5  # float32; the split run adds the same terms in another order


def build() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=LENGTH,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def samples() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    out = []
    for masked in (3, 11):  # the halves count different numbers of tokens in the loss
        ids = torch.randint(0, VOCAB, (LENGTH,), generator=g)
        labels = ids.clone()
        labels[:masked] = -100
        out.append({"input_ids": ids, "position_ids": torch.arange(LENGTH), "labels": labels})
    return out


def attention_output(model: torch.nn.Module, store: list[torch.Tensor]) -> None:
    layer = model.model.layers[0].self_attn
    layer.register_forward_hook(lambda mod, args, out: store.append(out[0].detach().clone()))


def train_step(acc, model, optimizer, batch):
    """One SGD step on this process's slice, with the loss averaged over the group."""
    out = model(**batch)
    local = F.cross_entropy(
        out.logits.view(-1, VOCAB).float(), batch["shift_labels"].view(-1), ignore_index=-100
    )
    loss = sequence_parallel_loss(local, batch["shift_labels"])
    acc.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    return out, loss


def resume_checks(acc, model, optimizer, loader, folder: str) -> dict[str, bool]:
    """Save after the first slice of a group, train on the second, load, train it again."""
    batches = iter(loader)
    train_step(acc, model, optimizer, next(batches))  # epoch 1, slice 0 of the group
    position = loader.state_dict()
    acc.save_state(folder)
    expected = next(batches)  # slice 1 of the same group
    train_step(acc, model, optimizer, expected)
    trained = {n: p.detach().clone() for n, p in acc.unwrap_model(model).named_parameters()}
    del batches
    acc.load_state(folder)
    resumed = next(iter(loader))
    train_step(acc, model, optimizer, resumed)
    params = dict(acc.unwrap_model(model).named_parameters())
    skipped = next(iter(acc.skip_first_batches(loader, 1)))  # slice 1 of the group again
    with open(os.path.join(folder, "accel_checkpoint.json"), encoding="utf-8") as handle:
        listed = set(json.load(handle)["files"])
    # ZeRO 1 partitions the optimizer over the 2 processes of the group (one file each); the
    # weights are replicated, written once.
    engine_files = {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(2)}
    engine_files.add("mp_rank_00_model_states.pt")
    return {
        "mid_group_position": position["sequence_parallel_offset"] == 1
        and position["batches_yielded"] == 0
        and position["epoch"] == 1,
        "resumed_slice": sorted(resumed) == sorted(expected)
        and all(torch.equal(resumed[k], expected[k]) for k in expected),
        "skipped_slice": all(torch.equal(skipped[k], expected[k]) for k in expected),
        "resumed_weights": all(torch.equal(params[n], w) for n, w in trained.items()),
        "engine_files": set(os.listdir(os.path.join(folder, "deepspeed_model_0"))) == engine_files,
        "manifest_lists_them": {f"deepspeed_model_0/{f}" for f in engine_files} <= listed,
    }


def main() -> None:
    data = samples()
    model = build()
    reference = copy.deepcopy(model)
    ref_attn: list[torch.Tensor] = []
    attention_output(reference, ref_attn)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=LR)
    expected = []
    for sample in data:  # the unsplit model, one process, before Ulysses takes over attention
        batch = {k: v[None] for k, v in sample.items()}
        out = reference(**batch)
        out.loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        weights = {n: p.detach().clone() for n, p in reference.named_parameters()}
        expected.append((out.logits.detach(), out.loss.detach(), ref_attn[-1], weights))

    acc = Accelerator()
    loader = torch.utils.data.DataLoader(data, batch_size=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    rank = acc.process_index
    config = acc.deepspeed_plugin.deepspeed_config
    checks = {
        "type": acc.distributed_type.value == "DEEPSPEED",
        "sp_size": acc.parallelism_config.sp_size == 2,
        "train_batch_size": config["train_batch_size"] == 1,  # 1 x 1 step x 1 replica
        "adapter_idempotent": acc.deepspeed_ulysses_dl_adapter(loader, model) is loader,
        "length": len(loader) == 2,
    }
    attn: list[torch.Tensor] = []
    attention_output(acc.unwrap_model(model), attn)
    half = slice(rank * LENGTH // 2, (rank + 1) * LENGTH // 2)
    worst = 0.0
    for step, batch in enumerate(loader):
        sample = data[step]  # step 0: the batch read by process 0, step 1: by process 1
        shifted = torch.cat([sample["labels"][1:], torch.tensor([-100])])
        checks[f"half_{step}"] = (
            torch.equal(batch["input_ids"][0], sample["input_ids"][half])
            and torch.equal(batch["position_ids"][0], sample["position_ids"][half])
            and torch.equal(batch["shift_labels"][0], shifted[half])
            and "labels" not in batch
        )
        logits_ref, loss_ref, attn_ref, weights_ref = expected[step]
        out, loss = train_step(acc, model, optimizer, batch)
        diffs = {
            "logits": (out.logits.detach() - logits_ref[:, half]).abs().max(),
            "attention": (attn[-1] - attn_ref[:, half]).abs().max(),
            "loss": (loss.detach() - loss_ref).abs(),
        }
        params = dict(acc.unwrap_model(model).named_parameters())
        diffs["weights"] = max((params[n] - w).abs().max() for n, w in weights_ref.items())
        moved = max((w - p).abs().max() for p, w in zip(build().parameters(), weights_ref.values()))
        checks[f"moved_{step}"] = bool(moved > 100 * TOL)  # the step changed the weights
        for name, diff in diffs.items():
            worst = max(worst, float(diff))
            checks[f"{name}_{step}"] = bool(diff <= TOL)
    checks.update(resume_checks(acc, model, optimizer, loader, sys.argv[1]))
    try:
        acc.prepare(build())
        checks["second_model_refused"] = False
    except RuntimeError as err:
        checks["second_model_refused"] = "second model" in str(err)
    failed = [k for k, v in checks.items() if v is False]
    print(f"rank {rank} checks {checks} worst difference {worst:.2e}", flush=True)
    if rank == 0:
        print(f"RESULT failed={failed} worst={worst:.2e}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
