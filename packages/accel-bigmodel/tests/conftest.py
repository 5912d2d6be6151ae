import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

from bigmodel_helpers import TinyLM


@pytest.fixture
def tiny() -> TinyLM:
    torch.manual_seed(0)
    return TinyLM().eval()


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too: the minimal-install check runs these tests without the root config.
    config.addinivalue_line("markers", "cuda: needs a CUDA device")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``cuda`` skip with the reason where there is no CUDA device."""
    if item.get_closest_marker("cuda") is not None and not torch.cuda.is_available():
        pytest.skip(
            "needs a CUDA device (torch.cuda.is_available() is False here); "
            "tools/gpu_check.sh runs it on a GPU"
        )
