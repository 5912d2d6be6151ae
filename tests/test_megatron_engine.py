"""The Megatron-LM engine on megatron-core, for real: ``accel-launch --use_megatron_lm`` on 2 CPU
processes (gloo) forms megatron-core's groups, trains with tensor-parallel degree 1 and data
parallelism 2 to the weights of a plain single-process run, follows megatron-core's schedule and
round-trips ``save_state`` / ``load_state`` (one launch holds every check:
``scripts/megatron_training.py``). What needs CUDA is marked and skipped here."""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import torch
from accel_state.testing import free_port, run_command

SCRIPT = Path(__file__).parent / "scripts" / "megatron_training.py"
NEEDS_MEGATRON = pytest.mark.skipif(
    importlib.util.find_spec("megatron") is None,
    reason='needs megatron-core: pip install "accel-torch[megatron]"',
)


@NEEDS_MEGATRON
@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_data_parallel_training_matches_a_plain_run_and_resumes(tmp_path):
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--cpu", "--num_processes", "2", "--main_process_port", str(free_port())]
    flags = ["--use_megatron_lm", "--megatron_lm_gradient_clipping", "0.25"]
    result = run_command([*command, *flags, str(SCRIPT), str(tmp_path)], timeout=600)
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("MEGATRON")) == [
        "MEGATRON rank=0 ok",
        "MEGATRON rank=1 ok",
    ], result.stdout + result.stderr
    assert "Transformer Engine and Apex" not in result.stderr  # silenced at our import site


@NEEDS_MEGATRON
@pytest.mark.cuda
@pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason="tensor parallelism > 1 runs megatron-core's tensor-parallel layers and its "
    "DistributedDataParallel, which need 2 CUDA GPUs",
)
@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_tensor_parallel_training_on_cuda(tmp_path):
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--num_processes", "2", "--main_process_port", str(free_port())]
    flags = ["--use_megatron_lm", "--megatron_lm_tp_degree", "2"]
    script = Path(__file__).parent / "scripts" / "megatron_tensor_parallel.py"
    result = run_command([*command, *flags, str(script), str(tmp_path)], timeout=600)
    assert result.stdout.count("MEGATRON-TP ok") == 2, result.stdout + result.stderr
