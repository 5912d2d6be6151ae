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
