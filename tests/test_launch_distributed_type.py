"""What ``accel launch`` says it runs is what the processes run: each engine or distributed-type
flag on 2 real processes, the launcher's own line against ``AcceleratorState().distributed_type``
in every child; what no process of this version runs is refused before any starts, in the same
words as the Accelerator's."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from accel_state.testing import free_port, run_command

SCRIPT = Path(__file__).parent / "scripts" / "report_distributed_type.py"
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)
LAUNCH_LINE = re.compile(r"accel launch: (\d+) process(?:es)? on \d+ machines? via (\S+), (\w+),")
CHILD_LINE = re.compile(r"CHILD rank=(\d) of=(\d) type=(\w+)")
NEEDS_MEGATRON = pytest.mark.skipif(
    importlib.util.find_spec("megatron") is None,
    reason='needs megatron-core: pip install "accel-torch[megatron]"',
)
NEEDS_DEEPSPEED = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="needs deepspeed: pip install 'accel-torch[deepspeed]'",
)


def _launcher() -> str:
    return shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")


def _launch(*flags: str, check: bool = True) -> subprocess.CompletedProcess:
    processes = [] if "--num_processes" in flags else ["--num_processes", "2"]
    command = [_launcher(), *processes, "--main_process_port", str(free_port())]
    return run_command(
        [*command, *flags, str(SCRIPT)],
        timeout=600,
        check=check,
        env={**os.environ, "TORCH_EXTENSIONS_DIR": EXTENSIONS},
    )


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param([], "MULTI_CPU", id="plain"),
        pytest.param(["--cpu"], "MULTI_CPU", id="cpu"),
        pytest.param(["--use_fsdp", "--fsdp_version", "1"], "FSDP", id="fsdp1"),
        pytest.param(["--use_fsdp", "--fsdp_version", "2"], "FSDP", id="fsdp2"),
        pytest.param(["--use_deepspeed"], "DEEPSPEED", id="deepspeed", marks=NEEDS_DEEPSPEED),
        pytest.param(["--use_megatron_lm"], "MEGATRON_LM", id="megatron", marks=NEEDS_MEGATRON),
    ],
)
def test_launcher_reports_the_type_every_process_uses(flags, expected):
    if not flags and _has_cuda():
        expected = "MULTI_GPU"
    result = _launch(*flags)
    said = LAUNCH_LINE.search(result.stderr)
    assert said is not None, result.stderr
    assert said.group(1) == "2" and said.group(3) == expected, said.group(0)
    children = sorted(CHILD_LINE.findall(result.stdout))
    assert [rank for rank, _, _ in children] == ["0", "1"], result.stdout
    assert {(of, kind) for _, of, kind in children} == {("2", said.group(3))}


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_fsdp_on_one_process_is_reported_as_what_runs():
    explain = _launch("--use_fsdp", "--num_processes", "1", "--explain").stdout
    assert "derived (FSDP on one process trains plainly)" in explain
    result = _launch("--use_fsdp", "--num_processes", "1")
    assert CHILD_LINE.findall(result.stdout) == [("0", "1", "NO")], result.stdout


@pytest.mark.timeout(300)
def test_megatron_lm_without_megatron_core_is_refused_by_the_launcher_and_the_accelerator_alike(
    tmp_path,
):
    # A package named megatron without megatron.core first on the path: megatron-core is absent.
    (tmp_path / "megatron").mkdir()
    (tmp_path / "megatron" / "__init__.py").write_text("")
    hidden = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [_launcher(), "--num_processes", "2", "--main_process_port", str(free_port())]
    result = run_command(
        [*command, "--use_megatron_lm", str(SCRIPT)], timeout=300, check=False, env=hidden
    )
    assert result.returncode == 2 and "CHILD" not in result.stdout
    assert "accel launch: 2 processes" not in result.stderr  # nothing was started
    launcher = result.stderr.strip().splitlines()
    assert len(launcher) == 1
    expected = "Megatron-LM training needs the megatron-core package, which is not installed"
    assert launcher[0].startswith("accel launch: error: " + expected), launcher[0]
    assert 'pip install "accel-torch[megatron]"' in launcher[0]
    # A process started some other way with the launcher's variables: the Accelerator says it.
    env = {**hidden, "ACCEL_USE_MEGATRON_LM": "1", "ACCEL_DISTRIBUTED_TYPE": "MEGATRON_LM"}
    child = run_command([sys.executable, str(SCRIPT)], timeout=200, check=False, env=env)
    assert child.returncode != 0
    assert f"NotImplementedError: {expected}; got ACCEL_USE_MEGATRON_LM=1" in child.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "kind",
    [
        "TPU",
        "XLA",
        "MULTI_NPU",
        "MULTI_MLU",
        "MULTI_HPU",
        "MULTI_MUSA",
        "MULTI_SDAA",
        "MULTI_NEURON",
    ],
)
def test_types_no_process_runs_are_refused_from_a_config_file(tmp_path, kind):
    config = tmp_path / "config.yaml"
    config.write_text(f"distributed_type: {kind}\nnum_processes: 2\n")
    result = run_command(
        [_launcher(), "--config_file", str(config), str(SCRIPT)], timeout=200, check=False
    )
    assert result.returncode == 2 and "CHILD" not in result.stdout
    assert f"got distributed_type '{kind}' from the config file {config}" in result.stderr
    if kind in ("TPU", "XLA"):  # this workspace has no torch_xla (tools/xla_env.py has)
        assert "TPU / XLA runs need torch_xla, but torch_xla is not installed" in result.stderr
    else:
        assert "not supported by this version of accel" in result.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_multi_gpu_without_gpus_runs_the_processes_on_cpu():
    if _has_cuda():
        pytest.skip("this machine has CUDA devices: --multi_gpu runs on them here")
    result = _launch("--multi_gpu")
    warning = "accel launch: warning: --multi_gpu found no GPU on this machine; the 2 process(es)"
    assert [line for line in result.stderr.splitlines() if "warning" in line] == [
        warning + " run on CPU."
    ], result.stderr
    said = LAUNCH_LINE.search(result.stderr)
    assert said is not None and said.group(1) == "2" and said.group(3) == "MULTI_CPU", said
    children = sorted(CHILD_LINE.findall(result.stdout))
    assert children == [("0", "2", "MULTI_CPU"), ("1", "2", "MULTI_CPU")], result.stdout


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0
