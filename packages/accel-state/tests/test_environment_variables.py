"""The environment contract: typed reading, reference fallbacks, and clear errors."""

import subprocess
import sys

import pytest

from accel_state import environment_variables as ev
from accel_state.testing import run_command, run_distributed


def test_every_declared_variable_is_exported_and_named_after_itself():
    for name, spec in ev.VARIABLES.items():
        assert name.startswith("ACCEL_")
        assert getattr(ev, name) is spec
        assert name in ev.__all__
        assert spec.written_by and spec.read_by


def test_accel_name_wins_over_the_reference_name():
    environ = {"ACCEL_MIXED_PRECISION": "fp16", "ACCELERATE_MIXED_PRECISION": "bf16"}
    assert ev.read_env(ev.ACCEL_MIXED_PRECISION, "no", environ) == "fp16"
    assert ev.read_env(ev.ACCEL_MIXED_PRECISION, "no", {"ACCELERATE_MIXED_PRECISION": "BF16"}) == (
        "bf16"
    )
    assert ev.read_env(ev.ACCEL_MIXED_PRECISION, "no", {}) == "no"
    # An empty variable is unset: the fallback is read.
    environ = {"ACCEL_USE_CPU": "", "ACCELERATE_USE_CPU": "true"}
    assert ev.read_env(ev.ACCEL_USE_CPU, False, environ) is True


@pytest.mark.parametrize(
    ("variable", "raw", "value"),
    [
        (ev.ACCEL_USE_CPU, "yes", True),
        (ev.ACCEL_USE_CPU, "0", False),
        (ev.ACCEL_GRADIENT_ACCUMULATION_STEPS, " 4 ", 4),
        (ev.ACCEL_GRADIENT_CLIPPING, "0.5", 0.5),
        (ev.ACCEL_DEEPSPEED_ZERO_STAGE, "3", 3),
        (ev.ACCEL_FSDP_VERSION, "1", 1),
        (ev.ACCEL_FSDP_AUTO_WRAP_POLICY, "size_based_wrap", "SIZE_BASED_WRAP"),
        (ev.ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE, "CPU", "cpu"),
        (ev.ACCEL_DYNAMO_BACKEND, "inductor", "INDUCTOR"),
        (ev.ACCEL_FSDP_SHARDING_STRATEGY, "2", "SHARD_GRAD_OP"),
        (ev.ACCEL_FSDP_STATE_DICT_TYPE, "sharded_state_dict", "SHARDED_STATE_DICT"),
    ],
)
def test_values_are_read_as_their_type(variable, raw, value):
    got = ev.read_env(variable, None, {variable: raw})
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("variable", "raw", "rule"),
    [
        ("FSDP_MIN_NUM_PARAMS", "0", "an integer >= 1"),
        ("ACCELERATE_DEEPSPEED_ZERO_STAGE", "4", "one of 0, 1, 2, 3"),
        ("ACCELERATE_USE_CPU", "maybe", "a boolean (1/0, true/false, yes/no, on/off)"),
        ("ACCELERATE_GRADIENT_CLIPPING", "nan", "a finite number >= 0"),
        ("ACCELERATE_MIXED_PRECISION", "fp64", "one of no, fp8, fp16, bf16"),
        (
            "FSDP_BACKWARD_PREFETCH",
            "4",
            "one of BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH (or its number, 1 to 3)",
        ),
    ],
)
def test_an_invalid_value_names_the_variable_read_the_value_and_the_vocabulary(variable, raw, rule):
    spec = next(spec for spec in ev.VARIABLES.values() if variable in spec.fallbacks)
    with pytest.raises(ValueError) as info:
        ev.read_env(spec, None, {variable: raw})
    assert str(info.value) == (
        f"environment variable {variable} must be {rule}; got {raw!r}. Set it to {rule}, or "
        "unset it."
    )


def test_an_undeclared_name_is_refused_with_the_declared_ones():
    with pytest.raises(KeyError, match="'ACCEL_NOPE' is not a declared .*ACCEL_USE_CPU"):
        ev.read_env("ACCEL_NOPE")


def test_is_set_sees_fallbacks():
    assert ev.is_set(ev.ACCEL_PARALLELISM_CONFIG_TP_SIZE, {"PARALLELISM_CONFIG_TP_SIZE": "2"})
    assert not ev.is_set(ev.ACCEL_PARALLELISM_CONFIG_TP_SIZE, {"ACCEL_X": "1"})


def test_env_text_writes_booleans_as_digits():
    assert ev.env_text(True) == "1" and ev.env_text(False) == "0" and ev.env_text(3) == "3"


def test_vocabularies_match_the_enums():
    from accel_state import DistributedType, PrecisionType

    assert ev.MIXED_PRECISIONS == tuple(PrecisionType.list())
    assert ev.DISTRIBUTED_TYPES == tuple(DistributedType.list())
    assert ev.ACCEL_MIXED_PRECISION.choices == ev.MIXED_PRECISIONS


def test_the_module_imports_no_torch():
    code = "import sys; import accel_state.environment_variables; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_plugins_read_the_reference_names(monkeypatch):
    from accel_state import DeepSpeedPlugin, FullyShardedDataParallelPlugin, ParallelismConfig

    for name, value in {
        "FSDP_SHARDING_STRATEGY": "2",
        "FSDP_AUTO_WRAP_POLICY": "SIZE_BASED_WRAP",
        "FSDP_MIN_NUM_PARAMS": "1000",
        "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT",
        "FSDP_ACTIVATION_CHECKPOINTING": "true",
        "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
        "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4",
        "ACCELERATE_DEEPSPEED_ZERO3_INIT": "true",
        "PARALLELISM_CONFIG_DP_SHARD_SIZE": "2",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ACCEL_FSDP_MIN_NUM_PARAMS", "500")  # the ACCEL_ name wins
    fsdp = FullyShardedDataParallelPlugin()
    assert fsdp.sharding_strategy.name == "SHARD_GRAD_OP"
    assert fsdp.auto_wrap_policy.__name__ == "size_based_auto_wrap_policy"
    assert fsdp.min_num_params == 500
    assert fsdp.state_dict_type.name == "FULL_STATE_DICT" and fsdp.activation_checkpointing
    ds = DeepSpeedPlugin()
    assert (ds.zero_stage, ds.gradient_accumulation_steps, ds.zero3_init_flag) == (3, 4, True)
    assert ParallelismConfig().dp_shard_size == 2


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"ACCEL_CHECKPOINT_TIMEOUT": "0"},
            "environment variable ACCEL_CHECKPOINT_TIMEOUT must be a finite number > 0; got "
            "'0'. Set it to a finite number > 0, or unset it.",
        ),
        (
            {"ACCEL_CHECKPOINT_TIMEOUT": "1", "ACCELERATE_USE_CPU": "maybe"},
            "environment variable ACCELERATE_USE_CPU must be a boolean",
        ),
    ],
)
def test_check_environment_reads_every_declared_variable(environ, message):
    with pytest.raises(ValueError) as info:
        ev.check_environment(environ)
    assert str(info.value).startswith(message)
    ev.check_environment({"ACCEL_CHECKPOINT_TIMEOUT": "0.5", "ACCEL_LOG_LEVEL": "anything"})
    assert ev.read_env(ev.ACCEL_CHECKPOINT_TIMEOUT, None, {"ACCEL_CHECKPOINT_TIMEOUT": "2"}) == 2.0


@pytest.mark.parametrize(
    "variable", ["ACCEL_CHECKPOINT_TIMEOUT", "ACCEL_HANG_TIMEOUT", "ACCEL_TEARDOWN_TIMEOUT"]
)
def test_a_duration_longer_than_its_timers_can_hold_is_refused(variable):
    # 1e308 seconds used to pass, then overflowed a timedelta: a raw OverflowError at start, or
    # a checkpoint rendezvous that blamed the other process.
    with pytest.raises(ValueError) as info:
        ev.check_environment({variable: "1e308"})
    assert str(info.value) == (
        f"environment variable {variable} must be at most 1e+09 seconds, the longest wait the "
        "timers it sets can hold; got '1e308'. Set it to a number of seconds up to 1e+09, or "
        "unset it."
    )
    assert ev.read_env(variable, None, {variable: "1e9"}) == 1e9


_MAKE_STATE = """
from accel_state import {cls}
{cls}(cpu=True)
print("STATE CREATED", flush=True)
"""


@pytest.mark.parametrize(("raw", "cls"), [("abc", "PartialState"), ("0", "AcceleratorState")])
def test_a_bad_contract_value_fails_when_the_state_is_created_on_one_process(tmp_path, raw, cls):
    script = tmp_path / "make_state.py"
    script.write_text(_MAKE_STATE.format(cls=cls))
    r = run_command(
        [sys.executable, str(script)],
        env={"ACCEL_CHECKPOINT_TIMEOUT": raw},
        timeout=120,
        check=False,
    )
    assert r.returncode != 0 and "STATE CREATED" not in r.stdout, r.stdout + r.stderr
    assert (
        f"ValueError: environment variable ACCEL_CHECKPOINT_TIMEOUT must be a finite number > "
        f"0; got {raw!r}. Set it to a finite number > 0, or unset it."
    ) in r.stderr


@pytest.mark.multiprocess
def test_a_bad_contract_value_fails_when_the_state_is_created_on_two_processes(tmp_path):
    script = tmp_path / "make_state.py"
    script.write_text(_MAKE_STATE.format(cls="PartialState"))
    r = run_distributed(script, env={"ACCEL_CHECKPOINT_TIMEOUT": "abc"}, timeout=120, check=False)
    assert r.returncode != 0 and "STATE CREATED" not in r.stdout, r.stdout + r.stderr
    message = "environment variable ACCEL_CHECKPOINT_TIMEOUT must be a finite number > 0; got 'abc'"
    assert r.stderr.count(message) >= 2, r.stderr  # each process refused it
