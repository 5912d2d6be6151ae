"""The reference CLI's Python entry points (``env_command``, ``tpu_command_launcher``,
``prepare_simple_launcher_cmd_env`` ...) drive accel's commands and return or raise what the
reference's do."""

import argparse
import json
import logging
import os
import stat
import sys

import pytest
import yaml
from accel_state.testing import run_command

from accel_launch import (
    BaseConfig,
    ClusterConfig,
    ConfigError,
    add_timm_hub_prefix,
    convert_config_to_fsdp2,
    env_command,
    env_command_parser,
    env_info,
    estimate_command_parser,
    gather_data,
    launch_command_parser,
    prepare_simple_launcher_cmd_env,
    to_fsdp2_command,
    to_fsdp2_command_parser,
    tpu_command_launcher,
    tpu_command_parser,
    validate_launch_command,
)

from .conftest import accel

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_key_value_heads": 4,
    "vocab_size": 1000,
}


def test_env_info_finds_the_accel_command_with_the_given_which(tmp_path, monkeypatch):
    assert env_info(which=lambda name: None)["`accelerate` bash location"] == "Not found"
    program = tmp_path / "accel"
    program.write_text("#!/bin/sh\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    info = env_info()
    assert info["`accelerate` bash location"] == str(program)
    assert info["`Accelerate` configs"] == "Not found"
    assert info["Python version"] == ".".join(map(str, sys.version_info[:3]))


def test_env_command_returns_the_config_file_it_prints(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"num_processes": 2, "mixed_precision": "bf16"}))
    args = env_command_parser().parse_args(["--config_file", str(config)])
    info = env_command(args, which=lambda name: None)
    assert info["`Accelerate` configs"]["num_processes"] == 2
    out = capsys.readouterr().out
    assert "- `accelerate` bash location: Not found" in out
    assert "\t- mixed_precision: bf16" in out


def test_accel_env_prints_where_the_accel_command_is():
    assert "- accel command: " in accel("env").stdout


def test_launch_parser_multi_gpu_is_false_unless_given():
    parser = launch_command_parser()
    assert parser.parse_args(["t.py"]).multi_gpu is False
    assert parser.parse_args(["--multi-gpu", "t.py"]).multi_gpu is True


def test_validate_fills_the_config_file_where_no_flag_was_given(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"debug": True, "num_processes": 3, "use_cpu": True}))
    args = launch_command_parser().parse_args(
        ["--config_file", str(config), "--num_processes", "2", "t.py"]
    )
    assert args.debug is None
    args, merged, mixed_from_config = validate_launch_command(args)
    assert args.debug is True and args.use_cpu is True and args.cpu is True
    assert args.num_processes == 2  # the flag wins
    assert merged is not None and merged.num_processes == 2
    assert mixed_from_config is False
    args, merged, _ = validate_launch_command(launch_command_parser().parse_args(["t.py"]))
    assert merged is None


def test_simple_launcher_sets_openmp_only_when_told_to_use_the_cpu(monkeypatch):
    monkeypatch.delenv("KMP_AFFINITY", raising=False)
    monkeypatch.delenv("KMP_BLOCKTIME", raising=False)
    args, _, _ = validate_launch_command(
        launch_command_parser().parse_args(["--cpu", "t.py", "--x", "1"])
    )
    command, env = prepare_simple_launcher_cmd_env(args)
    assert command == [sys.executable, "t.py", "--x", "1"]
    assert env["KMP_AFFINITY"] == "granularity=fine,compact,1,0" and env["KMP_BLOCKTIME"] == "1"
    assert env["ACCEL_USE_CPU"] == "1"
    args, _, _ = validate_launch_command(launch_command_parser().parse_args(["-m", "pkg.mod"]))
    command, env = prepare_simple_launcher_cmd_env(args)
    assert command == [sys.executable, "-m", "pkg.mod"]
    assert "KMP_AFFINITY" not in env and "KMP_BLOCKTIME" not in env
    monkeypatch.setenv("KMP_AFFINITY", "disabled")  # the user's own setting stays
    args = launch_command_parser().parse_args(["--cpu", "t.py"])
    assert prepare_simple_launcher_cmd_env(args)[1]["KMP_AFFINITY"] == "disabled"


def test_simple_launcher_refuses_module_with_no_python():
    args = launch_command_parser().parse_args(["--no_python", "t.py"])
    args.module = True
    with pytest.raises(ValueError, match="got both"):
        prepare_simple_launcher_cmd_env(args)


def test_accel_launch_cpu_gives_the_process_the_openmp_settings(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import os\nprint('KMP', os.environ.get('KMP_AFFINITY'))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMP_")}
    out = run_command(
        [sys.executable, "-m", "accel_launch.cli", "launch", "--cpu", str(script)],
        timeout=120,
        env=env,
    ).stdout
    assert "KMP granularity=fine,compact,1,0" in out


def test_base_and_cluster_configs_check_their_values():
    base = BaseConfig(mixed_precision="fp16", use_cpu=True).validate()
    assert base.to_dict()["mixed_precision"] == "fp16"
    with pytest.raises(ConfigError, match="mixed_precision .*'fp7'"):
        BaseConfig(mixed_precision="fp7").validate()
    cluster = ClusterConfig(distributed_type="MULTI_GPU", num_processes=2).validate()
    assert cluster.num_processes == 2 and cluster.enable_cpu_affinity is False
    with pytest.raises(ConfigError, match="enable_cpu_affinity must be False"):
        ClusterConfig(enable_cpu_affinity=True).validate()


def test_convert_config_to_fsdp2_logs_each_dropped_key(caplog):
    config = {"fsdp_config": {"fsdp_sharding_strategy": "SHARD_GRAD_OP", "fsdp_use_orig_params": 1}}
    with caplog.at_level(logging.WARNING, logger="accel_launch"):
        out = convert_config_to_fsdp2(config)["fsdp_config"]
    assert out == {"fsdp_reshard_after_forward": False, "fsdp_version": 2}
    assert "removed fsdp_use_orig_params" in caplog.text
    assert config["fsdp_config"]["fsdp_use_orig_params"] == 1  # the input is left as it was


def test_to_fsdp2_command_raises_the_reference_errors(tmp_path):
    parser = to_fsdp2_command_parser()
    source = tmp_path / "fsdp.yaml"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        to_fsdp2_command(parser.parse_args(["--config_file", str(source)]))
    source.write_text(yaml.safe_dump({"fsdp_config": {"fsdp_sharding_strategy": "FULL_SHARD"}}))
    with pytest.raises(ValueError, match="neither --output_file nor --overwrite"):
        to_fsdp2_command(parser.parse_args(["--config_file", str(source)]))
    target = tmp_path / "out.yaml"
    target.write_text("")
    args = parser.parse_args(["--config_file", str(source), "--output_file", str(target)])
    with pytest.raises(FileExistsError, match="already exists"):
        to_fsdp2_command(args)
    target.unlink()
    to_fsdp2_command(args)
    assert yaml.safe_load(target.read_text())["fsdp_config"]["fsdp_version"] == 2


def test_tpu_command_launcher_prints_the_words_as_the_reference(capsys):
    words = ["--command", "ls", "--tpu_zone", "us-central1-a", "--tpu_name", "pod", "--debug"]
    tpu_command_launcher(tpu_command_parser().parse_args(words))
    expected = "Running gcloud compute tpus tpu-vm ssh pod --zone us-central1-a --command"
    assert f"{expected} cd /usr/share; ls --worker all" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="TPU name"):
        tpu_command_launcher(tpu_command_parser().parse_args(["--command", "ls"]))
    # the command line keeps printing a line a shell can run as it is
    out = accel("tpu-config", *words).stdout
    assert "--command 'cd /usr/share; ls'" in out


def test_add_timm_hub_prefix():
    assert add_timm_hub_prefix("resnet50") == "resnet50"
    assert add_timm_hub_prefix("timm/resnet50.a1_in1k") == "hf-hub:timm/resnet50.a1_in1k"
    assert add_timm_hub_prefix("local-dir:/m") == "local-dir:/m"


def test_gather_data_gives_the_reference_rows(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    parser = estimate_command_parser()
    rows = gather_data(parser.parse_args([str(tmp_path), "--dtypes", "float32", "float16"]))
    assert [row[0] for row in rows] == ["float32", "float16"]
    (_, largest32, total32, train32), (_, largest16, total16, _) = rows
    assert total32 == 2 * total16 and largest32 == 2 * largest16 > 0
    assert train32 == {"training": 4 * total32}
    with pytest.raises(ConfigError, match="Hub id"):
        gather_data(parser.parse_args(["org/model"]))


def test_test_command_runs_accel_test():
    code = (
        "from accel_launch import test_command, test_command_parser\n"
        "test_command(test_command_parser().parse_args([]))\n"
    )
    out = run_command([sys.executable, "-c", code], timeout=180).stdout
    assert "all checks passed" in out


def test_reference_parsers_register_on_subparsers():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    env_command_parser(sub)
    tpu_command_parser(sub)
    args = parser.parse_args(["tpu-config", "--debug"])
    assert args.func is tpu_command_launcher and args.debug is True
    assert parser.parse_args(["env"]).func is env_command
