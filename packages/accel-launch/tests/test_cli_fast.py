"""Commands that do not need torch answer without importing it (torch's import is refused in
the process that runs them), report versions from the installed metadata, and explain
themselves: ``accel --version``, ``accel --help``, ``accel env``, ``accel config default`` on an
existing file, ``accel test --help``, a bad ``accel test`` flag, and ``accel estimate-memory`` on
a llama config.json (estimated from its fields, without transformers)."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from importlib.metadata import PackageNotFoundError, version

import pytest
import yaml

from .conftest import SCRIPTS, run_command


def _outputs(stdout: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    for block in stdout.split("=== ")[1:]:
        head, _, body = block.partition("\n")
        sections[head.rsplit(" -> ", 1)[0] if " -> " in head else head] = head + "\n" + body
    return sections


def _version_or_none(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


# Llama 3.1 8B's config.json as published (8,030,261,248 parameters).
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}


def test_commands_without_torch_do_not_import_it(isolated_config_home, tmp_path):
    isolated_config_home.mkdir()
    config = isolated_config_home / "default_config.yaml"
    config.write_text(yaml.safe_dump({"num_processes": 2, "mixed_precision": "bf16"}))
    before = config.read_text()
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps(LLAMA_31_8B))
    result = run_command(
        [sys.executable, str(SCRIPTS / "commands_without_torch.py"), str(llama)],
        timeout=120,
        check=True,
    )
    out = _outputs(result.stdout)
    launch_version = version("accel-launch")
    assert out["--version"].startswith("--version -> 0\n")
    meta = _version_or_none("accel-torch")  # absent when accel-launch is installed alone
    if meta is None:
        assert f"accel-launch {launch_version}\n" in out["--version"], out["--version"]
    else:
        assert f"accel-launch {launch_version} (accel-torch {meta})" in out["--version"]
    assert out["launch-version"].startswith("launch-version -> 0\n")
    assert f"accel-launch {launch_version}" in out["launch-version"]
    assert "-> 0" in out["--help"] and "estimate-memory" in out["--help"]
    # env: every accel package and torch's version, from metadata; the config file's settings.
    env = out["env"]
    assert env.startswith("env -> 0\n"), env
    for dist in ("accel-torch", "accel-state", "accel-bigmodel", "accel-launch"):
        if _version_or_none(dist) is not None:
            assert f"- {dist}: {version(dist)}" in env
    assert f"- torch: {version('torch')}" in env and "- NVIDIA driver: " in env
    assert "- CPUs: " in env and "usable by this process" in env and " GiB" in env
    assert "- torch build: CUDA " in env or "- torch build: CPU only" in env
    assert "mixed_precision: bf16" in env and "(found)" in env
    # config default leaves an existing file as it was.
    assert (
        "config default -> 0" in out["config default"] and "left unchanged" in out["config default"]
    )
    assert config.read_text() == before
    # test --help describes every option; a bad value is one line plus that flag's usage.
    helped = " ".join(out["test --help"].split())
    for described in (
        "--config_file CONFIG_FILE Config file to test",
        "--num_processes NUM_PROCESSES Total number of processes over all machines",
        "--num_machines NUM_MACHINES Number of machines",
        "--machine_rank MACHINE_RANK This machine's rank",
        "--main_process_ip MAIN_PROCESS_IP Address of machine 0",
        "--main_process_port MAIN_PROCESS_PORT Rendezvous port",
        "--cpu Run on CPU processes",
        "Each check is named as it passes",
    ):
        assert described in helped, f"{described!r} is not in:\n{out['test --help']}"
    bad = out["test --num_processes two"].strip().splitlines()
    assert bad == [
        "test --num_processes two -> 2",
        "accel test: error: argument --num_processes: expected a whole number like 2, got 'two'",
        "usage: accel test --num_processes NUM_PROCESSES  (Total number of processes over all "
        "machines (overrides the config file))",
    ]
    # estimate-memory on a llama folder: the parameters plus two rotary buffers of 64 floats.
    head, _, body = out[f"estimate-memory {llama} --json --dtypes bfloat16 int4"].partition("\n")
    assert head.endswith("-> 0"), body
    bf16, int4 = json.loads(body)
    numel = 8_030_261_248 + 2 * 64
    assert bf16["total_size"] == numel * 2 and int4["total_size"] == numel // 2
    assert bf16["training_size"] == numel * 2 * 4
    layer = 4096 * (4096 + 1024 + 1024 + 4096) + 3 * 4096 * 14336 + 2 * 4096
    assert bf16["largest_layer"] == 128256 * 4096 * 2 > layer * 2  # embeddings and lm_head
    assert bf16["largest_layer_names"] == ["model.embed_tokens", "lm_head"]
    table = out[f"estimate-memory {llama} --dtypes float32"]
    assert "| float32 | 1.96 GiB      | 29.92 GiB  | 119.66 GiB      |" in table, table
    assert result.stdout.rstrip().endswith("=== torch imported: False")


def test_nvidia_driver_is_read_from_proc(tmp_path):
    from accel_launch.commands._env_cmd import nvidia_driver

    assert nvidia_driver(tmp_path / "absent").startswith("none (")
    (tmp_path / "gpus" / "0000:01:00.0").mkdir(parents=True)
    (tmp_path / "gpus" / "0000:02:00.0").mkdir()
    (tmp_path / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n"
    )
    assert nvidia_driver(tmp_path) == "550.54.15, 2 GPU(s)"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_spins_on_a_terminal_and_prints_one_line_elsewhere():
    from accel_launch.commands._status import status

    piped = io.StringIO()
    with status("loading", stream=piped):
        pass
    assert piped.getvalue() == "loading\n"
    terminal = _Terminal()
    with status("loading", stream=terminal, interval=0.01):
        time.sleep(0.05)
    frames = terminal.getvalue().split("\r")[1:]
    assert frames[0] == "loading |" and len(frames) >= 3
    assert re.fullmatch(r"loading \(\d+\.\ds\)\n", frames[-1])


def test_every_subcommand_takes_both_spellings_of_each_flag():
    """``accel test --num-processes 1`` is ``--num_processes 1``, as for ``accel launch``."""
    import argparse

    from accel_launch.cli import build_parser, parse_args

    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            for option in action.option_strings:
                dashed = "--" + option[2:].replace("_", "-")
                if option.startswith("--") and dashed not in parser._option_string_actions:
                    missing.append(f"{path} {option}")

    walk(build_parser(), "accel")
    assert not missing, missing
    assert parse_args(["test", "--num-processes", "1"]).num_processes == 1
    assert parse_args(["config", "default", "--mixed-precision", "bf16"]).mixed_precision == "bf16"


def test_a_mistyped_command_or_flag_gets_the_closest_one_and_its_help(capsys):
    from accel_launch.cli import parse_args

    cases = [
        (
            ["lanch", "x.py"],
            "did you mean 'launch'?",
            "usage: accel launch --help lists its flags (accel --help lists the commands)",
        ),
        (
            ["test", "--num-proceses", "1"],
            "--num-proceses: did you mean --num-processes?",
            "usage: accel test --help lists its flags",
        ),
        (
            ["config", "default", "--mixed_precison", "bf16"],
            "did you mean --mixed_precision?",
            "usage: accel config default --help lists its flags",
        ),
    ]
    for argv, hint, usage in cases:
        with pytest.raises(SystemExit) as exited:
            parse_args(argv)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert hint in err and usage in err, err


@pytest.mark.parametrize(
    ("model", "says"),
    [("meta-llama/Llama-2-7b", "looks like a Hub id"), ("no/such/dir/x", "not an existing path")],
)
def test_estimate_memory_refuses_a_missing_model_before_importing_torch(model, says):
    import subprocess
    import sys

    code = (
        "import sys\nfrom accel_launch.cli import main\n"
        f"code = main(['estimate-memory', {model!r}])\n"
        "print('torch imported:', 'torch' in sys.modules)\nsys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert says in done.stderr and "config.json" in done.stderr, done.stderr
    assert "torch imported: False" in done.stdout, done.stdout


def test_estimate_memory_names_a_malformed_config_json_before_importing_torch(tmp_path):
    import subprocess
    import sys

    (tmp_path / "config.json").write_text('{"model_type": "llama", ')
    code = (
        "import sys\nfrom accel_launch.cli import main\n"
        f"code = main(['estimate-memory', {str(tmp_path)!r}])\n"
        "print('torch imported:', 'torch' in sys.modules)\nsys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f"{str(tmp_path / 'config.json')!r} is not valid JSON" in done.stderr, done.stderr
    assert "line 1, column" in done.stderr, done.stderr
    assert "torch imported: False" in done.stdout, done.stdout


@pytest.mark.slow
def test_estimate_memory_gives_one_line_for_a_config_transformers_refuses(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": 10, "num_attention_heads": 3, '
        '"num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 32}'
    )
    done = subprocess.run(
        [sys.executable, "-m", "accel_launch.cli", "estimate-memory", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "error:" in x]
    assert "transformers refuses the config" in line and "config.json" in line, line
    assert "hidden size" in line.lower(), line


@pytest.mark.parametrize(
    ("argv", "lines"),
    [
        (
            ["lanch", "x.py"],
            [
                "accel: error: argument command: invalid choice: 'lanch' (choose from 'launch', "
                "'config', 'estimate-memory', 'merge-weights', 'to-fsdp2', 'tpu-config', 'env', "
                "'test', 'install-command') (did you mean 'launch'?)",
                "usage: accel launch --help lists its flags (accel --help lists the commands)",
            ],
        ),
        (
            ["config", "defualt"],
            [
                "accel config: error: argument subcommand: invalid choice: 'defualt' (choose from "
                "'default', 'update', 'import') (did you mean 'default'?)",
                "usage: accel config default --help lists its flags (accel config --help lists "
                "the commands)",
            ],
        ),
    ],
)
def test_a_mistyped_subcommand_points_at_the_help_of_the_one_meant(argv, lines):
    done = run_command([sys.executable, "-m", "accel_launch.cli", *argv], timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == lines, done.stderr


def test_config_default_on_a_machine_without_accelerators_does_not_import_torch(tmp_path):
    from accel_launch._device_files import accelerator_device_files

    if accelerator_device_files() != []:
        pytest.skip("this machine has accelerator device files: torch counts the devices")
    target = tmp_path / "default_config.yaml"
    code = (
        "import sys\nfrom accel_launch.cli import main\n"
        f"code = main(['config', 'default', '--config_file', {str(target)!r}])\n"
        "print('torch imported:', 'torch' in sys.modules)\nsys.exit(code)"
    )
    done = run_command([sys.executable, "-c", code], timeout=120, check=True)
    assert done.stdout.splitlines() == [f"accel config: wrote {target}", "torch imported: False"]
    assert done.stderr == ""  # nothing to count: no progress line
    written = yaml.safe_load(target.read_text())
    assert written["use_cpu"] is True and written["distributed_type"] == "NO", written


def test_accelerator_device_files_are_read_from_the_file_system(tmp_path):
    import platform

    from accel_launch._device_files import accelerator_device_files

    if platform.system() != "Linux":
        assert accelerator_device_files(tmp_path) is None  # only torch can tell there
        return
    assert accelerator_device_files(tmp_path) == []
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    (tmp_path / "dev" / "nvidiactl").write_text("")  # not a device: not counted
    (tmp_path / "dev" / "kfd").write_text("")
    assert accelerator_device_files(tmp_path) == ["dev/nvidia0", "dev/kfd"]
