"""Hooks shared by every test folder of the workspace when pytest runs from the root.

Tests marked ``cuda`` skip, with the reason, on a machine without a CUDA device; on a GPU
machine ``tools/gpu_check.sh`` runs them. Packages whose own tests carry the marker repeat the
hook in their ``tests/conftest.py``: the minimal-install check runs them without this file.
"""

from __future__ import annotations

import pytest

CUDA_REASON = "needs a CUDA device (torch.cuda.is_available() is False here); tools/gpu_check.sh runs it on a GPU"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cuda") is None:
        return
    import torch

    if not torch.cuda.is_available():
        pytest.skip(CUDA_REASON)
