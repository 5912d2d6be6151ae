"""The reference CLI's module paths that test suites and SageMaker scripts import, served by
accel's own command line (``accel_launch``)."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

ARGS = ["--model_name_or_path", "bert", "--do_train", "False", "--epochs", "3"]
ARGS += ["--learning_rate", "5e-5", "--max_steps", "50.5"]


def test_config_args_holds_the_sagemaker_config_of_accel_launch() -> None:
    import accel_launch

    config_args = importlib.import_module("accel.commands.config.config_args")
    assert config_args.SageMakerConfig is accel_launch.SageMakerConfig
    assert (
        config_args.load_config_from_file
        is importlib.import_module("accel.commands.config").load_config_from_file
    )

    @dataclasses.dataclass
    class Job(config_args.SageMakerConfig):
        fp16 = True

    job = Job(ec2_instance_type="ml.p3.2xlarge", iam_role_name="role").validate()
    assert job.fp16 and job.compute_environment == "AMAZON_SAGEMAKER"
    assert job.ec2_instance_type == "ml.p3.2xlarge"


def test_convert_nargs_to_dict_types_the_script_arguments() -> None:
    from accel.utils.launch import _convert_nargs_to_dict

    converted = _convert_nargs_to_dict(ARGS)
    assert converted == {
        "model_name_or_path": "bert",
        "do_train": False,
        "epochs": 3,
        "learning_rate": 5e-5,
        "max_steps": 50.5,
    }
    assert [type(v) for v in converted.values()] == [str, bool, int, float, float]
    with pytest.raises(ValueError, match="flag without a value"):
        _convert_nargs_to_dict(["--do_train", "--epochs", "3"])
    with pytest.raises(ValueError, match="flag without a value"):
        _convert_nargs_to_dict(["--epochs", "3", "--do_predict"])


def test_convert_nargs_to_dict_matches_the_reference() -> None:
    reference = pytest.importorskip(
        "accelerate.utils.launch", reason="the reference is not installed (uv sync --group bench)"
    )
    from accel.utils.launch import _convert_nargs_to_dict

    assert _convert_nargs_to_dict(ARGS) == reference._convert_nargs_to_dict(ARGS)
    for bad in (["--do_train", "--epochs", "3"], ["--epochs", "3", "--do_predict"]):
        with pytest.raises(ValueError):
            reference._convert_nargs_to_dict(bad)


def test_reference_cli_modules_serve_accel_launch_entry_points() -> None:
    import accel_launch

    for path, names in {
        "accel.commands.test": ["test_command", "test_command_parser"],
        "accel.commands.estimate": [
            "add_timm_hub_prefix",
            "estimate_command",
            "estimate_command_parser",
            "gather_data",
        ],
        "accel.commands.to_fsdp2": [
            "convert_config_to_fsdp2",
            "to_fsdp2_command",
            "to_fsdp2_command_parser",
        ],
        "accel.commands.tpu": ["tpu_command_launcher", "tpu_command_parser"],
        "accel.commands.config.config_args": ["BaseConfig", "ClusterConfig"],
    }.items():
        module = importlib.import_module(path)
        for name in names:
            assert getattr(module, name) is getattr(accel_launch, name), (path, name)
    launch = importlib.import_module("accel.commands.launch")
    assert launch._validate_launch_command is accel_launch.validate_launch_command
    utils_launch = importlib.import_module("accel.utils.launch")
    assert (
        utils_launch.prepare_simple_launcher_cmd_env is accel_launch.prepare_simple_launcher_cmd_env
    )


def test_env_command_looks_up_the_command_with_the_module_which(monkeypatch, capsys) -> None:
    env = importlib.import_module("accel.commands.env")
    args = env.env_command_parser().parse_args([])
    monkeypatch.setattr(env, "which", lambda name: f"/opt/bin/{name}")
    assert env.env_command(args)["`accelerate` bash location"] == "/opt/bin/accel"
    monkeypatch.setattr(env, "which", lambda name: None)
    assert env.env_command(args)["`accelerate` bash location"] == "Not found"
    assert "- `accelerate` bash location: Not found" in capsys.readouterr().out


def test_launch_test_cli_script_reports_the_accelerators(tmp_path) -> None:
    import os
    import sys

    from accel_state.testing import run_command

    from accel.test_utils import path_in_accelerate_package

    script = path_in_accelerate_package("test_utils", "scripts", "test_cli.py")
    out = run_command(
        [sys.executable, "-m", "accel_launch.cli", "launch", "--cpu", str(script)],
        timeout=120,
        env={**os.environ, "ACCEL_CONFIG_HOME": str(tmp_path)},
    ).stdout
    assert "Successfully ran on " in out
