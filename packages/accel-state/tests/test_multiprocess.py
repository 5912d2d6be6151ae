import pytest

from accel_state.testing import run_distributed

SCRIPTS = __import__("pathlib").Path(__file__).parent / "scripts"


@pytest.mark.multiprocess
def test_partial_state_on_two_gloo_processes(tmp_path):
    result = run_distributed(
        SCRIPTS / "state_checks.py", str(tmp_path), num_processes=2, timeout=120
    )
    assert "rank 0 OK" in result.stdout and "rank 1 OK" in result.stdout
