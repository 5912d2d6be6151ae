"""Amazon SageMaker launches: the config file, the questionnaire, and the HuggingFace estimator
built from them (inspected, never submitted: no test contacts AWS)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from accel_launch.cli import parse_args
from accel_launch.commands._sagemaker import (
    SageMakerConfig,
    build_estimator,
    hyperparameters,
    prepare_sagemager_args_inputs,
    sagemaker_config_from_dict,
)

from .conftest import accel

ROLE = "arn:aws:iam::111122223333:role/accel-sagemaker"
NO_AWS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": ""}


@pytest.fixture
def project(tmp_path):
    """A script folder as a SageMaker job ships it: the script and its requirements."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "train.py").write_text("print('training')\n")
    (folder / "requirements.txt").write_text("accel\n")
    return folder


def sm_config(**values) -> SageMakerConfig:
    base = {"compute_environment": "AMAZON_SAGEMAKER", "ec2_instance_type": "ml.p3.2xlarge"}
    return sagemaker_config_from_dict({**base, "iam_role_name": ROLE, **values}, "test.yaml")


def launch_args(*argv: str):
    return parse_args(["launch", *argv])


def test_config_file_is_checked_with_rule_value_and_fix():
    with pytest.raises(Exception, match="unknown setting 'ec2_instance' .* Did you mean"):
        sagemaker_config_from_dict({"ec2_instance": "ml.p3.2xlarge"}, "sm.yaml")
    with pytest.raises(Exception, match="needs iam_role_name; got ''"):
        sagemaker_config_from_dict({"ec2_instance_type": "ml.p3.2xlarge"}, "sm.yaml")
    with pytest.raises(Exception, match="distributed_type of a SageMaker launch must be one of"):
        sm_config(distributed_type="MULTI_GPU")
    with pytest.raises(Exception, match="MODEL_PARALLEL needs the script to wrap its model"):
        sm_config(distributed_type="MODEL_PARALLEL")
    config = sm_config(distributed_type="data_parallel", mixed_precision="BF16")
    assert (config.distributed_type, config.mixed_precision) == ("DATA_PARALLEL", "bf16")


def test_hyperparameters_from_script_arguments():
    args = ["--lr", "0.1", "--epochs=3", "--name", "run-1", "--flag", "True", "--big", "1e3"]
    assert hyperparameters(args) == {
        "lr": 0.1,
        "epochs": 3,
        "name": "run-1",
        "flag": True,
        "big": 1000.0,
    }
    with pytest.raises(Exception, match="got '--fast'. Give it a value"):
        hyperparameters(["--fast", "--lr", "1"])
    with pytest.raises(Exception, match="got '--fast'. Give it a value"):
        hyperparameters(["--fast"])
    with pytest.raises(Exception, match="positional argument 'data.csv'"):
        hyperparameters(["data.csv"])


def test_estimator_arguments(project, tmp_path):
    inputs = tmp_path / "inputs.tsv"
    inputs.write_text("channel\ts3_uri\ntrain\ts3://bucket/train\ntest\ts3://bucket/test\n")
    metrics = tmp_path / "metrics.tsv"
    metrics.write_text("name\tregex\nloss\tloss: ([0-9.]+)\n")
    config = sm_config(
        distributed_type="DATA_PARALLEL",
        ec2_instance_type="ml.p3.16xlarge",
        num_machines=2,
        mixed_precision="fp16",
        sagemaker_inputs_file=str(inputs),
        sagemaker_metrics_file=str(metrics),
        dynamo_config={"dynamo_backend": "INDUCTOR"},
        additional_args={"max_run": 3600, "environment": {"EXTRA": "1"}},
    )
    args = launch_args(
        "--aws_access_key_id", "AKIA", "--aws_secret_access_key", "s3cret",
        "--mixed_precision", "bf16", str(project / "train.py"), "--lr", "0.5", "--steps", "10",
    )  # fmt: skip
    kwargs, fit_inputs = prepare_sagemager_args_inputs(config, args)
    assert kwargs["entry_point"] == "train.py" and kwargs["source_dir"] == str(project)
    assert (kwargs["instance_type"], kwargs["instance_count"]) == ("ml.p3.16xlarge", 2)
    assert kwargs["distribution"] == {"smdistributed": {"dataparallel": {"enabled": True}}}
    assert kwargs["hyperparameters"] == {"lr": 0.5, "steps": 10}
    assert kwargs["role"] == ROLE and kwargs["max_run"] == 3600
    env = kwargs["environment"]
    assert env["ACCEL_MIXED_PRECISION"] == "bf16"  # the flag wins over the file
    assert env["ACCEL_DYNAMO_BACKEND"] == "INDUCTOR" and env["EXTRA"] == "1"
    assert "s3cret" not in repr(kwargs)  # credentials never travel to the job
    assert kwargs["metric_definitions"] == [{"Name": "loss", "Regex": "loss: ([0-9.]+)"}]
    assert fit_inputs == {"train": "s3://bucket/train", "test": "s3://bucket/test"}
    no_dp, _ = prepare_sagemager_args_inputs(sm_config(), args)
    assert no_dp["distribution"] is None and no_dp["instance_count"] == 1


def test_refusals_name_the_fix(project, monkeypatch):
    for name in NO_AWS:
        monkeypatch.delenv(name, raising=False)
    script = str(project / "train.py")
    with pytest.raises(Exception, match="needs AWS credentials; got no profile"):
        prepare_sagemager_args_inputs(sm_config(), launch_args(script))
    with pytest.raises(Exception, match="got only --aws_access_key_id"):
        prepare_sagemager_args_inputs(sm_config(), launch_args("--aws_access_key_id", "A", script))
    profile = sm_config(profile="research")
    with pytest.raises(Exception, match="--num_processes does not apply to a SageMaker launch"):
        prepare_sagemager_args_inputs(profile, launch_args("--num_processes", "2", script))
    with pytest.raises(Exception, match="runs a Python script file; got --module"):
        prepare_sagemager_args_inputs(profile, launch_args("-m", "pkg.train"))
    (project / "requirements.txt").unlink()
    with pytest.raises(Exception, match="got no requirements.txt in"):
        prepare_sagemager_args_inputs(profile, launch_args(script))
    with_image = sm_config(profile="research", image_uri="123.dkr.ecr.aws/accel:1")
    kwargs, _ = prepare_sagemager_args_inputs(with_image, launch_args(script))
    assert kwargs["image_uri"] == "123.dkr.ecr.aws/accel:1"
    with pytest.raises(Exception, match="sagemaker_inputs_file .* does not exist"):
        prepare_sagemager_args_inputs(
            sm_config(profile="p", image_uri="i", sagemaker_inputs_file="nope.tsv"),
            launch_args(script),
        )


@pytest.mark.slow
def test_builds_the_huggingface_estimator_offline(project):
    """The SDK v2 estimator, with a session that needs no network: what fit() would submit."""
    pytest.importorskip("sagemaker", reason='needs pip install "accel-launch[sagemaker]"')
    import boto3
    import sagemaker
    from sagemaker.huggingface import HuggingFace

    boto = boto3.Session(
        aws_access_key_id="AKIA", aws_secret_access_key="x", region_name="eu-west-1"
    )
    session = sagemaker.Session(boto_session=boto, default_bucket="accel-tests")
    config = sm_config(
        distributed_type="DATA_PARALLEL",
        ec2_instance_type="ml.p3.16xlarge",
        num_machines=2,
        pytorch_version="2.0.0",
        transformers_version="4.28.1",
        py_version="py310",
    )
    args = launch_args(
        "--aws_access_key_id", "AKIA", "--aws_secret_access_key", "x",
        str(project / "train.py"), "--lr", "0.1",
    )  # fmt: skip
    estimator, inputs = build_estimator(config, args, session=session)
    assert isinstance(estimator, HuggingFace) and inputs is None
    assert (estimator.instance_count, estimator.instance_type) == (2, "ml.p3.16xlarge")
    assert estimator.role == ROLE and estimator.entry_point == "train.py"
    assert estimator.hyperparameters()["lr"] == "0.1"
    assert estimator.hyperparameters()["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert estimator.environment["ACCEL_MIXED_PRECISION"] == "no"
    assert "huggingface-pytorch-training:2.0.0-transformers4.28.1" in estimator.training_image_uri()
    bad = sm_config(ec2_instance_type="ml.p3.2xlarge", pytorch_version="0.1", py_version="py3")
    with pytest.raises(Exception, match="the SageMaker SDK refused the job's settings"):
        build_estimator(bad, args, session=session)


def test_accel_launch_explains_and_refuses_without_credentials(project, tmp_path):
    config = tmp_path / "sm.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "compute_environment": "AMAZON_SAGEMAKER",
                "distributed_type": "DATA_PARALLEL",
                "ec2_instance_type": "ml.p3.16xlarge",
                "iam_role_name": ROLE,
                "num_machines": 2,
            }
        )
    )
    script = str(project / "train.py")
    out = accel(
        "launch", "--config_file", str(config), "--explain",
        "--aws_access_key_id", "AKIA", "--aws_secret_access_key", "x", script, "--lr", "0.1",
        env=NO_AWS,
    ).stdout  # fmt: skip
    assert "SageMaker job (sagemaker.huggingface.HuggingFace):" in out
    assert "  instance_count: 2" in out and "  hyperparameters: {'lr': 0.1}" in out
    refused = accel("launch", "--config_file", str(config), script, check=False, env=NO_AWS)
    assert refused.returncode != 0 and "needs AWS credentials" in refused.stderr
    assert "Traceback" not in refused.stderr
    local = accel("launch", "--aws_access_key_id", "A", script, check=False, env=NO_AWS)
    assert local.returncode != 0 and "the --aws_* flags submit a SageMaker job" in local.stderr


def test_questionnaire_writes_a_sagemaker_config(tmp_path):
    target = tmp_path / "sm.yaml"
    answers = [
        "4",  # Amazon SageMaker
        "1", "research",  # an AWS profile, its name
        "eu-west-1", ROLE,
        "no", "no", "no",  # own image, inputs file, metrics file
        "2",  # data parallelism
        "no",  # torch dynamo
        "1", "yes", "2",  # instance type, debug, instances
        "bf16",
    ]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "accel_launch.cli", "config", "--config_file", str(target)],
        input="\n".join(answers) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    data = yaml.safe_load(target.read_text())
    assert data["compute_environment"] == "AMAZON_SAGEMAKER"
    assert data["distributed_type"] == "DATA_PARALLEL" and data["num_machines"] == 2
    assert data["ec2_instance_type"] == "ml.p3.16xlarge" and data["iam_role_name"] == ROLE
    assert (data["profile"], data["region"], data["debug"]) == ("research", "eu-west-1", True)
    assert data["mixed_precision"] == "bf16" and data["base_job_name"] == "accelerate-sagemaker-2"
    assert sagemaker_config_from_dict(data, str(target)).num_machines == 2
