"""The Accelerator on one process: every public method."""

import copy
import json

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator, DataLoaderConfiguration, find_executable_batch_size
from accel.utils import (
    AutocastKwargs,
    DistributedDataParallelKwargs,
    GradientAccumulationPlugin,
    GradScalerKwargs,
    ProfileKwargs,
)


def data(n=32, features=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = x @ torch.arange(1.0, features + 1).unsqueeze(1) + 0.1
    return TensorDataset(x, y)


def model_and_opt(seed=0, lr=0.05):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 1)
    return model, torch.optim.SGD(model.parameters(), lr=lr)


def train(accelerator, model, opt, loader, sched=None, accumulate=False):
    for x, y in loader:
        ctx = accelerator.accumulate(model) if accumulate else torch.enable_grad()
        with ctx:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
            if sched is not None:
                sched.step()
            opt.zero_grad()
    return model


def test_prepare_any_order_and_single_object():
    acc = Accelerator(cpu=True)
    model, opt = model_and_opt()
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    loader = DataLoader(data(), batch_size=8)
    s2, l2, o2, m2 = acc.prepare(sched, loader, opt, model)
    assert type(s2).__name__ == "AcceleratedScheduler" and s2.optimizers[0] is o2
    assert type(o2).__name__ == "AcceleratedOptimizer" and m2 is model
    assert len(list(l2)) == 4
    assert acc.prepare(model) is model
    other = object()
    assert acc.prepare(other) is other


def test_device_placement_list_length_is_checked():
    acc = Accelerator(cpu=True)
    with pytest.raises(ValueError, match="one flag per object"):
        acc.prepare(torch.nn.Linear(1, 1), device_placement=[True, False])


def test_scheduler_before_optimizer_is_a_clear_error():
    acc = Accelerator(cpu=True)
    _, opt = model_and_opt()
    with pytest.raises(ValueError, match="optimizer to be prepared first"):
        acc.prepare_scheduler(torch.optim.lr_scheduler.StepLR(opt, 1))


def test_training_matches_plain_pytorch():
    acc = Accelerator(cpu=True)
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=8))
    train(acc, model, opt, loader)
    ref, ref_opt = model_and_opt()
    for x, y in DataLoader(data(), batch_size=8):
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    assert torch.equal(model.weight, ref.weight)


def test_accumulation_equals_one_big_batch():
    acc = Accelerator(cpu=True, gradient_accumulation_steps=4)
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=2))
    sched = acc.prepare(torch.optim.lr_scheduler.LambdaLR(opt.optimizer, lambda s: 1.0))
    train(acc, model, opt, loader, sched, accumulate=True)
    ref, ref_opt = model_and_opt()
    for x, y in DataLoader(data(), batch_size=8):
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    assert torch.allclose(model.weight, ref.weight, atol=1e-6)


def test_accumulation_syncs_at_end_of_loader():
    acc = Accelerator(cpu=True, gradient_accumulation_steps=3)
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(n=10), batch_size=2))
    syncs = []
    for _batch in loader:
        with acc.accumulate(model):
            syncs.append(acc.sync_gradients)
    assert syncs == [False, False, True, False, True]  # 5 batches: 3rd and last sync


def test_plugin_and_steps_conflict():
    with pytest.raises(ValueError, match="not both"):
        Accelerator(
            cpu=True,
            gradient_accumulation_steps=2,
            gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=2),
        )


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_close_to_fp32(precision):
    results = {}
    for mp in ("no", precision):
        from accel_state import AcceleratorState, GradientState

        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        # A modest initial loss scale: the default (2**16) skips the first steps on overflow.
        acc = Accelerator(
            cpu=True, mixed_precision=mp, kwargs_handlers=[GradScalerKwargs(init_scale=2.0**8)]
        )
        model, opt = model_and_opt()
        model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=8))
        for _ in range(5):
            train(acc, model, opt, loader)
        out = model(torch.ones(2, 4))
        assert out.dtype == torch.float32  # outputs come back in fp32
        results[mp] = model.weight.detach().clone()
    assert torch.allclose(results["no"], results[precision], atol=5e-2)
    assert not torch.equal(results["no"], results[precision])  # autocast really ran


def test_autocast_context():
    acc = Accelerator(cpu=True, mixed_precision="bf16")
    lin = torch.nn.Linear(2, 2)
    with acc.autocast():
        assert lin(torch.ones(1, 2)).dtype == torch.bfloat16
    with acc.autocast(AutocastKwargs(enabled=False)):
        assert lin(torch.ones(1, 2)).dtype == torch.float32


def test_fp16_overflow_skips_step_and_scheduler():
    acc = Accelerator(
        cpu=True, mixed_precision="fp16", kwargs_handlers=[GradScalerKwargs(init_scale=2.0**20)]
    )
    model, opt = model_and_opt()
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    model, opt, sched = acc.prepare(model, opt, sched)
    before = model.weight.detach().clone()
    loss = model(torch.full((1, 4), 1e4)).sum() * 1e4  # gradients overflow in fp16 scaling
    acc.backward(loss)
    opt.step()
    sched.step()
    assert opt.step_was_skipped and acc.optimizer_step_was_skipped
    assert torch.equal(model.weight, before)
    assert sched.get_last_lr() == [0.05]


def test_clip_grad_norm_and_value():
    acc = Accelerator(cpu=True)
    model, opt = model_and_opt()
    model, opt = acc.prepare(model, opt)
    acc.backward(model(torch.full((1, 4), 100.0)).sum())
    norm = acc.clip_grad_norm_(model.parameters(), 1.0)
    assert (
        norm > 1
        and torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()]))
        <= 1.0 + 1e-5
    )
    acc.clip_grad_value_(model.parameters(), 0.01)
    assert all(p.grad.abs().max() <= 0.01 for p in model.parameters())


def test_collectives_on_one_process():
    acc = Accelerator(cpu=True)
    t = torch.arange(3.0)
    assert torch.equal(acc.gather(t), t)
    assert torch.equal(acc.reduce(t), t)
    assert torch.equal(acc.pad_across_processes(t), t)
    assert acc.gather_for_metrics({"a": t})["a"].tolist() == [0.0, 1.0, 2.0]
    assert acc.gather_for_metrics([1, 2], use_gather_object=True) == [1, 2]
    with acc.split_between_processes([1, 2, 3]) as share:
        assert share == [1, 2, 3]


def test_process_control_and_triggers(capsys):
    acc = Accelerator(cpu=True)
    assert acc.on_main_process(lambda: 1)() == 1
    assert acc.on_process(lambda: 2, process_index=0)() == 2
    assert acc.on_local_process(local_process_index=1)(lambda: 3)() is None
    assert acc.on_last_process(lambda: 4)() == 4
    with acc.main_process_first(), acc.local_main_process_first():
        acc.wait_for_everyone()
    acc.print("hello")
    assert "hello" in capsys.readouterr().out
    assert not acc.check_trigger()
    acc.set_trigger()
    assert acc.check_trigger() and not acc.check_trigger()


def test_unwrap_model_and_fp32_wrapper():
    acc = Accelerator(cpu=True, mixed_precision="bf16")
    model = acc.prepare(torch.nn.Linear(2, 2))
    assert acc.unwrap_model(model) is model
    inner = acc.unwrap_model(model, keep_fp32_wrapper=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert inner(torch.ones(1, 2)).dtype == torch.bfloat16  # wrapper removed


def test_compile_and_regional_compile_unwrap():
    from accel.utils import TorchDynamoPlugin

    acc = Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="eager"))
    model = acc.prepare(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    assert type(model).__name__ == "OptimizedModule"
    assert isinstance(acc.unwrap_model(model, keep_torch_compile=False), torch.nn.Sequential)
    assert model(torch.ones(1, 2)).shape == (1, 2)
    from accel import compile_regions

    blocks = torch.nn.Module()
    blocks.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
    compiled = compile_regions(blocks, backend="eager")
    assert all(type(layer).__name__ == "OptimizedModule" for layer in compiled.layers)
    assert acc.unwrap_model(compiled, keep_torch_compile=False) is blocks


def test_skip_first_batches_keeps_settings():
    acc = Accelerator(cpu=True)
    loader = acc.prepare(DataLoader(data(n=10), batch_size=4, drop_last=True))
    skipped = acc.skip_first_batches(loader, 1)
    assert len(list(skipped)) == 1  # 2 full batches (drop_last), 1 skipped


def test_find_executable_batch_size_halves_on_oom_only():
    tried = []

    @find_executable_batch_size(starting_batch_size=64)
    def run(batch_size):
        tried.append(batch_size)
        if batch_size > 16:
            raise RuntimeError("CUDA out of memory. Tried to allocate")
        return batch_size

    assert run() == 16 and tried == [64, 32, 16]

    @find_executable_batch_size(starting_batch_size=8)
    def broken(batch_size):
        raise ValueError("not a memory problem")

    with pytest.raises(ValueError, match="not a memory problem"):
        broken()


def test_profile_writes_chrome_trace(tmp_path):
    acc = Accelerator(cpu=True)
    with acc.profile(ProfileKwargs(output_trace_dir=str(tmp_path))):
        torch.ones(100).sum()
    trace = json.loads((tmp_path / "trace_rank_0.json").read_text())
    assert trace["traceEvents"]


def test_profile_gives_the_profiler_to_step():
    acc = Accelerator(cpu=True)
    with acc.profile() as prof:
        torch.ones(100).sum()
        prof.step()
    assert isinstance(prof, torch.profiler.profile)


def test_free_memory_resets():
    acc = Accelerator(cpu=True)
    model, opt = model_and_opt()
    acc.prepare(model, opt)
    acc.step = 5
    acc.free_memory()
    assert acc._models == [] and acc._optimizers == [] and acc.step == 0


def test_unsupported_engines_raise_clearly():
    with pytest.raises(TypeError, match="must be DeepSpeedPlugin instances"):
        Accelerator(cpu=True, deepspeed_plugin=object())
    with pytest.raises(TypeError, match="megatron_lm_plugin must be a MegatronLMPlugin"):
        Accelerator(cpu=True, megatron_lm_plugin=object())


def test_kwargs_handlers_validation():
    with pytest.raises(ValueError, match="two DistributedDataParallelKwargs"):
        Accelerator(
            cpu=True,
            kwargs_handlers=[DistributedDataParallelKwargs(), DistributedDataParallelKwargs()],
        )
    with pytest.raises(TypeError, match="KwargsHandler instances"):
        Accelerator(cpu=True, kwargs_handlers=[{"a": 1}])


def test_dataloader_config_and_split_batches():
    acc = Accelerator(
        cpu=True, dataloader_config=DataLoaderConfiguration(even_batches=False), split_batches=True
    )
    assert acc.split_batches and not acc.even_batches


def test_verify_device_map():
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(1, 1)
    assert not acc.verify_device_map(model)
    model.hf_device_map = {"a": "cpu", "b": "disk"}
    assert acc.verify_device_map(model)


def test_join_uneven_inputs_single_process():
    acc = Accelerator(cpu=True)
    with acc.join_uneven_inputs([torch.nn.Linear(1, 1)], even_batches=False):
        pass


def test_lomo_backward_updates_like_sgd_and_refuses_other_optimizers():
    """Also through ``backward(loss, learning_rate=...)`` and a no-op ``step``."""
    lomo_optim = pytest.importorskip("lomo_optim", reason="needs lomo-optim")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference = copy.deepcopy(model)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    acc = Accelerator(cpu=True)
    model, optimizer = acc.prepare(model, lomo_optim.Lomo(model, lr=0.1))
    acc.lomo_backward(torch.nn.functional.mse_loss(model(x), y), 0.1)
    torch.nn.functional.mse_loss(reference(x), y).backward()
    with torch.no_grad():
        for p in reference.parameters():
            p -= 0.1 * p.grad  # LOMO without clipping or decay is plain SGD, fused
    for mine, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine, expected)
    # transformers' Trainer(optim="lomo"): backward with the rate, then a step that does nothing
    reference.zero_grad()
    acc.backward(torch.nn.functional.mse_loss(model(x), y), learning_rate=0.1)
    optimizer.step()
    torch.nn.functional.mse_loss(reference(x), y).backward()
    with torch.no_grad():
        for p in reference.parameters():
            p -= 0.1 * p.grad
    for mine, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine, expected)

    acc.free_memory()
    other = torch.nn.Linear(2, 1)
    other, sgd = acc.prepare(other, torch.optim.SGD(other.parameters(), lr=0.1))
    with pytest.raises(ValueError, match=r"got no Lomo or AdaLomo.*\['SGD'\]"):
        acc.lomo_backward(other(torch.ones(1, 2)).sum(), 0.1)


def test_maybe_context_parallel_keeps_buffers_whole():
    acc = Accelerator(cpu=True)
    ids = torch.arange(12).reshape(2, 6)
    with acc.maybe_context_parallel(buffers=[ids], buffer_seq_dims=[1]):
        assert ids.shape == (2, 6)
    with pytest.raises(ValueError, match="one sequence dimension per buffer"):
        with acc.maybe_context_parallel(buffers=[ids], buffer_seq_dims=[1, 0]):
            pass
