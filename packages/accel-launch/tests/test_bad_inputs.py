"""Every bad input gets one clear error before any work: config files of any shape, typed flags
with any value, missing scripts and modules, bad subcommand arguments, merge-weights paths."""

import argparse
import contextlib
import io
import json
import os
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_launch import ConfigError, config_from_dict, load_config_file
from accel_launch._flags import add_launch_arguments
from accel_launch.cli import main
from accel_launch.configs._config_file import FIELD_NAMES
from accel_launch.configs._engine_configs import SECTIONS

from .conftest import accel

CHECKS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
WORDS = [
    "no", "fp16", "bf16", "fp8", "NO", "MULTI_CPU", "MULTI_GPU", "FSDP", "DEEPSPEED",
    "MEGATRON_LM", "TPU", "LOCAL_MACHINE", "AMAZON_SAGEMAKER", "static", "c10d", "all", "cpu",
    "nvme", "none", "FULL_SHARD", "SIZE_BASED_WRAP", "inductor", "true", "false", "yes", "-1",
    "0", "2", "1.5", "nan", "inf", "", " ", "auto",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
SECTION_KEYS = [key for cls in SECTIONS.values() for key in cls.keys()]


def _section() -> st.SearchStrategy:
    keys = st.sampled_from(SECTION_KEYS) | st.text(max_size=10)
    return st.dictionaries(keys, VALUES, max_size=4) | VALUES


GARBAGE_KEYS = st.dictionaries(st.text(max_size=10) | st.integers(), VALUES, max_size=1)
CONFIGS = st.tuples(
    st.dictionaries(
        st.sampled_from(FIELD_NAMES + ["dynamo_backend", "mpirun_config", "tpu_name"]),
        SCALARS | VALUES,
        max_size=8,
    ),
    st.one_of(st.just({}), st.just({}), st.just({}), GARBAGE_KEYS),
).flatmap(
    lambda parts: st.fixed_dictionaries(
        {name: _section() for name in SECTIONS if name in parts[0]}
    ).map(lambda sections: {**parts[1], **parts[0], **sections})
)


@CHECKS
@given(CONFIGS)
def test_any_config_mapping_loads_or_raises_config_error(data):
    try:
        config = config_from_dict(data, source="random.yaml")
    except ConfigError as err:
        # Every refusal states the value it got (or the unknown key, with the valid ones).
        assert "got " in str(err) or "Valid settings" in str(err), err
        assert "not supported between" not in str(err) and "object" not in str(err), err
        return
    # What loads is complete and valid: writing and reading it back changes nothing.
    again = config_from_dict(json.loads(json.dumps(config.to_dict())), source="saved")
    assert again.to_dict() == config.to_dict()


@CHECKS
@given(
    st.one_of(CONFIGS.map(lambda d: yaml.safe_dump(d, allow_unicode=True)), st.text(max_size=60))
)
def test_any_config_file_loads_or_raises_config_error(tmp_path, text):
    for name in ("config.yaml", "config.json"):
        path = tmp_path / name
        path.write_text(text)
        try:
            load_config_file(path)
        except ConfigError:
            pass


def test_undecodable_config_file_is_a_config_error(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="cannot be read as text"):
        load_config_file(path)


def _valued_flags() -> list[str]:
    parser = add_launch_arguments(argparse.ArgumentParser())
    return sorted(
        action.option_strings[-1]
        for action in parser._actions
        if action.option_strings and action.nargs != 0 and action.dest != "config_file"
    )


FLAG_VALUES = st.one_of(
    st.sampled_from(WORDS),
    st.integers(min_value=-(2**40), max_value=2**40).map(str),
    st.floats().map(str),
    st.text(max_size=10),
)


def _run(argv: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, err.getvalue()


@CHECKS
@given(st.lists(st.tuples(st.sampled_from(_valued_flags()), FLAG_VALUES), min_size=1, max_size=3))
def test_typed_flags_parse_or_fail_with_one_line_and_the_flag_usage(flags):
    argv = ["launch", *[f"{flag}={value}" for flag, value in flags], "--explain", "x.py"]
    code, err = _run(argv)
    assert "Traceback" not in err
    if code == 0:
        return
    lines = err.strip().splitlines()
    assert code == 2, err
    assert lines[0].startswith("accel launch: error: "), err
    if "error: argument --" in lines[0]:  # argparse refused the value: that flag's usage
        assert len(lines) == 2 and lines[1].startswith("usage: accel launch --"), err
    else:  # the value parsed but the setting is wrong: one line, the rule and the fix
        assert len(lines) == 1, err


def test_flag_type_error_is_one_line_and_the_usage_of_that_flag():
    code, err = _run(["launch", "--num_processes", "two", "x.py"])
    assert code == 2
    assert err.splitlines() == [
        "accel launch: error: argument --num_processes/--num-processes: expected a whole number "
        "like 2, got 'two'",
        "usage: accel launch --num_processes NUM_PROCESSES  (TOTAL number of processes over all "
        "machines (not per machine))",
    ]
    code, err = _run(["launch", "--gradient_clipping", "nan", "--use_deepspeed", "x.py"])
    assert code == 2 and len(err.splitlines()) == 2 and "finite number" in err


@pytest.mark.parametrize("value", ["-1", "-0.5"])
@pytest.mark.parametrize("engine", ["--use_deepspeed"])
def test_negative_gradient_clipping_flag_is_refused(engine, value):
    code, err = _run(["launch", engine, "--gradient_clipping", value, "--explain", "x.py"])
    assert code == 2 and len(err.splitlines()) == 1
    assert "deepspeed_config.gradient_clipping is the largest gradient norm kept" in err
    assert f"got {float(value)}" in err and "Pass e.g. --gradient_clipping 1.0" in err


def test_negative_gradient_clipping_in_a_config_file_is_refused(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_clipping: -1\n")
    with pytest.raises(ConfigError, match="gradient_clipping is the largest gradient norm"):
        load_config_file(path)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (["no_such_script.py"], "'no_such_script.py' is missing"),
        (["-m", "no_such_package_x.train"], "'no_such_package_x' of 'no_such_package_x.train'"),
        (["-m", "json.no_such_module"], "'json.no_such_module' of 'json.no_such_module'"),
        (["--no_python", "no-such-executable-x"], "'no-such-executable-x' is neither on PATH"),
    ],
)
def test_missing_target_fails_before_any_process_starts(target, message):
    r = accel("launch", "--num_processes", "2", *target, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
    assert "via torchrun" not in r.stderr  # nothing was started


def test_module_in_the_current_folder_is_found(tmp_path):
    from accel_state.testing import run_command

    (tmp_path / "localpkg").mkdir()
    (tmp_path / "localpkg" / "__init__.py").write_text("")
    (tmp_path / "localpkg" / "main.py").write_text("print('LOCAL MODULE RAN')\n")
    command = [os.path.join(os.path.dirname(sys.executable), "accel"), "launch", "-m"]
    out = run_command([*command, "localpkg.main"], timeout=120, cwd=tmp_path).stdout
    assert "LOCAL MODULE RAN" in out


def test_config_default_with_a_bad_precision_is_one_line_and_writes_nothing(
    isolated_config_home,
):
    code, err = _run(["config", "default", "--mixed_precision", "bf17"])
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and "mixed precision must be one of" in lines[0] and "'bf17'" in lines[0]
    assert "Pass one of" in lines[0]
    assert not (isolated_config_home / "default_config.yaml").exists()


def test_merge_weights_bad_arguments_fail_before_any_work(tmp_path):
    code, err = _run(
        ["merge-weights", str(tmp_path), str(tmp_path / "out"), "--max_shard_size", "10XB"]
    )
    lines = err.splitlines()
    assert (
        code == 2 and len(lines) == 1 and "got '10XB'" in lines[0] and "Write it like" in lines[0]
    )
    code, err = _run(
        ["merge-weights", str(tmp_path), str(tmp_path / "out"), "--max_shard_size", "0"]
    )
    assert code == 2 and "must be > 0 bytes" in err
    existing = tmp_path / "weights.safetensors"
    existing.write_bytes(b"keep me")
    code, err = _run(["merge-weights", str(tmp_path / "missing"), str(existing)])
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{str(existing)!r} is an existing file" in err and existing.read_bytes() == b"keep me"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_merged_files_follow_the_umask(tmp_path, umask, mode):
    import torch
    import torch.distributed.checkpoint as dcp

    ckpt = tmp_path / "ckpt"
    dcp.save(
        {"model": {"w": torch.ones(4), "b": torch.zeros(2)}}, checkpoint_id=str(ckpt), no_dist=True
    )
    old = os.umask(umask)
    try:
        code, err = _run(
            ["merge-weights", str(ckpt), str(tmp_path / "out"), "--max_shard_size", "16"]
        )
    finally:
        os.umask(old)
    assert code == 0, err
    written = sorted((tmp_path / "out").iterdir())
    assert len(written) == 3  # two shards and the index
    for path in written:
        assert path.stat().st_mode & 0o777 == mode, (path, oct(path.stat().st_mode))
