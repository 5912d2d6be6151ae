import pytest
from accel_state import AcceleratorState, GradientState


@pytest.fixture(autouse=True)
def fresh_state():
    """Each test builds its Accelerator on a fresh shared state."""
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
