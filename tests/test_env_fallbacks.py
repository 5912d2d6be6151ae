"""The environment contract end to end, in real child processes.

A process started with only the reference library's variables (``ACCELERATE_*``, ``FSDP_*``)
runs with those settings, and an ``ACCEL_*`` variable wins over its reference name. Each
``accel-launch`` option that writes a variable is read back, as the state / plugin field it
configures, in each of 2 launched processes (two launches that set many options each)."""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from accel_state.testing import free_port, run_command

SCRIPT = Path(__file__).parent / "scripts" / "report_contract.py"
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start from an environment holding no variable of either library."""
    for name in list(os.environ):
        if name.startswith(
            ("ACCEL_", "ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_", "MEGATRON_LM_")
        ):
            monkeypatch.delenv(name)


def _reports(stdout: str) -> list[dict]:
    lines = [line for line in stdout.splitlines() if line.startswith("REPORT ")]
    return sorted((json.loads(line[len("REPORT ") :]) for line in lines), key=lambda r: r["rank"])


def _run_alone(env: dict[str, str]) -> dict:
    """Run the script as one plain process with ``env`` added; its report."""
    result = run_command([sys.executable, str(SCRIPT)], timeout=300, env=env)
    (report,) = _reports(result.stdout)
    return report


def _launch(*flags: str) -> list[dict]:
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--num_processes", "2", "--main_process_port", str(free_port())]
    result = run_command(
        [*command, *flags, str(SCRIPT)], timeout=600, env={"TORCH_EXTENSIONS_DIR": EXTENSIONS}
    )
    reports = _reports(result.stdout)
    assert [r["rank"] for r in reports] == [0, 1], result.stdout + result.stderr
    assert reports[0] == {**reports[1], "rank": 0}  # every process sees the same settings
    return reports


@pytest.mark.timeout(400)
def test_a_process_started_with_reference_names_only_sees_them(monkeypatch):
    _clean_environment(monkeypatch)
    env = {
        "ACCELERATE_MIXED_PRECISION": "bf16",
        "ACCELERATE_USE_CPU": "true",
        "ACCELERATE_DEBUG_MODE": "1",
        "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "3",
        "ACCELERATE_DYNAMO_BACKEND": "eager",
        "ACCELERATE_DYNAMO_USE_DYNAMIC": "false",
        "ACCELERATE_USE_FSDP": "true",
        "FSDP_VERSION": "1",
        "FSDP_SHARDING_STRATEGY": "SHARD_GRAD_OP",
        "FSDP_AUTO_WRAP_POLICY": "SIZE_BASED_WRAP",
        "FSDP_MIN_NUM_PARAMS": "1000",
        "FSDP_BACKWARD_PREFETCH": "BACKWARD_POST",
        "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT",
        "FSDP_OFFLOAD_PARAMS": "true",
        "FSDP_FORWARD_PREFETCH": "true",
        "FSDP_USE_ORIG_PARAMS": "false",
        "FSDP_ACTIVATION_CHECKPOINTING": "true",
    }
    report = _run_alone(env)
    assert report["mixed_precision"] == "bf16"
    assert report["cpu"] is True and report["debug"] is True
    assert report["gradient_accumulation_steps"] == 3
    assert report["dynamo"]["backend"] == "EAGER" and report["dynamo"]["dynamic"] is False
    assert report["fsdp"] == {
        "fsdp_version": 1,
        "sharding_strategy": "SHARD_GRAD_OP",
        "reshard_after_forward": None,
        "auto_wrap_policy": "size_based_auto_wrap_policy",
        "transformer_cls_names_to_wrap": None,
        "min_num_params": 1000,
        "backward_prefetch": "BACKWARD_POST",
        "state_dict_type": "FULL_STATE_DICT",
        "cpu_offload": "CPUOffload(offload_params=True)",
        "forward_prefetch": True,
        "use_orig_params": False,
        "cpu_ram_efficient_loading": False,
        "sync_module_states": False,
        "activation_checkpointing": True,
    }
    # As in the reference, FSDP alone builds no ParallelismConfig: only
    # ACCEL(ERATE)_USE_PARALLELISM_CONFIG (or the argument) does.
    assert "parallelism" not in report


@pytest.mark.timeout(400)
def test_the_accel_name_wins_when_both_are_set(monkeypatch):
    _clean_environment(monkeypatch)
    env = {
        "ACCELERATE_MIXED_PRECISION": "bf16",
        "ACCEL_MIXED_PRECISION": "fp16",
        "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "3",
        "ACCEL_GRADIENT_ACCUMULATION_STEPS": "5",
        "ACCELERATE_USE_FSDP": "1",
        "FSDP_SHARDING_STRATEGY": "SHARD_GRAD_OP",
        "ACCEL_FSDP_SHARDING_STRATEGY": "NO_SHARD",
        "ACCELERATE_USE_CPU": "1",
        "ACCEL_USE_CPU": "0",
    }
    report = _run_alone(env)
    assert report["mixed_precision"] == "fp16"
    assert report["gradient_accumulation_steps"] == 5
    assert report["fsdp"]["sharding_strategy"] == "NO_SHARD"
    assert report["cpu"] is False


@pytest.mark.timeout(400)
def test_an_invalid_reference_value_stops_the_process_with_the_rule(monkeypatch):
    _clean_environment(monkeypatch)
    result = run_command(
        [sys.executable, str(SCRIPT)],
        timeout=300,
        env={"ACCELERATE_MIXED_PRECISION": "fp64"},
        check=False,
    )
    assert result.returncode != 0
    assert (
        "environment variable ACCELERATE_MIXED_PRECISION must be one of no, fp8, fp16, bf16; "
        "got 'fp64'." in result.stderr
    )


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_fsdp_precision_dynamo_and_debug_options_reach_every_process(monkeypatch):
    _clean_environment(monkeypatch)
    reports = _launch(
        "--cpu",
        "--debug",
        "--mixed_precision",
        "bf16",
        "--dynamo_backend",
        "eager",
        "--dynamo_mode",
        "max-autotune",
        "--dynamo_use_fullgraph",
        "true",
        "--dynamo_use_dynamic",
        "true",
        "--dynamo_use_regional_compilation",
        "true",
        "--use_fsdp",
        "--fsdp_version",
        "1",
        "--fsdp_sharding_strategy",
        "HYBRID_SHARD",
        "--fsdp_auto_wrap_policy",
        "TRANSFORMER_BASED_WRAP",
        "--fsdp_transformer_layer_cls_to_wrap",
        "Block,Layer",
        "--fsdp_backward_prefetch",
        "NO_PREFETCH",
        "--fsdp_state_dict_type",
        "SHARDED_STATE_DICT",
        "--fsdp_offload_params",
        "true",
        "--fsdp_forward_prefetch",
        "true",
        "--fsdp_use_orig_params",
        "false",
        "--fsdp_cpu_ram_efficient_loading",
        "true",
        "--fsdp_sync_module_states",
        "true",
        "--fsdp_activation_checkpointing",
        "true",
        "--parallelism_config_dp_replicate_size",
        "1",
        "--parallelism_config_dp_shard_size",
        "2",
        "--parallelism_config_tp_size",
        "1",
        "--parallelism_config_cp_size",
        "1",
        "--parallelism_config_cp_comm_strategy",
        "alltoall",
    )
    report = reports[0]
    assert report["processes"] == 2 and report["distributed_type"] == "FSDP"
    assert report["mixed_precision"] == "bf16" and report["cpu"] and report["debug"]
    assert report["dynamo"] == {
        "backend": "EAGER",
        "mode": "max-autotune",
        "fullgraph": True,
        "dynamic": True,
        "use_regional_compilation": True,
    }
    assert report["fsdp"] == {
        "fsdp_version": 1,
        "sharding_strategy": "HYBRID_SHARD",
        "reshard_after_forward": None,
        "auto_wrap_policy": "transformer_auto_wrap_policy",
        "transformer_cls_names_to_wrap": ["Block", "Layer"],
        "min_num_params": None,
        "backward_prefetch": None,
        "state_dict_type": "SHARDED_STATE_DICT",
        "cpu_offload": "CPUOffload(offload_params=True)",
        "forward_prefetch": True,
        "use_orig_params": False,
        "cpu_ram_efficient_loading": True,
        "sync_module_states": True,
        "activation_checkpointing": True,
    }


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="needs deepspeed: pip install 'accel-torch[deepspeed]'",
)
def test_deepspeed_options_reach_every_process(monkeypatch, tmp_path):
    _clean_environment(monkeypatch)
    reports = _launch(
        "--use_deepspeed",
        "--zero_stage",
        "3",
        "--offload_optimizer_device",
        "cpu",
        "--offload_param_device",
        "cpu",
        "--offload_optimizer_nvme_path",
        str(tmp_path / "optimizer"),
        "--offload_param_nvme_path",
        str(tmp_path / "param"),
        "--gradient_accumulation_steps",
        "4",
        "--gradient_clipping",
        "0.5",
        "--zero3_init_flag",
        "true",
        "--zero3_save_16bit_model",
        "true",
        "--parallelism_config_sp_size",
        "1",
        "--parallelism_config_sp_backend",
        "deepspeed",
        "--parallelism_config_cp_backend",
        "torch",
        "--parallelism_config_sp_seq_length",
        "256",
        "--parallelism_config_sp_seq_length_is_variable",
        "false",
        "--parallelism_config_sp_attn_implementation",
        "sdpa",
    )
    report = reports[0]
    assert report["distributed_type"] == "DEEPSPEED"
    assert report["gradient_accumulation_steps"] == 4
    assert report["deepspeed"] == {
        "zero_stage": 3,
        "gradient_accumulation_steps": 4,
        "gradient_clipping": 0.5,
        "offload_optimizer_device": "cpu",
        "offload_param_device": "cpu",
        "offload_optimizer_nvme_path": str(tmp_path / "optimizer"),
        "offload_param_nvme_path": str(tmp_path / "param"),
        "zero3_init_flag": True,
        "zero3_save_16bit_model": True,
    }
    layout = report["parallelism"]
    assert (layout["sp_size"], layout["sp_backend"], layout["cp_backend"]) == (
        1,
        "deepspeed",
        "torch",
    )
    assert layout["sp"] == {
        "sp_seq_length": 256,
        "sp_seq_length_is_variable": False,
        "sp_attn_implementation": "sdpa",
    }


NEEDS_MEGATRON = pytest.mark.skipif(
    importlib.util.find_spec("megatron") is None,
    reason='needs megatron-core: pip install "accel-torch[megatron]"',
)


@NEEDS_MEGATRON
@pytest.mark.timeout(400)
def test_megatron_reference_names_reach_the_plugin(monkeypatch):
    _clean_environment(monkeypatch)
    env = {
        "ACCELERATE_USE_MEGATRON_LM": "true",
        "MEGATRON_LM_TP_DEGREE": "1",
        "MEGATRON_LM_RECOMPUTE_GRANULARITY": "selective",
        "MEGATRON_LM_GRADIENT_CLIPPING": "0.75",
        "ACCEL_MEGATRON_LM_GRADIENT_CLIPPING": "0.5",
    }
    report = _run_alone(env)
    assert report["megatron_lm"]["recompute_granularity"] == "selective"
    assert report["megatron_lm"]["gradient_clipping"] == 0.5  # the ACCEL_ name wins


@NEEDS_MEGATRON
@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_megatron_options_reach_every_process(monkeypatch):
    _clean_environment(monkeypatch)
    reports = _launch(
        "--cpu",
        "--use_megatron_lm",
        "--megatron_lm_tp_degree",
        "2",
        "--megatron_lm_pp_degree",
        "2",
        "--megatron_lm_num_micro_batches",
        "4",
        "--megatron_lm_sequence_parallelism",
        "true",
        "--megatron_lm_recompute_activations",
        "true",
        "--megatron_lm_use_distributed_optimizer",
        "true",
        "--megatron_lm_gradient_clipping",
        "0.5",
    )
    report = reports[0]
    assert report["distributed_type"] == "MEGATRON_LM"
    assert report["megatron_lm"] == {
        "tp_degree": 2,
        "pp_degree": 2,
        "num_micro_batches": 4,
        "sequence_parallelism": True,
        "recompute_activations": True,
        "use_distributed_optimizer": True,
        "gradient_clipping": 0.5,
        "recompute_granularity": "full",
    }
