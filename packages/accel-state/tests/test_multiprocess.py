import pytest

from accel_state.testing import run_distributed

SCRIPTS = __import__("pathlib").Path(__file__).parent / "scripts"


@pytest.mark.multiprocess
def test_partial_state_on_two_gloo_processes(tmp_path):
    result = run_distributed(
        SCRIPTS / "state_checks.py", str(tmp_path), num_processes=2, timeout=120
    )
    assert "rank 0 OK" in result.stdout and "rank 1 OK" in result.stdout


@pytest.mark.multiprocess
def test_parallelism_config_builds_the_mesh_and_its_joint_dimensions(tmp_path):
    result = run_distributed(SCRIPTS / "mesh_checks.py", num_processes=4, timeout=180)
    assert all(f"rank {r} OK" in result.stdout for r in range(4)), result.stdout
