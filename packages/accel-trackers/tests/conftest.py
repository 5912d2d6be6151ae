import pytest


@pytest.fixture(autouse=True)
def _single_process_env(monkeypatch):
    """Tests decide the rank themselves; a RANK inherited from a launcher must not leak in."""
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
