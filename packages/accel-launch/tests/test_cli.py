import re
import socket
import time

import pytest
import yaml
from accel_state.testing import free_port

from .conftest import SCRIPTS, accel, reports


def test_explain_shows_sources_and_precedence(tmp_path, isolated_config_home):
    isolated_config_home.mkdir()
    (isolated_config_home / "default_config.yaml").write_text(
        yaml.safe_dump({"num_processes": 3, "mixed_precision": "fp16"})
    )
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text(yaml.safe_dump({"num_processes": 4, "debug": True}))
    out = accel("launch", "--explain", "x.py").stdout
    assert "num_processes                3" in out.replace("  ", "  ") or "3" in out
    lines = {line.split()[0]: line for line in out.split("\n\n")[0].splitlines()[1:]}
    assert "config file" in lines["num_processes"] and "3" in lines["num_processes"]
    # --config_file wins over the default file; a flag wins over both.
    out = accel(
        "launch", "--config_file", str(explicit), "--mixed_precision", "bf16", "--explain", "x.py"
    ).stdout
    lines = {line.split()[0]: line for line in out.split("\n\n")[0].splitlines()[1:]}
    assert "4" in lines["num_processes"] and str(explicit) in lines["num_processes"]
    assert (
        "'bf16'" in lines["mixed_precision"]
        and "flag --mixed_precision" in lines["mixed_precision"]
    )
    assert "'no'" not in lines["mixed_precision"]


def test_bad_input_gets_clear_errors(tmp_path):
    r = accel("launch", "--num_processes", "0", "x.py", check=False)
    assert r.returncode == 2 and "num_processes must be an integer >= 1; got 0" in r.stderr
    r = accel("launch", "--mixed_precision", "fp12", "x.py", check=False)
    assert r.returncode == 2 and "mixed_precision must be one of" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [")
    r = accel("launch", "--config_file", str(bad), "x.py", check=False)
    assert r.returncode == 2 and "does not parse" in r.stderr
    r = accel("launch", check=False)
    assert r.returncode == 2 and "needs a script" in r.stderr


@pytest.mark.multiprocess
def test_two_processes_receive_the_configuration():
    out = accel(
        "launch",
        "--num_processes",
        "2",
        "--mixed_precision",
        "bf16",
        "--debug",
        "--dynamo_backend",
        "no",
        str(SCRIPTS / "report_env.py"),
        "--flag",
        "x",
    ).stdout
    rows = reports(out)
    assert [r["process_index"] for r in rows] == [0, 1]
    for r in rows:
        assert r["num_processes"] == 2 and r["WORLD_SIZE"] == "2"
        assert r["ACCEL_MIXED_PRECISION"] == "bf16" and r["ACCEL_DEBUG_MODE"] == "1"
        assert r["ACCEL_USE_CPU"] == "1" and r["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_CPU"
        assert r["ACCEL_DYNAMO_BACKEND"] == "NO" and r["argv"] == ["--flag", "x"]


def test_one_process_without_config_runs_plain_python():
    rows = reports(accel("launch", str(SCRIPTS / "report_env.py")).stdout)
    assert len(rows) == 1 and rows[0]["num_processes"] == 1 and rows[0]["RANK"] is None


@pytest.mark.multiprocess
def test_module_flag_runs_a_module():
    out = accel("launch", "--num_processes", "2", "-m", "json.tool", "--help").stdout
    assert out.count("usage:") == 2


@pytest.mark.multiprocess
def test_failing_rank_stops_all_promptly():
    r = accel(
        "launch",
        "--num_processes",
        "2",
        str(SCRIPTS / "fail_on_rank1.py"),
        check=False,
        timeout=150,
    )
    ended = time.time()
    assert r.returncode != 0
    assert "global rank 1 failed" in r.stderr and "rank 1 failed on purpose" in r.stderr
    failed_at = float(r.stderr.split("FAILED_AT ")[1].split()[0])
    # Rank 0 waits forever in a collective: only the launcher can stop it.
    assert ended - failed_at < 30, f"launcher took {ended - failed_at:.0f}s to stop after a failure"


def test_busy_port_is_a_clear_error():
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        port = sock.getsockname()[1]
        r = accel(
            "launch",
            "--num_processes",
            "2",
            "--main_process_port",
            str(port),
            str(SCRIPTS / "report_env.py"),
            check=False,
        )
    assert r.returncode == 2 and f"main_process_port {port} is already in use" in r.stderr


@pytest.mark.multiprocess
def test_max_restarts_restarts_the_group_and_engine_options_reach_it():
    out = accel(
        "launch",
        "--num_processes",
        "2",
        "--max_restarts",
        "1",
        "--use_fsdp",
        "--fsdp_version",
        "2",
        "--fsdp_offload_params",
        "--fsdp_state_dict_type",
        "SHARDED_STATE_DICT",
        str(SCRIPTS / "fail_first_attempt.py"),
        timeout=150,
    ).stdout
    rows = reports(out)
    assert [r["process_index"] for r in rows] == [0, 1]
    for r in rows:
        assert r["restart"] == "1"  # the group was restarted once, then succeeded
        assert r["ACCEL_USE_FSDP"] == "1" and r["ACCEL_DISTRIBUTED_TYPE"] == "FSDP"
        assert r["ACCEL_FSDP_VERSION"] == "2" and r["ACCEL_FSDP_OFFLOAD_PARAMS"] == "1"
        assert r["ACCEL_FSDP_STATE_DICT_TYPE"] == "SHARDED_STATE_DICT"
        assert "ACCEL_USE_DEEPSPEED" not in r


@pytest.mark.multiprocess
@pytest.mark.parametrize("backend", ["static", "c10d"])
def test_two_machines_on_loopback(backend):
    import subprocess
    import sys

    from accel_state.testing import run_command  # noqa: F401

    port = free_port()
    common = [
        "launch",
        "--num_processes",
        "2",
        "--num_machines",
        "2",
        "--main_process_ip",
        "127.0.0.1",
        "--main_process_port",
        str(port),
        "--rdzv_backend",
        backend,
        str(SCRIPTS / "report_env.py"),
    ]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "accel_launch.cli",
                *common[:1],
                "--machine_rank",
                str(rank),
                *common[1:],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err
        outs.append(out)
    rows = reports("".join(outs))
    assert [r["process_index"] for r in rows] == [0, 1]
    assert [r["GROUP_RANK"] for r in rows] == ["0", "1"]
    assert all(r["num_processes"] == 2 and r["LOCAL_RANK"] == "0" for r in rows)


def test_config_default_and_env(isolated_config_home):
    out = accel("config", "default", "--mixed_precision", "bf16").stdout
    target = isolated_config_home / "default_config.yaml"
    assert str(target) in out and target.is_file()
    assert "left unchanged" in accel("config", "default").stdout
    env_out = accel("env").stdout
    assert "accel-launch" in env_out and "mixed_precision: bf16" in env_out


@pytest.mark.multiprocess
def test_a_rank_that_raises_is_reported_once_with_its_rank():
    r = accel(
        "launch",
        "--num_processes",
        "2",
        str(SCRIPTS / "raise_in_step.py"),
        check=False,
        timeout=150,
    )
    output = r.stdout + r.stderr
    assert r.returncode == 1, output
    # rank 1's traceback, once, every line prefixed with its rank
    assert output.count("Traceback (most recent call last):") == 1, output
    assert "[rank 1] Traceback (most recent call last):" in r.stderr, output
    assert "[rank 1]     training_step(state.process_index)" in r.stderr, output
    assert "[rank 1] ValueError: bad batch on rank 1\n" in r.stderr, output
    # rank 0's collective failed because rank 1 left: one line, not the backend's traceback
    assert "GLHF" not in output and "RuntimeError" not in output, output
    rank_0 = [line for line in r.stderr.splitlines() if line.startswith("[rank 0]")]
    assert all(line.startswith("[rank 0] stopped: a collective failed") for line in rank_0), output
    # the last line names the rank that raised (not the peer torchrun happened to see first),
    # with its exception's exit code even when torchrun's stop signal reached it as it exited
    last = r.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"accel launch: process of global rank 1 failed with exit code 1 \(ValueError: bad batch "
        r"on rank 1; its traceback is above, each line starting \[rank 1\]"
        r"(; signal 15 reached it as it exited)?\); every other process was stopped\.",
        last,
    ), output
