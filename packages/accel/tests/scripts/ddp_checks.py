"""Run on 2 processes: the Accelerator under DDP (gloo) against single-process references."""

import glob
import os
import sys

import torch
import torch.distributed as dist
from accel_state import AcceleratorState, GradientState
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator, DataLoaderConfiguration

sys.path.insert(0, os.path.dirname(__file__))
from step_ops import step_op_counts

OUT = sys.argv[1]


def fresh(**kwargs):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    return Accelerator(**kwargs)


def data(n=32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, x @ torch.tensor([[1.0], [2.0], [3.0], [4.0]]))


def model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def reference(batch_size):
    model, opt = model_and_opt()
    for x, y in DataLoader(data(), batch_size=batch_size):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return model.weight.detach()


def all_equal(t):
    out = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous())
    return all(torch.equal(out[0], o) for o in out)


def check_split_batches_parity():
    acc = fresh(split_batches=True)
    assert acc.num_processes == 2 and acc.distributed_type.value == "MULTI_CPU"
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=8))
    assert type(model).__name__ == "DistributedDataParallel"
    for x, y in loader:
        assert len(x) == 4
        acc.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
        opt.zero_grad()
    weight = acc.unwrap_model(model).weight.detach()
    assert torch.allclose(weight, reference(8), atol=1e-6), (weight, reference(8))
    assert isinstance(acc.unwrap_model(model), torch.nn.Linear)


def check_accumulation_parity():
    acc = fresh(split_batches=True, gradient_accumulation_steps=2)
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=4))
    for x, y in loader:
        with acc.accumulate(model):
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
    assert torch.allclose(acc.unwrap_model(model).weight.detach(), reference(8), atol=1e-6)


def check_no_sync():
    acc = fresh()
    model, _ = model_and_opt()
    model = acc.prepare(model)
    x = torch.full((1, 4), float(acc.process_index + 1))
    with acc.no_sync(model):
        model(x).sum().backward()
    assert not all_equal(model.module.weight.grad), "no_sync still all-reduced"
    model.zero_grad()
    model(x).sum().backward()
    assert all_equal(model.module.weight.grad)
    model.zero_grad()
    with acc.no_sync(model):
        loss_a = model(x).sum()
        loss_b = model(x * 2).sum()
    acc.backward(loss_a)  # accumulates locally
    assert not all_equal(model.module.weight.grad)
    with acc.trigger_sync_in_backward(model):
        acc.backward(loss_b)  # synchronises everything accumulated so far
    assert all_equal(model.module.weight.grad), "trigger_sync_in_backward did not sync"


def check_gather_for_metrics():
    for n, bs, split in [(13, 2, False), (7, 4, False), (11, 4, True), (1, 1, False)]:
        acc = fresh(split_batches=split)
        ds = TensorDataset(torch.arange(n))
        loader = acc.prepare(DataLoader(ds, batch_size=bs))
        seen, objects = [], []
        for (batch,) in loader:
            seen.append(acc.gather_for_metrics(batch))
            objects += acc.gather_for_metrics(batch.tolist(), use_gather_object=True)
        got = torch.cat(seen).tolist()
        assert sorted(got) == list(range(n)), (n, bs, split, got)
        assert sorted(objects) == list(range(n)), (n, bs, split, objects)


def check_triggers_and_reduce():
    acc = fresh()
    if acc.process_index == 1:
        acc.set_trigger()
    assert acc.check_trigger() and not acc.check_trigger()
    total = acc.reduce(torch.tensor([float(acc.process_index + 1)]))
    assert total.item() == 3.0
    padded = acc.pad_across_processes(torch.ones(acc.process_index + 1))
    assert padded.shape == (2,)
    assert acc.gather(torch.tensor([acc.process_index])).tolist() == [0, 1]


def check_join_uneven_inputs():
    acc = fresh(dataloader_config=DataLoaderConfiguration(even_batches=False))
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(n=5), batch_size=1))
    batches = 0
    with acc.join_uneven_inputs([model]):
        for x, y in loader:
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
            batches += 1
    assert batches == (3 if acc.process_index == 0 else 2), batches


def check_step_matches_hand_written_ddp():
    # The same ops and collectives per step as a hand-written DDP loop: no autocast, loss
    # division, grad scaler or extra collective (e.g. a sync flag all-reduced per step).
    acc = fresh()
    model, _ = model_and_opt()
    loader = DataLoader(data(), batch_size=4)
    model, opt, loader = acc.prepare(model, torch.optim.AdamW(model.parameters()), loader)
    mse = torch.nn.functional.mse_loss
    ours = step_op_counts(model, opt, list(loader)[:4], mse, acc.backward)
    hand, _ = model_and_opt()
    hand = torch.nn.parallel.DistributedDataParallel(hand)
    sampler = torch.utils.data.DistributedSampler(data(), shuffle=False)
    hand_loader = DataLoader(data(), batch_size=4, sampler=sampler)
    hand_opt = torch.optim.AdamW(hand.parameters())
    plain = step_op_counts(hand, hand_opt, list(hand_loader)[:4], mse, lambda x: x.backward())
    assert ours == plain, {"only accel": ours - plain, "only hand-written": plain - ours}
    assert plain["c10d::allreduce_"] > 0


def check_one_tracker_run():
    acc = fresh(log_with="tensorboard", project_dir=os.path.join(OUT, "runs"))
    acc.init_trackers("demo", config={"lr": 0.1, "nested": {"a": 1}, "none": None})
    acc.log({"loss": torch.tensor(0.5), "nested": {"acc": 1}}, step=1)
    tracker = acc.get_tracker("tensorboard")
    tracker.log({"x": 1}, step=2)  # a no-op on process 1, never an error
    acc.end_training()
    acc.end_training()
    acc.wait_for_everyone()
    files = glob.glob(os.path.join(OUT, "runs", "**", "events.out.tfevents*"), recursive=True)
    assert len(files) == 1, files


def check_engine_without_accelerator():
    # The DDP engine driven from an EngineContext alone, with no Accelerator built: it wraps
    # the model, averages the gradients of the two halves of a batch, and reads its inputs
    # from the context only.
    from accel._core._prepared_objects import PreparedObjects
    from accel._engines import DDPEngine, EngineContext, engine_for

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    prepared = PreparedObjects()
    state = AcceleratorState(cpu=True)
    context = EngineContext(state=state, gradient_state=GradientState(), prepared=prepared)
    engine = engine_for(context)
    assert type(engine) is DDPEngine and not hasattr(engine, "accelerator")
    assert engine.data_parallel_rank() == (2, dist.get_rank())
    model, opt = model_and_opt()
    wrapped = engine.wrap_model(engine.place_model(model), evaluation_mode=False)
    assert engine.is_wrapped(wrapped) and engine.unwrap(wrapped) is model
    assert engine.adapt_optimizer(opt) is opt
    x, y = data().tensors
    half = slice(16 * dist.get_rank(), 16 * (dist.get_rank() + 1))
    engine.backward(torch.nn.functional.mse_loss(wrapped(x[half]), y[half]))
    opt.step()
    ref, ref_opt = model_and_opt()
    torch.nn.functional.mse_loss(ref(x), y).backward()
    ref_opt.step()
    for mine, theirs in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(mine, theirs, atol=1e-6), (mine, theirs)
    assert prepared.models == [] and prepared.optimizers == []  # the facade registers those


for check in [
    check_engine_without_accelerator,
    check_split_batches_parity,
    check_accumulation_parity,
    check_no_sync,
    check_gather_for_metrics,
    check_triggers_and_reduce,
    check_join_uneven_inputs,
    check_one_tracker_run,
    check_step_matches_hand_written_ddp,
]:
    check()
    dist.barrier()
    if dist.get_rank() == 0:
        print("PASSED", check.__name__, flush=True)
