"""Run on 2 processes: DeepSpeed ZeRO 1, 2, 3 against DDP on the same model and data.

Usage: ds_checks.py OUT_DIR PHASE, with PHASE ``train`` (parity, save, configs) or ``resume``
(a fresh process loads what ``train`` saved and continues). Prints ``PASSED check_<name>``.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from accel_state import AcceleratorState, DistributedType, GradientState
from safetensors.torch import load_file
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator, DeepSpeedPlugin
from accel.utils import DummyOptim, DummyScheduler

OUT, PHASE = sys.argv[1], sys.argv[2]
STEPS = 6
ACCUM = 2
TOL = 1e-5  # fp32: ZeRO reduces gradients in buckets, DDP in its own buckets: same sums


def fresh(**kwargs):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    return Accelerator(**kwargs)


def data(n=192):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    return TensorDataset(x, y)


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 1),
    )
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)


def train(acc, model, opt, loader, steps, sched=None):
    losses = []
    it = iter(loader)
    for _ in range(steps * acc.gradient_accumulation_steps):
        x, y = next(it)
        with acc.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(x), y)
            acc.backward(loss)
            opt.step()
            if sched is not None:
                sched.step()
            opt.zero_grad()
        losses.append(acc.reduce(loss.detach(), "mean").item())
    return losses


def ddp_run(steps):
    acc = fresh(gradient_accumulation_steps=ACCUM)
    model, opt = build()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=4))
    losses = train(acc, model, opt, loader, steps)
    return losses, {k: v.detach().clone() for k, v in acc.unwrap_model(model).state_dict().items()}


def ds_run(stage, steps):
    plugin = DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=ACCUM)
    acc = fresh(deepspeed_plugin=plugin)
    assert acc.distributed_type.value == "DEEPSPEED", acc.distributed_type
    assert acc.gradient_accumulation_steps == ACCUM
    model, opt = build()
    model, opt, loader = acc.prepare(model, opt, DataLoader(data(), batch_size=4))
    config = plugin.deepspeed_config
    assert config["train_micro_batch_size_per_gpu"] == 4, config
    assert config["train_batch_size"] == 4 * ACCUM * 2, config
    assert config["zero_optimization"]["stage"] == stage
    losses = train(acc, model, opt, loader, steps)
    return acc, model, losses


def close(a, b, tol=TOL):
    return all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def check_zero_parity_save():
    ddp_losses, ddp_state = ddp_run(STEPS)
    ddp_more, ddp_final = ddp_run(2 * STEPS)
    record = {"ddp": ddp_losses, "ddp_more": ddp_more[len(ddp_losses) :]}
    for stage in (1, 2, 3):
        acc, model, losses = ds_run(stage, STEPS)
        assert close(losses, ddp_losses), (stage, losses, ddp_losses)
        state = acc.get_state_dict(model)
        folder = os.path.join(OUT, f"model_zero{stage}")
        acc.save_model(model, folder)
        if acc.is_main_process:
            assert state.keys() == ddp_state.keys(), (stage, state.keys())
            saved = load_file(os.path.join(folder, "model.safetensors"))
            plain = build()[0]
            plain.load_state_dict(saved, strict=True)  # a plain model takes every key
            for key, value in state.items():
                torch.testing.assert_close(value, ddp_state[key], rtol=TOL, atol=TOL)
                torch.testing.assert_close(saved[key], ddp_state[key], rtol=TOL, atol=TOL)
        else:
            assert stage != 3 or state == {}
        acc.save_state(os.path.join(OUT, f"zero{stage}"))
        record[f"zero{stage}"] = losses
        acc.wait_for_everyone()
        del acc, model
    if dist.get_rank() == 0:
        with open(os.path.join(OUT, "record.json"), "w") as f:
            json.dump(record, f)
    torch.save(ddp_final, os.path.join(OUT, f"ddp_final_{dist.get_rank()}.pt"))


def check_resume_continues():
    with open(os.path.join(OUT, "record.json")) as f:
        record = json.load(f)
    ddp_final = torch.load(os.path.join(OUT, f"ddp_final_{os.environ['RANK']}.pt"))
    for stage in (1, 2, 3):
        plugin = DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=ACCUM)
        acc = fresh(deepspeed_plugin=plugin)
        model, opt = build()
        loader = DataLoader(data(), batch_size=4)
        model, opt, loader = acc.prepare(model, opt, loader)
        acc.load_state(os.path.join(OUT, f"zero{stage}"))  # the loader resumes mid-epoch
        assert acc.step == STEPS * ACCUM, acc.step
        losses = train(acc, model, opt, loader, STEPS)
        assert close(losses, record["ddp_more"]), (stage, losses, record["ddp_more"])
        state = acc.engine.model_state_dict(model)
        if acc.is_main_process:
            for key, value in state.items():
                torch.testing.assert_close(value, ddp_final[key], rtol=1e-4, atol=1e-5)
        del acc, model


def check_config_file_and_dummies():
    config = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
        "scheduler": {
            "type": "WarmupLR",
            "params": {
                "warmup_min_lr": "auto",
                "warmup_max_lr": "auto",
                "warmup_num_steps": "auto",
            },
        },
        "zero_optimization": {"stage": 2},
        "gradient_clipping": "auto",
    }
    path = os.path.join(OUT, "ds_config.json")
    if dist.get_rank() == 0:
        with open(path, "w") as f:
            json.dump(config, f)
    dist.barrier()
    acc = fresh(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=path, gradient_clipping=1.0))
    model, _ = build()
    opt = DummyOptim(model.parameters(), lr=1e-2, weight_decay=0.0)
    sched = DummyScheduler(opt, warmup_num_steps=3)
    model, opt, sched, loader = acc.prepare(model, opt, sched, DataLoader(data(), batch_size=4))
    used = acc.state.deepspeed_plugin.deepspeed_config
    assert used["optimizer"]["params"] == {"lr": 1e-2, "weight_decay": 0.0}, used
    assert used["scheduler"]["params"]["warmup_num_steps"] == 3
    assert used["gradient_clipping"] == 1.0 and used["gradient_accumulation_steps"] == 1
    lrs = []
    for _ in range(4):
        x, y = next(iter(loader))
        acc.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
        sched.step()
        opt.zero_grad()
        lrs.append(sched.get_last_lr()[0])
        norm = acc.clip_grad_norm_(model.parameters(), 1.0)
        assert norm.item() > 0
    assert lrs[0] < lrs[1] < lrs[2] == lrs[3] == 1e-2, lrs  # warm-up over 3 steps, then flat
    try:
        acc.clip_grad_norm_(model.parameters(), 0.5)
    except ValueError as err:
        assert "gradient_clipping" in str(err) and "0.5" in str(err)
    else:
        raise AssertionError("clip_grad_norm_ with another max_norm must raise")


def check_two_plugins_and_zero3_init():
    plugins = {
        "student": DeepSpeedPlugin(zero_stage=2),
        "teacher": DeepSpeedPlugin(zero_stage=3, zero3_init_flag=True),
    }
    acc = fresh(deepspeed_plugins=plugins)
    assert acc.state.deepspeed_plugin is plugins["student"]
    student, opt = build()
    student, opt, loader = acc.prepare(student, opt, DataLoader(data(), batch_size=4))
    acc.state.select_deepspeed_plugin("teacher")
    assert acc.state.deepspeed_plugin is plugins["teacher"] and not plugins["student"].selected
    with plugins["teacher"].zero3_init_context_manager():
        teacher = torch.nn.Linear(8, 1)
    assert teacher.weight.numel() == 0 and hasattr(teacher.weight, "ds_id")  # built sharded
    teacher = acc.prepare(teacher)
    acc.state.select_deepspeed_plugin("student")
    x, y = next(iter(loader))
    with torch.no_grad():
        target = teacher(x)
    assert target.shape == y.shape
    before = {k: v.clone() for k, v in acc.engine.model_state_dict(student).items()}
    acc.backward(torch.nn.functional.mse_loss(student(x), target))
    after = acc.engine.model_state_dict(student)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    full = acc.engine.model_state_dict(teacher)
    if acc.is_main_process:
        assert full["weight"].shape == (1, 8)
    acc.free_memory()
    assert acc.engine.engines == [] and acc._models == []


def check_engine_without_accelerator():
    # A DeepSpeed engine built from an EngineContext alone prepares a model with its optimizer
    # and registers the optimizer wrapper in the context's registry, not in any facade.
    from accel._core._prepared_objects import PreparedObjects
    from accel._engines import DeepSpeedEngine, EngineContext, engine_for

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=ACCUM)
    state = AcceleratorState(cpu=True, deepspeed_plugin=plugin)
    state.distributed_type = DistributedType.DEEPSPEED
    prepared = PreparedObjects()
    loader = DataLoader(data(), batch_size=4)
    prepared.add_dataloader(loader)  # sizes the micro batch, as a prepared loader does
    context = EngineContext(state=state, gradient_state=GradientState(), prepared=prepared)
    engine = engine_for(context)
    assert type(engine) is DeepSpeedEngine and context.gradient_accumulation_steps == ACCUM
    model, opt = build()
    done = engine.prepare_all([model, opt])
    assert engine.is_wrapped(done[0]) and prepared.optimizers == [done[1]]
    assert plugin.deepspeed_config["train_micro_batch_size_per_gpu"] == 4
    x, y = next(iter(loader))
    before = done[0].module[0].weight.detach().clone()
    for i in range(ACCUM):
        context.gradient_state._set_sync_gradients(i == ACCUM - 1)
        engine.backward(torch.nn.functional.mse_loss(done[0](x), y) / ACCUM)
    assert not torch.equal(before, done[0].module[0].weight)  # DeepSpeed stepped at the end
    engine.release()


CHECKS = {
    "train": [
        check_engine_without_accelerator,
        check_zero_parity_save,
        check_config_file_and_dummies,
        check_two_plugins_and_zero3_init,
    ],
    "resume": [check_resume_continues],
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for check in CHECKS[PHASE]:
        check()
        if dist.is_initialized():
            dist.barrier()
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"PASSED {check.__name__}", flush=True)
