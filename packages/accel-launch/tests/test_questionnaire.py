import os
import sys

import yaml

from .conftest import Terminal, accel

DOWN, UP, ENTER = "\x1b[B", "\x1b[A", "\r"


def _terminal(*args: str) -> Terminal:
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no nvidia-smi: a machine without GPUs
    return Terminal([sys.executable, "-m", "accel_launch.cli", "config", *args], env)


def test_questionnaire_in_a_terminal_writes_fsdp_config(tmp_path):
    target = tmp_path / "cfg" / "fsdp.yaml"
    term = _terminal("--config_file", str(target))
    term.answer(" > 1) No distributed training", DOWN + ENTER)  # machine type -> multi-CPU
    term.expect("-> multi-CPU")
    term.answer("How many machines", "2\r")
    term.answer("rank of this machine", "5\r")  # out of range: asked again
    term.expect("the rank must be in 0..1")
    term.answer("rank of this machine", "1\r")
    term.answer("IP address", "10.1.2.3\r")
    term.answer("Which port", "\r")
    term.answer("same local network", "\r")
    term.answer(" > 1) static", DOWN + ENTER)
    term.answer("Start the processes with mpirun", "no\r")
    term.answer("Check distributed operations", "yes\r")
    term.answer("torch dynamo", "\r")
    term.answer("FullyShardedDataParallel", "y\r")
    term.answer(" > 1) 2 (fully_shard", DOWN + ENTER)  # FSDP1
    term.answer(" > 1) FULL_SHARD", DOWN + ENTER)  # SHARD_GRAD_OP
    term.answer("Offload parameters", "yes\r")
    term.answer(" > 1) TRANSFORMER_BASED_WRAP", ENTER)
    term.answer("Layer classes to wrap", "Block,Decoder\r")
    term.answer(" > 1) BACKWARD_PRE", DOWN + DOWN + UP + ENTER)  # down, down, up: BACKWARD_POST
    term.answer("Prefetch the next all-gather", "\r")
    term.answer("original parameters", "\r")
    term.answer(" > 3) SHARDED_STATE_DICT", UP + ENTER)  # LOCAL_STATE_DICT
    term.answer("CPU RAM efficient loading", "no\r")
    term.answer("Broadcast rank 0's module states", "\r")
    term.answer("activation checkpointing", "yes\r")
    term.answer("processes in TOTAL", "3\r")  # not a multiple of 2 machines: asked again
    term.expect("positive multiple")
    term.answer("processes in TOTAL", "4\r")
    term.answer(" > 1) no", "3")  # a digit picks the option as numbered: 3) bf16
    term.send(ENTER)
    term.expect("accel config: wrote")
    assert term.finish() == 0, term.output
    data = yaml.safe_load(target.read_text())
    assert data["distributed_type"] == "FSDP" and data["use_cpu"] is True
    assert data["num_machines"] == 2 and data["machine_rank"] == 1
    assert data["main_process_ip"] == "10.1.2.3" and data["main_process_port"] == 29500
    assert data["rdzv_backend"] == "c10d" and data["debug"] is True
    assert data["num_processes"] == 4 and data["mixed_precision"] == "bf16"
    assert data["dynamo_config"] == {}
    assert data["fsdp_config"] == {
        "fsdp_version": 1,
        "fsdp_sharding_strategy": "SHARD_GRAD_OP",
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_transformer_layer_cls_to_wrap": "Block,Decoder",
        "fsdp_backward_prefetch": "BACKWARD_POST",
        "fsdp_state_dict_type": "LOCAL_STATE_DICT",
        "fsdp_offload_params": True,
        "fsdp_forward_prefetch": False,
        "fsdp_use_orig_params": True,
        "fsdp_cpu_ram_efficient_loading": False,
        "fsdp_sync_module_states": True,
        "fsdp_activation_checkpointing": True,
    }
    assert data["deepspeed_config"] == {} and data["config_version"] == 2


def test_questionnaire_without_terminal_uses_numbered_prompts(isolated_config_home):
    # One process, dynamo with custom mode: only the questions that apply are asked.
    answers = "\n".join(["1", "yes", "inductor", "yes", "3", "no", "yes", "fp16"]) + "\n"
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "accel_launch.cli", "config"],
        input=answers,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1) No distributed training" in r.stdout and "How many machines" not in r.stdout
    assert "3) max-autotune" in r.stdout  # numbered as the menu shows them
    assert "DeepSpeed" not in r.stdout  # no GPU: DeepSpeed is not offered
    data = yaml.safe_load((isolated_config_home / "default_config.yaml").read_text())
    assert data["distributed_type"] == "NO" and data["use_cpu"] is True
    assert data["mixed_precision"] == "fp16" and data["num_processes"] == 1
    assert data["dynamo_config"] == {
        "dynamo_backend": "INDUCTOR",
        "dynamo_mode": "max-autotune",
        "dynamo_use_fullgraph": False,
        "dynamo_use_dynamic": True,
    }


def test_questionnaire_offers_only_what_runs_and_reasks_bad_answers(tmp_path):
    import subprocess

    base = [sys.executable, "-m", "accel_launch.cli", "config", "--config_file"]
    # Machine type: a number out of range, a word; machines: text; then ZeRO-free multi-CPU.
    answers = ["7", "cluster", "2", "two", "1", "", "", "", "x", "2", ""]
    r = subprocess.run(
        [*base, str(tmp_path / "a.yaml")],
        input="\n".join(answers) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for unsupported in ("Megatron", "compute environment", "TPU pod"):
        assert unsupported not in r.stdout
    assert "invalid literal" not in r.stdout and "Traceback" not in r.stdout + r.stderr
    assert "'7' is not accepted: answer a number from 1 to 5, or an option's text." in r.stdout
    assert "'two' is not accepted: answer a whole number, e.g. 2." in r.stdout
    assert "'x' is not accepted: answer a whole number, e.g. 2." in r.stdout
    data = yaml.safe_load((tmp_path / "a.yaml").read_text())
    assert data["distributed_type"] == "MULTI_CPU" and data["num_processes"] == 2
    r = subprocess.run(
        [*base, str(tmp_path / "b.yaml")], input="1\n", capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "its input ended" in r.stderr
    assert not (tmp_path / "b.yaml").exists()


def test_deepspeed_questions_refuse_a_negative_clipping_norm(tmp_path):
    from io import StringIO

    from accel_launch.questionnaire._prompts import Prompter
    from accel_launch.questionnaire._questionnaire import run_questionnaire

    # One process on a GPU machine (no GPU needed to answer): DeepSpeed, ZeRO 2, clipping.
    answers = ["1", "no", "no", "yes", "no", "2", "1", "", "yes", "-1", "nan", "0.5", "", "1"]
    out = StringIO()
    config = run_questionnaire(Prompter(StringIO("\n".join(answers) + "\n"), out, False), 1)
    text = out.getvalue()
    assert "a clipping norm is >= 0 (0 turns clipping off), got -1.0; try again." in text
    assert "'nan' is not accepted: answer a number, e.g. 1.0." in text
    assert config.distributed_type == "DEEPSPEED"
    assert config.deepspeed_config.gradient_clipping == 0.5


def test_config_update_rewrites_an_older_file(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(
        "# cluster A, edited by hand\n"
        + yaml.safe_dump(
            {
                "compute_environment": "LOCAL_MACHINE",
                "distributed_type": "FSDP",
                "dynamo_backend": "NO",
                "main_training_function": "main",
                "mpirun_config": {"mpirun_hostfile": "hosts", "mpirun_ccl": 1},
                "num_processes": 2,
                "fsdp_config": {
                    "fsdp_sharding_strategy": 2,
                    "fsdp_backward_prefetch_policy": "BACKWARD_PRE",
                },
            }
        )
    )
    # The launcher reads it as is ...
    out = accel("launch", "--config_file", str(old), "--explain", "x.py").stdout
    assert "fsdp_config.fsdp_sharding_strategy  'SHARD_GRAD_OP'" in out
    # ... and `config update` rewrites it in the current format.
    original = old.read_text().replace("num_processes: 2", "num_processes: 2  # two ranks")
    old.write_text(original)
    out = accel("config", "update", "--config_file", str(old)).stdout
    assert "renamed fsdp_config.fsdp_backward_prefetch_policy" in out
    backup = tmp_path / "old.yaml.bak"
    assert f"the old version is kept in {backup}" in out and backup.read_text() == original
    assert "kept its comments" in out
    text = old.read_text()
    assert text.startswith("# cluster A, edited by hand\n")
    assert "# two ranks\nnum_processes: 2\n" in text
    assert "dropped" not in out  # main_training_function is a setting (of XLA runs)
    data = yaml.safe_load(old.read_text())
    assert data["config_version"] == 2 and data["main_training_function"] == "main"
    assert data["dynamo_config"] == {"dynamo_backend": "NO"}
    assert data["mpirun_hostfile"] == "hosts" and "mpirun_config" not in data
    assert data["fsdp_config"] == {
        "fsdp_sharding_strategy": "SHARD_GRAD_OP",
        "fsdp_backward_prefetch": "BACKWARD_PRE",
    }
    assert "already up to date" in accel("config", "update", "--config_file", str(old)).stdout
    r = accel("config", "update", "--config_file", str(tmp_path / "none.yaml"), check=False)
    assert r.returncode == 2 and "does not exist" in r.stderr
