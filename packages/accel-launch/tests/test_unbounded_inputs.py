"""A number or a file that would make a command work without bound is refused at once, with the
rule: process and machine counts no machine can run, a YAML alias bomb in a config file, and a
merge whose arguments are wrong (checked before torch is imported)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command
from hypothesis import given, settings
from hypothesis import strategies as st

from accel_launch import ConfigError, load_config_file
from accel_launch.cli import main

from .conftest import accel

BILLION = "1000000000"


def _run(argv: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, err.getvalue()


def _per_machine_limit() -> int:
    """8 per CPU this process may use or per local accelerator, whichever is more."""
    import torch

    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return 8 * max(len(os.sched_getaffinity(0)), devices)


def _script(tmp_path) -> str:
    script = tmp_path / "train.py"
    script.write_text("print('PROCESS STARTED')\n")
    return str(script)


@pytest.mark.parametrize(
    ("flags", "variable"),
    [
        (["--num_processes", BILLION], "ACCEL_MAX_PROCESSES_PER_MACHINE"),
        (
            ["--num_processes", BILLION, "--num_machines", BILLION, "--main_process_ip", "::1"],
            "ACCEL_MAX_MACHINES",
        ),
        (
            ["--num_processes", "2000000000", "--num_machines", "2", "--main_process_ip", "::1"],
            "ACCEL_MAX_PROCESSES_PER_MACHINE",
        ),
    ],
    ids=["processes", "machines", "processes-per-machine"],
)
def test_a_billion_processes_or_machines_are_refused_before_anything_starts(
    tmp_path, flags, variable
):
    r = accel("launch", *flags, _script(tmp_path), check=False, timeout=90)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "PROCESS STARTED" not in r.stdout and "via torchrun" not in r.stderr
    assert f"{variable}=" in r.stderr and "got " in r.stderr, r.stderr


def test_a_billion_processes_in_a_config_file_are_refused_naming_the_file(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"num_processes: {BILLION}\n")
    r = accel("launch", "--config_file", str(config), _script(tmp_path), check=False, timeout=90)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"num_processes={BILLION}" in r.stderr and "ACCEL_MAX_PROCESSES_PER_MACHINE" in r.stderr
    assert str(config) in r.stderr and "PROCESS STARTED" not in r.stdout


def test_the_process_limit_is_eight_per_cpu_or_accelerator_and_can_be_raised(monkeypatch):
    monkeypatch.delenv("ACCEL_MAX_PROCESSES_PER_MACHINE", raising=False)
    limit = _per_machine_limit()
    code, err = _run(["launch", "--cpu", "--num_processes", str(limit), "--explain", "x.py"])
    assert code == 0, err
    code, err = _run(["launch", "--cpu", "--num_processes", str(limit + 1), "--explain", "x.py"])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"at most {limit} processes per machine" in err and f"got {limit + 1}" in err
    assert f"ACCEL_MAX_PROCESSES_PER_MACHINE={limit + 1}" in err  # the fix, spelled out
    monkeypatch.setenv("ACCEL_MAX_PROCESSES_PER_MACHINE", str(limit + 1))
    code, err = _run(["launch", "--cpu", "--num_processes", str(limit + 1), "--explain", "x.py"])
    assert code == 0, err
    monkeypatch.setenv("ACCEL_MAX_PROCESSES_PER_MACHINE", "many")
    code, err = _run(["launch", "--cpu", "--num_processes", "2", "--explain", "x.py"])
    assert code == 2 and "ACCEL_MAX_PROCESSES_PER_MACHINE must be an integer >= 1" in err


def test_the_machine_limit_can_be_raised(monkeypatch):
    monkeypatch.delenv("ACCEL_MAX_MACHINES", raising=False)
    flags = ["launch", "--cpu", "--main_process_ip", "127.0.0.1"]
    counts = ["--num_machines", "65537", "--num_processes", "65537", "--explain", "x.py"]
    code, err = _run([*flags, *counts])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "num_machines (from the flag --num_machines) must be at most 65536 machines" in err
    assert "got 65537" in err and "ACCEL_MAX_MACHINES=65537" in err, err
    monkeypatch.setenv("ACCEL_MAX_MACHINES", "65537")
    code, err = _run([*flags, *counts])
    assert code == 0, err


def test_notebook_launcher_refuses_a_billion_processes_before_starting_any():
    from accel_launch import notebook_launcher

    per_machine = r"at most \d+ processes per machine .*got 1000000000 per machine"
    with pytest.raises(ValueError, match=per_machine):
        notebook_launcher(print, num_processes=int(BILLION))
    with pytest.raises(ValueError, match="at most 65536 machines; got 1000000000"):
        notebook_launcher(print, num_processes=1, num_nodes=int(BILLION))


def _alias_bomb(levels: int = 9) -> str:
    """A YAML value of nine-fold nested aliases: a few hundred bytes that expand to 9**9 items."""
    value = "&a0 [" + ", ".join(['"lol"'] * 9) + "]"
    for level in range(1, levels):
        value = f"&a{level} [" + ", ".join([value] + [f"*a{level - 1}"] * 8) + "]"
    return value


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (lambda bomb: f"gpu_ids: {bomb}\n", "gpu_ids"),
        (
            lambda bomb: (
                "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n"
                f"  fsdp_transformer_layer_cls_to_wrap: {bomb}\n"
            ),
            "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
        ),
        (lambda bomb: "tpu_env: &r [*r]\n", "tpu_env"),  # a list that holds itself
    ],
    ids=["gpu_ids", "fsdp-layer-classes", "recursive"],
)
def test_a_yaml_alias_bomb_in_a_config_file_is_refused_with_the_file_and_the_key(
    tmp_path, text, key
):
    path = tmp_path / "bomb.yaml"
    path.write_text(text(_alias_bomb()))
    assert path.stat().st_size < 2000
    # In a child process with a deadline: the bomb used to hang the reader.
    code = (
        "from accel_launch import ConfigError, load_config_file\n"
        "try:\n"
        f"    load_config_file({str(path)!r})\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
    )
    out = run_command([sys.executable, "-c", code], timeout=60).stdout
    assert str(path) in out and f"key {key!r}" in out, out
    assert "alias" in out and "100000 values" in out, out


def _merge_bomb(levels: int = 24) -> str:
    """YAML merge keys (``<<``), each mapping merging the one before it three times: under a
    kilobyte that the reader's merge step alone would expand to 3**24 key/value pairs."""
    lines = ["m0: &m0 {a: 1, b: 2}"]
    for level in range(1, levels):
        prior = f"*m{level - 1}"
        lines.append(f"m{level}: &m{level} {{<<: [{prior}, {prior}, {prior}], k{level}: 1}}")
    return "tpu_env:\n" + "".join(f"  {line}\n" for line in lines)


@pytest.mark.parametrize("command", ["env", "tpu-config", "launch"])
def test_a_yaml_merge_key_bomb_is_refused_while_it_is_read(tmp_path, command):
    path = tmp_path / "merge.yaml"
    path.write_text(_merge_bomb())
    assert path.stat().st_size < 1200
    argv = [command, "--config_file", str(path)]
    argv += {"env": [], "tpu-config": ["--command", "ls"], "launch": [_script(tmp_path)]}[command]
    # It used to run for minutes before any check: the deadline makes a hang a failure.
    r = accel(*argv, check=False, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    if _merges_each_key_once():
        # PyYAML 6.0.4 and later copy a merged key once however often it is merged: the file
        # is small once read, and the config check refuses its value.
        assert "tpu_env must be a list" in r.stderr, r.stderr
    else:
        assert str(path) in r.stderr and "merge" in r.stderr and "100000 values" in r.stderr


def _merges_each_key_once() -> bool:
    import yaml

    return tuple(int(part) for part in yaml.__version__.split(".")[:3]) >= (6, 0, 4)


def test_a_used_merge_key_still_loads(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(
        "distributed_type: FSDP\nfsdp_config:\n"
        "  <<: [{fsdp_version: 2}, {fsdp_offload_params: true}]\n"
        "  fsdp_offload_params: false\n"
    )
    config = load_config_file(path)
    assert config.fsdp_config.fsdp_version == 2
    assert config.fsdp_config.fsdp_offload_params is False


def test_a_config_file_larger_than_a_mebibyte_is_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("num_processes: 2\n" + "# padding\n" * 120_000)
    with pytest.raises(ConfigError, match="at most 1048576 bytes.*got 1200017"):
        load_config_file(path)


def test_a_deeply_nested_config_file_is_refused_without_a_traceback(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"gpu_ids": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match="nested deeper than"):
        load_config_file(path)
    path = tmp_path / "deep.yaml"
    path.write_text("gpu_ids: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="nested deeper than"):
        load_config_file(path)


def test_plain_values_and_a_used_alias_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(
        "distributed_type: XLA\ntpu_env: &env [A=1, B=2]\ncommands: *env\n"
        "fsdp_config:\n  fsdp_transformer_layer_cls_to_wrap: Block,Layer\n"
    )
    config = load_config_file(path)
    assert config.tpu_env == ["A=1", "B=2"] and config.commands == ["A=1", "B=2"]
    assert config.fsdp_config.fsdp_transformer_layer_cls_to_wrap == "Block,Layer"


def _no_torch_run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``accel <argv>`` in a fresh interpreter and report whether torch was imported."""
    code = (
        "import sys\n"
        "from accel_launch.cli import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as exit_:\n"
        "    code = exit_.code\n"
        "print('TORCH IMPORTED' if 'torch' in sys.modules else 'NO TORCH')\n"
        "sys.exit(code)\n"
    )
    return run_command([sys.executable, "-c", code], timeout=120, check=False)


def test_merge_weights_checks_every_argument_before_importing_torch(tmp_path):
    out = str(tmp_path / "out")
    r = _no_torch_run(["merge-weights", str(tmp_path), out, "--max_shard_size", "10XB"])
    assert r.returncode == 2 and "got '10XB'" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "NO TORCH" in r.stdout, r.stdout
    r = _no_torch_run(["merge-weights", str(tmp_path / "missing"), out])
    assert r.returncode == 2 and "has none" in r.stderr and "NO TORCH" in r.stdout, r.stderr
    existing = tmp_path / "file"
    existing.write_text("keep")
    r = _no_torch_run(["merge-weights", str(tmp_path), str(existing)])
    assert r.returncode == 2 and "is an existing file" in r.stderr, r.stderr
    assert "NO TORCH" in r.stdout and existing.read_text() == "keep"
    r = _no_torch_run(["merge-weights", str(tmp_path), out, "--unsafe_serialization"])
    assert r.returncode == 2 and "safetensors only" in r.stderr and "NO TORCH" in r.stdout


SIZES = st.one_of(
    st.from_regex(
        r"\s?-?[0-9]{0,3}(\.[0-9]{0,2})?(e[0-9])?\s?(b|B|kb|KB|Kb|kib|MiB|mb|Mb|GB|gib|tB|TiB|XB|nan|inf)?",
        fullmatch=True,
    ),
    st.text(max_size=8),
    st.integers(-3, 10**13),
    st.floats(allow_nan=True),
)


@settings(max_examples=400, deadline=None)
@given(SIZES)
def test_the_shard_size_reads_sizes_as_accel_bigmodel_does(value):
    from accel_bigmodel import convert_file_size_to_int

    from accel_launch.commands._merge import shard_size_bytes

    try:
        expected = convert_file_size_to_int(value)
    except ValueError:
        expected = None
    try:
        got = shard_size_bytes(value)
    except ConfigError:
        got = None
    assert got == (expected if expected is not None and expected > 0 else None), value


def test_a_flag_whose_error_states_the_fix_prints_one_line(isolated_config_home):
    code, err = _run(["config", "default", "--mixed_precision", "bf17"])
    assert code == 2
    assert err.splitlines() == [
        "accel config default: error: argument --mixed_precision: mixed precision must be one of "
        "['no', 'fp8', 'fp16', 'bf16']; got 'bf17'. Pass one of ['no', 'fp8', 'fp16', 'bf16']."
    ]
    assert not (isolated_config_home / "default_config.yaml").exists()
    # argparse's own refusals (no fix in their words) keep the usage of the flag.
    code, err = _run(["config", "default", "--mixed_precision"])
    assert code == 2 and err.splitlines()[1].startswith("usage: accel config default")


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"model_type": "llama", "num_hidden_layers": int(BILLION)}, "num_hidden_layers"),
        ({"model_type": "gpt2", "n_layer": int(BILLION)}, "n_layer"),
        (
            {"model_type": "mixtral", "num_hidden_layers": 2, "num_local_experts": int(BILLION)},
            "num_local_experts",
        ),
        (
            {"model_type": "t5", "text_config": {"num_layers": int(BILLION)}},
            "text_config.num_layers",
        ),
    ],
    ids=["llama", "gpt2", "experts", "nested"],
)
def test_estimate_memory_refuses_a_billion_layers_before_building_any(tmp_path, config, key):
    import json
    import resource

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert (tmp_path / "config.json").stat().st_size < 200

    def capped() -> None:  # a runaway allocation fails here instead of filling the machine
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    code = (
        "import sys\nfrom accel_launch.cli import main\n"
        f"code = main(['estimate-memory', {str(tmp_path)!r}])\n"
        "print('torch imported:', 'torch' in sys.modules)\nsys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=capped,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{key} = {BILLION}" in done.stderr and "at most 10000" in done.stderr, done.stderr
    assert "torch imported: False" in done.stdout, done.stdout


def test_the_estimate_api_refuses_a_billion_layers_too(tmp_path):
    from accel_bigmodel import estimate_memory_from_config

    (tmp_path / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 1e9}')
    assert estimate_memory_from_config(tmp_path) is None  # not an integer: transformers says so
    (tmp_path / "config.json").write_text(f'{{"model_type": "llama", "n_layer": {BILLION}}}')
    with pytest.raises(ValueError, match=f"n_layer = {BILLION}.*at most 10000 layers"):
        estimate_memory_from_config(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_config_file_that_is_not_a_regular_file_is_named_so_and_never_read(tmp_path, kind):
    path = tmp_path / "config.yaml"
    if kind == "fifo":
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    else:
        path = Path("/dev/zero")  # reading it never ends
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    message = str(info.value)
    assert "is not a regular file" in message and "does not exist" not in message, message
    assert str(path) in message


def test_tpu_config_refuses_a_command_file_that_never_ends(tmp_path):
    argv = ["tpu-config", "--tpu_name", "pod", "--tpu_zone", "us-central1-a", "--debug"]
    r = accel(*argv, "--command_file", "/dev/zero", check=False, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "'/dev/zero' is not a regular file" in r.stderr, r.stderr


@pytest.mark.parametrize("path", ["os:abort", "os:getcwd", "torch.nn:Linear.__init__"])
def test_estimate_memory_calls_only_a_module_class_of_a_class_path(path):
    r = accel("estimate-memory", path, check=False, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert "must name an nn.Module class" in r.stderr and repr(path) in r.stderr, r.stderr
