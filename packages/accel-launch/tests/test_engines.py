"""Typed sections, engine flags and the environment each process receives (in-process)."""

import os
import subprocess
import sys

import pytest
import yaml

from accel_launch import ConfigError, config_from_dict
from accel_launch._launch import build_command
from accel_launch._resolve import child_environment, resolve
from accel_launch.cli import build_parser
from accel_launch.configs._engine_configs import DeepSpeedConfig, FSDPConfig


def plan_for(*argv: str, environ=None):
    import argparse

    from accel_launch._flags import add_launch_arguments, normalize_argv

    argv = normalize_argv(list(argv), add_launch_arguments(argparse.ArgumentParser()))
    args = build_parser().parse_args(["launch", *argv])
    return args, resolve(args, environ={} if environ is None else environ)


def test_unknown_section_keys_name_the_closest_one():
    with pytest.raises(ConfigError, match="unknown setting 'zero_stge'.*'zero_stage'"):
        config_from_dict({"deepspeed_config": {"zero_stge": 2}})
    with pytest.raises(ConfigError, match="unknown setting 'fsdp_ofload_params'.*fsdp_offload"):
        config_from_dict({"fsdp_config": {"fsdp_ofload_params": True}})
    with pytest.raises(ConfigError, match="dynamo_config: unknown setting 'backend'"):
        config_from_dict({"dynamo_config": {"backend": "inductor"}})
    with pytest.raises(ConfigError, match="must be a mapping"):
        config_from_dict({"fsdp_config": ["x"]})


def test_section_values_are_checked():
    with pytest.raises(ConfigError, match="zero_stage must be 0, 1, 2 or 3; got 4"):
        DeepSpeedConfig.from_dict({"zero_stage": 4}, "deepspeed_config")
    with pytest.raises(ConfigError, match="is 'nvme', which needs offload_param_nvme_path"):
        DeepSpeedConfig.from_dict(
            {"zero_stage": 3, "offload_param_device": "nvme"}, "deepspeed_config"
        )
    with pytest.raises(ConfigError, match="offload_param_device needs ZeRO stage 3"):
        DeepSpeedConfig.from_dict({"zero_stage": 2, "offload_param_device": "cpu"}, "ds")
    with pytest.raises(ConfigError, match="must be true or false; got 'maybe'"):
        FSDPConfig.from_dict({"fsdp_offload_params": "maybe"}, "fsdp_config")
    with pytest.raises(ConfigError, match="fsdp_sharding_strategy applies to FSDP1 only"):
        FSDPConfig.from_dict({"fsdp_version": 2, "fsdp_sharding_strategy": "FULL_SHARD"}, "f")
    with pytest.raises(ConfigError, match="goes with SIZE_BASED_WRAP"):
        FSDPConfig.from_dict(
            {"fsdp_auto_wrap_policy": "NO_WRAP", "fsdp_min_num_params": 10}, "fsdp_config"
        )
    with pytest.raises(ConfigError, match="must be one of FULL_SHARD"):
        FSDPConfig.from_dict({"fsdp_sharding_strategy": "EVERYTHING"}, "fsdp_config")
    fsdp = FSDPConfig.from_dict({"fsdp_sharding_strategy": "full_shard"}, "fsdp_config")
    assert fsdp.fsdp_sharding_strategy == "FULL_SHARD"


def test_deepspeed_flags_reach_the_environment_and_win_over_the_file(tmp_path):
    cfg = tmp_path / "ds.yaml"
    cfg.write_text(
        yaml.safe_dump({"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 2}})
    )
    _, plan = plan_for(
        "--config_file",
        str(cfg),
        "--zero_stage",
        "3",
        "--offload_optimizer_device",
        "cpu",
        "--offload_param_device",
        "nvme",
        "--offload_param_nvme_path",
        "/nvme",
        "--gradient_accumulation_steps",
        "4",
        "--gradient_clipping",
        "1.5",
        "--zero3_init_flag",
        "--zero3_save_16bit_model",
        "false",
        "x.py",
    )
    assert plan.sources["deepspeed_config.zero_stage"] == "flag --zero_stage"
    env = child_environment(plan.config)
    assert {k: v for k, v in env.items() if "DEEPSPEED" in k or "GRADIENT" in k} == {
        "ACCEL_USE_DEEPSPEED": "1",
        "ACCEL_DEEPSPEED_ZERO_STAGE": "3",
        "ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE": "cpu",
        "ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE": "nvme",
        "ACCEL_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH": "/nvme",
        "ACCEL_GRADIENT_ACCUMULATION_STEPS": "4",
        "ACCEL_GRADIENT_CLIPPING": "1.5",
        "ACCEL_DEEPSPEED_ZERO3_INIT_FLAG": "1",
        "ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": "0",
    }
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "DEEPSPEED"
    # An engine always runs under torchrun, even with one process (it needs a process group).
    assert build_command(plan, ["x.py"], False, False, 1234).launcher == "torchrun"


def test_fsdp_flags_reach_the_environment():
    _, plan = plan_for(
        "--use_fsdp",
        "--num_processes",
        "2",
        "--fsdp_version",
        "1",
        "--fsdp_sharding_strategy",
        "HYBRID_SHARD",
        "--fsdp_auto_wrap_policy",
        "TRANSFORMER_BASED_WRAP",
        "--fsdp_transformer_layer_cls_to_wrap",
        "Block",
        "--fsdp_backward_prefetch",
        "BACKWARD_PRE",
        "--fsdp_state_dict_type",
        "SHARDED_STATE_DICT",
        "--fsdp_offload_params",
        "true",
        "--fsdp_forward_prefetch",
        "--fsdp_use_orig_params",
        "--fsdp_cpu_ram_efficient_loading",
        "--fsdp_sync_module_states",
        "--fsdp_activation_checkpointing",
        "x.py",
        "--fsdp_version",
        "9",
    )
    env = child_environment(plan.config)
    assert {k: v for k, v in env.items() if "FSDP" in k} == {
        "ACCEL_USE_FSDP": "1",
        "ACCEL_FSDP_VERSION": "1",
        "ACCEL_FSDP_SHARDING_STRATEGY": "HYBRID_SHARD",
        "ACCEL_FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
        "ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP": "Block",
        "ACCEL_FSDP_BACKWARD_PREFETCH": "BACKWARD_PRE",
        "ACCEL_FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT",
        "ACCEL_FSDP_OFFLOAD_PARAMS": "1",
        "ACCEL_FSDP_FORWARD_PREFETCH": "1",
        "ACCEL_FSDP_USE_ORIG_PARAMS": "1",
        "ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING": "1",
        "ACCEL_FSDP_SYNC_MODULE_STATES": "1",
        "ACCEL_FSDP_ACTIVATION_CHECKPOINTING": "1",
    }
    # Flags after the script belong to the script.
    args, _ = plan_for("--use_fsdp", "--fsdp_offload_params", "x.py", "--fsdp_version", "9")
    assert args.training_script == "x.py"
    assert args.training_script_args == ["--fsdp_version", "9"]


def test_engine_conflicts_are_clear_errors():
    with pytest.raises(ConfigError, match="--use_deepspeed and --use_fsdp"):
        plan_for("--use_deepspeed", "--use_fsdp", "x.py")
    with pytest.raises(ConfigError, match="--zero_stage is an option of DEEPSPEED.*Add --use_deep"):
        plan_for("--zero_stage", "2", "x.py")
    with pytest.raises(ConfigError, match="mpirun_hostfile starts plain processes"):
        plan_for("--use_deepspeed", "--mpirun_hostfile", "h", "x.py")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_default_threads_count_the_cpus_this_process_may_use():
    # A launcher pinned to one CPU (taskset, a container's cpuset) gives each process one
    # thread, however many CPUs the machine has.
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))});"
        "from accel_launch import config_from_dict;"
        "from accel_launch._resolve import child_environment;"
        "print(child_environment(config_from_dict({'num_processes': 1}))['OMP_NUM_THREADS'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
