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
