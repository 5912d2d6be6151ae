"""The correctness checks ``tools/gpu_check.sh`` runs on a GPU.

Every test here carries the ``gpu_check`` marker. Checks that need CUDA carry ``cuda`` and skip
with the reason elsewhere; checks that do not depend on the device run on the CPU too (the
``device`` parameter), so the CPU dry run (``tools/gpu_check.sh --dry-run``) exercises their
code and only the CUDA-specific lines wait for a GPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from accel_state import AcceleratorState, GradientState

sys.path.insert(0, os.path.dirname(__file__))

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.gpu_check)


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    """Each check builds its Accelerator on a fresh shared state."""
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
