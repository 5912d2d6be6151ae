import pytest
import torch

from accel_state import (
    AcceleratorState,
    DistributedType,
    GradientAccumulationPlugin,
    GradientState,
    PartialState,
    ProjectConfiguration,
    TorchDynamoPlugin,
    set_seed,
    synchronize_rng_state,
)


@pytest.fixture(autouse=True)
def fresh_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def test_single_process_defaults():
    state = PartialState(cpu=True)
    assert state.num_processes == 1 and state.process_index == 0
    assert state.distributed_type is DistributedType.NO
    assert state.device == torch.device("cpu")
    assert state.is_main_process and state.is_last_process and state.is_local_main_process
    assert not state.use_distributed
    assert PartialState() is not state and PartialState().device == state.device


def test_decorators_on_one_process():
    state = PartialState(cpu=True)
    calls = []
    state.on_main_process(lambda: calls.append("main"))()
    state.on_last_process(lambda: calls.append("last"))()
    state.on_process(process_index=0)(lambda: calls.append("p0"))()
    state.on_process(lambda: calls.append("p1"), process_index=1)()
    state.on_local_process(local_process_index=0)(lambda: calls.append("l0"))()
    assert calls == ["main", "last", "p0", "l0"]
    with pytest.raises(ValueError, match="process_index"):
        state.on_process(lambda: None)


def test_main_process_first_runs_block_once():
    state = PartialState(cpu=True)
    with state.main_process_first():
        ran = True
    assert ran


def test_accelerator_state_precision_and_conflict():
    state = AcceleratorState(mixed_precision="bf16", cpu=True)
    assert state.mixed_precision == "bf16" and state.num_processes == 1
    assert AcceleratorState().mixed_precision == "bf16"
    with pytest.raises(ValueError, match="already created with mixed_precision='bf16'"):
        AcceleratorState(mixed_precision="fp16")


def test_accelerator_state_rejects_unknown_precision():
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        AcceleratorState(mixed_precision="fp12", cpu=True)


def test_gradient_state_plugin():
    gs = GradientState(GradientAccumulationPlugin(num_steps=4, adjust_scheduler=False))
    assert gs.num_steps == 4 and not gs.adjust_scheduler and gs.sync_gradients
    assert gs.remainder == -1 and not gs.end_of_dataloader


def test_plugin_validation():
    with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
        GradientAccumulationPlugin(num_steps=0)
    with pytest.raises(ValueError, match="total_limit"):
        ProjectConfiguration(project_dir="x", total_limit=0)
    assert ProjectConfiguration(project_dir="p").logging_dir == "p"
    dyn = TorchDynamoPlugin(backend="inductor")
    assert dyn.enabled and dyn.to_dict()["backend"] == "inductor"
    assert not TorchDynamoPlugin().enabled


def test_set_seed_reproducible():
    set_seed(123)
    a = torch.rand(3)
    set_seed(123)
    assert torch.equal(a, torch.rand(3))
    synchronize_rng_state("torch")  # one process: nothing to synchronise, must not fail
    with pytest.raises(TypeError, match="int seed"):
        set_seed("1")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["ACCEL_TORCH_DEVICE", "ACCELERATE_TORCH_DEVICE"])
def test_the_device_named_in_the_environment_replaces_the_picked_one(monkeypatch, name):
    monkeypatch.setenv(name, "cpu:3")
    assert PartialState().device == torch.device("cpu", 3)
    assert AcceleratorState().device == torch.device("cpu", 3)


def test_a_bad_device_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "gpu:0")
    with pytest.raises(ValueError) as info:
        PartialState()
    assert str(info.value) == (
        "environment variable ACCELERATE_TORCH_DEVICE must name a torch device; got 'gpu:0'. "
        "Set it to a device such as 'cuda:1' or 'cpu', or unset it to let the state pick one."
    )
    assert not PartialState._shared_state.get("_is_initialized")
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "cuda:1")
    with pytest.raises(ValueError, match=r"cpu=True .* ACCELERATE_TORCH_DEVICE names 'cuda:1'"):
        PartialState(cpu=True)


@pytest.mark.parametrize("cls", [PartialState, AcceleratorState])
def test_reading_a_reset_state_names_the_reset(cls):
    state = cls(cpu=True)
    with pytest.raises(AttributeError) as info:
        state.not_a_state_attribute  # noqa: B018
    assert str(info.value) == f"'{cls.__name__}' object has no attribute 'not_a_state_attribute'"
    cls._reset_state()
    # An attribute, and a property reading one (AcceleratorState's process control outlives
    # its reset: see the test below).
    names = ("num_processes", "is_main_process" if cls is PartialState else "device")
    for name in names:
        with pytest.raises(AttributeError) as info:
            getattr(state, name)
        assert str(info.value) == (
            f"`{cls.__name__}` object has no attribute `{name}`. This happens if "
            f"`{cls.__name__}._reset_state()` was called and an `Accelerator` or `PartialState` "
            f"was not reinitialized: create one (`{cls.__name__}()`) before reading the state."
        )
    state.something = "kept"
    assert state.something == "kept"


def test_accelerator_state_is_built_again_after_its_partial_state_is_reset():
    AcceleratorState(cpu=True, mixed_precision="bf16")
    PartialState._reset_state()
    assert PartialState._shared_state == {}
    state = AcceleratorState(cpu=True, mixed_precision="no")  # no clash with the stale "bf16"
    assert PartialState._shared_state != {} and state.num_processes == 1
    assert state.mixed_precision == "no" and state.device == torch.device("cpu")
    PartialState._reset_state()
    assert AcceleratorState(cpu=True).mixed_precision == "no"  # the stale state is gone


def test_accelerator_state_controls_processes_after_its_reset(capsys):
    state = AcceleratorState(cpu=True)
    AcceleratorState._reset_state()
    assert state.is_main_process and state.is_local_main_process and state.is_last_process
    assert state.use_distributed is False and state.fork_launched is False
    state.wait_for_everyone()
    with state.main_process_first(), state.local_main_process_first():
        state.print("inside")
    with state.split_between_processes([1, 2, 3]) as share:
        assert share == [1, 2, 3]
    state.destroy_process_group()
    assert capsys.readouterr().out == "inside\n"
    with pytest.raises(AttributeError, match="AcceleratorState._reset_state"):
        state.device  # noqa: B018


def test_an_unpickled_state_is_a_view_of_this_process_state():
    import pickle

    state = AcceleratorState(cpu=True)
    gradients = GradientState()
    for original in (state, PartialState(), gradients):
        copy = pickle.loads(pickle.dumps(original))
        assert copy.__dict__ is type(original)._shared_state
        assert copy.__dict__ == original.__dict__
    # A process whose state is not set up yet takes the pickled values.
    saved = pickle.dumps(PartialState())
    AcceleratorState._reset_state(reset_partial_state=True)
    restored = pickle.loads(saved)
    assert restored.initialized and restored.device == torch.device("cpu")
