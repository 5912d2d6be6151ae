import importlib.util

import pytest


@pytest.fixture(autouse=True)
def _single_process_env(monkeypatch):
    """Tests decide the rank themselves; a RANK inherited from a launcher must not leak in."""
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)


def needs(module: str):
    """Skip marker for a test that needs the backend package `module`."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed in this environment (pip install the matching "
        "accel-trackers extra or `uv sync --group test`)",
    )
