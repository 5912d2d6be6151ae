import os

import pytest

from accel_state import (
    clear_environment,
    detect_world,
    parse_flag_from_env,
    patch_environment,
    str_to_bool,
)

WORLD_KEYS = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "SLURM_NTASKS",
    "SLURM_PROCID",
]


@pytest.fixture
def bare_env():
    with clear_environment():
        yield


def test_single_process_without_launcher(bare_env):
    world = detect_world()
    assert (world.rank, world.world_size, world.launcher) == (0, 1, "none")


def test_torchrun_variables(bare_env):
    with patch_environment(
        rank=3,
        world_size=4,
        local_rank=1,
        local_world_size=2,
        master_addr="10.0.0.1",
        master_port=1234,
    ):
        w = detect_world()
    assert (w.rank, w.world_size, w.local_rank, w.local_world_size) == (3, 4, 1, 2)
    assert (w.master_addr, w.master_port, w.launcher) == ("10.0.0.1", "1234", "torchrun")


def test_open_mpi_variables(bare_env):
    with patch_environment(
        OMPI_COMM_WORLD_SIZE=4,
        OMPI_COMM_WORLD_RANK=2,
        OMPI_COMM_WORLD_LOCAL_RANK=0,
        OMPI_COMM_WORLD_LOCAL_SIZE=2,
    ):
        w = detect_world()
    assert (w.rank, w.world_size, w.local_rank, w.launcher) == (2, 4, 0, "mpi")


def test_slurm_variables(bare_env):
    with patch_environment(
        SLURM_STEP_ID=0,
        SLURM_NTASKS=8,
        SLURM_PROCID=5,
        SLURM_LOCALID=1,
        SLURM_NTASKS_PER_NODE="4(x2)",
        SLURM_JOB_NODELIST="gpu[07-08],cpu1",
    ):
        w = detect_world()
    assert (w.rank, w.world_size, w.local_rank, w.local_world_size) == (5, 8, 1, 4)
    assert w.master_addr == "gpu07" and w.launcher == "slurm"


def test_sbatch_script_is_one_process(bare_env):
    # What an `sbatch -n 2` script sees (no step yet): it is one process, not rank 0 of 2;
    # treating it as a rank would wait forever for a rank 1 nobody starts.
    with patch_environment(
        SLURM_JOB_ID=2,
        SLURM_NTASKS=2,
        SLURM_NPROCS=2,
        SLURM_PROCID=0,
        SLURM_LOCALID=0,
        SLURM_TASKS_PER_NODE=2,
        SLURM_JOB_NODELIST="localhost",
    ):
        w = detect_world()
    assert (w.rank, w.world_size, w.launcher) == (0, 1, "none")


def test_srun_step_inside_a_larger_allocation(bare_env):
    # `srun -n 2` inside an `sbatch -n 4` job: the step's own task count is the world.
    with patch_environment(
        SLURM_STEP_ID=1,
        SLURM_NTASKS=4,
        SLURM_STEP_NUM_TASKS=2,
        SLURM_STEP_TASKS_PER_NODE=2,
        SLURM_PROCID=1,
        SLURM_LOCALID=1,
        SLURM_STEP_NODELIST="cn3",
    ):
        w = detect_world()
    assert (w.rank, w.world_size, w.local_world_size, w.master_addr) == (1, 2, 2, "cn3")


def test_patch_environment_restores(bare_env):
    os.environ["KEEP"] = "1"
    with patch_environment(keep=2, new_one="x"):
        assert os.environ["KEEP"] == "2" and os.environ["NEW_ONE"] == "x"
    assert os.environ["KEEP"] == "1" and "NEW_ONE" not in os.environ


def test_clear_environment_restores():
    before = dict(os.environ)
    with clear_environment():
        assert os.environ == {}
        os.environ["SOMETHING"] = "1"
    assert dict(os.environ) == before


def test_flags(bare_env):
    assert str_to_bool("Yes") and not str_to_bool("0")
    with patch_environment(ACCEL_FLAG="maybe"):
        with pytest.raises(ValueError, match="ACCEL_FLAG.*Use 1 or 0"):
            parse_flag_from_env("ACCEL_FLAG")
    assert parse_flag_from_env("ABSENT", default=True)


def test_bad_integer_names_the_variable(bare_env):
    with patch_environment(rank="x", world_size=2):
        with pytest.raises(ValueError, match="RANK must be an integer"):
            detect_world()
