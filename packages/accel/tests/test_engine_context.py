"""Engines built from an explicit EngineContext, the PreparedObjects registry and the
Checkpointer, with no Accelerator (the DDP and DeepSpeed engines' checks of the same kind run
on two processes in scripts/ddp_checks.py and scripts/ds_checks.py)."""

import pytest
import torch
from accel_state import (
    AcceleratorState,
    DeepSpeedPlugin,
    DistributedType,
    GradientState,
    ProjectConfiguration,
)

from accel import Accelerator
from accel._core._prepared_objects import PreparedObjects
from accel._engines import Engine, EngineContext, engine_class, engine_for
from accel._training_checkpoints._checkpointer import Checkpointer


def context(**kwargs):
    kwargs.setdefault("prepared", PreparedObjects())
    return EngineContext(state=AcceleratorState(cpu=True), gradient_state=GradientState(), **kwargs)


def test_plain_engine_prepares_a_model_and_optimizer_from_its_context():
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    engine = engine_for(context(scaler=scaler))
    assert type(engine) is Engine and not hasattr(engine, "accelerator")
    assert engine.data_parallel_rank() == (1, 0)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = engine.wrap_model(engine.place_model(model), evaluation_mode=False)
    assert engine.adapt_optimizer(optimizer) is optimizer
    assert model.weight.device == torch.device("cpu")
    x = torch.ones(2, 3)
    engine.backward(model(x).sum())
    # The context's scaler scaled the loss: d(sum)/dw = 2 per weight, times the scale 4.
    assert torch.equal(model.weight.grad, torch.full((1, 3), 8.0))
    assert set(engine.model_state_dict(model)) == {"weight", "bias"}


def test_the_engine_class_follows_the_state_and_deepspeed_refuses_a_context_without_plugin():
    ctx = context()
    assert engine_class(ctx.state) is Engine
    ctx.state.distributed_type = DistributedType.DEEPSPEED
    with pytest.raises(ValueError, match="needs a DeepSpeedPlugin; got none"):
        engine_for(ctx)


def test_deepspeed_engine_reconciles_accumulation_through_the_context():
    plugin = DeepSpeedPlugin(hf_ds_config={"gradient_accumulation_steps": 4})
    AcceleratorState(cpu=True, deepspeed_plugin=plugin)
    ctx = context()
    ctx.state.distributed_type = DistributedType.DEEPSPEED
    engine = engine_for(ctx)
    assert engine.handles_mixed_precision and ctx.gradient_accumulation_steps == 4
    assert GradientState().num_steps == 4


def test_the_accelerator_gives_its_engine_its_registry_and_keeps_the_reference_names():
    acc = Accelerator(cpu=True)
    assert acc.engine.context.prepared is acc._prepared
    assert acc.engine.context.state is acc.state and acc.engine.context.scaler is acc.scaler
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = acc.prepare(model, optimizer)
    assert acc._models == [model] and acc._optimizers == [optimizer]
    assert acc._models is acc._prepared.models
    with pytest.raises(AttributeError):
        acc._models = []  # the registry owns the list


def test_registry_keeps_slots_and_states_its_rules():
    prepared = PreparedObjects()
    first, second, wrapper = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), torch.nn.Identity()
    prepared.add_model(first)
    prepared.add_model(second)
    prepared.replace_model(first, wrapper)
    assert prepared.models == [wrapper, second]
    prepared.add_once("model", second)
    assert prepared.models == [wrapper, second]
    with pytest.raises(ValueError, match="got a Linear that is not registered"):
        prepared.replace_model(first, wrapper)
    loaders = [object(), object()]
    for loader in loaders:
        prepared.add_dataloader(loader)
    adapted = object()
    prepared.replace("loader", loaders[1], adapted)  # an engine's adapter takes the slot
    assert prepared.dataloaders == [loaders[0], adapted]
    with pytest.raises(ValueError, match="not registered as a loader"):
        prepared.replace("loader", loaders[1], adapted)
    with pytest.raises(ValueError, match="got kind='tokenizer'"):
        prepared.of_kind("tokenizer")  # type: ignore[arg-type]
    prepared.add_custom_objects("a", "b")
    assert prepared.custom_objects == ["a", "b"]
    assert "models=2" in repr(prepared)
    prepared.clear()
    assert prepared.models == [] and prepared.custom_objects == []


class Counter:
    def __init__(self):
        self.value = 0

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def test_checkpointer_saves_and_restores_from_its_inputs_alone(tmp_path):
    prepared = PreparedObjects()
    ctx = context(prepared=prepared)
    engine = engine_for(ctx)
    config = ProjectConfiguration(project_dir=str(tmp_path), automatic_checkpoint_naming=True)
    checkpointer = Checkpointer(config, prepared, engine, ctx.state)
    model = torch.nn.Linear(2, 1)
    prepared.add_model(model)
    counter = Counter()
    checkpointer.register_for_checkpointing(counter)
    seen = []
    handle = checkpointer.register_save_state_pre_hook(lambda m, w, d: seen.append(len(w)))
    counter.value = 7
    path = checkpointer.save_state(None, step=12)
    assert path.endswith("checkpoint_0") and config.iteration == 1 and seen == [1]
    handle.remove()
    counter.value = 0
    with torch.no_grad():
        model.weight.zero_()
    assert checkpointer.load_state(None) == 12  # the step the checkpoint recorded
    assert counter.value == 7 and model.weight.abs().sum() > 0
    with pytest.raises(ValueError) as info:  # indices are the arguments' own
        checkpointer.register_for_checkpointing(object(), counter, 3)
    assert str(info.value) == (
        "register_for_checkpointing takes objects with state_dict() and load_state_dict() "
        "methods; these arguments lack them:\n  - Item at index 0: object\n"
        "  - Item at index 2: int\nAdd both methods, or save those objects yourself."
    )
