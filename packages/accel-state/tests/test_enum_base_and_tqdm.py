"""BaseEnum / EnumWithContains, PROFILE_PATTERN_NAME and the main-process-only tqdm."""

from __future__ import annotations

import enum
import importlib.util
import io
from pathlib import Path

import pytest

from accel_state import PROFILE_PATTERN_NAME, BaseEnum, EnumWithContains, tqdm
from accel_state.testing import reset_state, run_distributed

SCRIPTS = Path(__file__).parent / "scripts"


class Color(BaseEnum):
    RED = "red"
    BLUE = "blue"


class Size(enum.Enum, metaclass=EnumWithContains):
    SMALL = 1


def test_base_enum_str_list_and_contains() -> None:
    assert str(Color.RED) == "red"
    assert Color.list() == ["red", "blue"]
    assert "red" in Color and Color.BLUE in Color
    assert "green" not in Color
    assert [] not in Color  # an unhashable value is simply not a member


def test_enum_with_contains_on_a_plain_enum() -> None:
    assert 1 in Size and 2 not in Size
    assert Size(1) is Size.SMALL


def test_profile_pattern_name() -> None:
    assert PROFILE_PATTERN_NAME.format(suffix=3) == "profile_3.json"


@pytest.fixture
def fresh_state():
    reset_state()
    yield
    reset_state()


_needs_tqdm = pytest.mark.skipif(
    importlib.util.find_spec("tqdm") is None,
    reason="tqdm is not installed: accel-state does not depend on it (install tqdm to draw bars)",
)


@_needs_tqdm
def test_tqdm_draws_on_a_single_process(fresh_state) -> None:
    out = io.StringIO()
    bar = tqdm(range(4), file=out, desc="single")
    assert bar.disable is False  # (a finished bar disables itself: read it before iterating)
    assert list(bar) == [0, 1, 2, 3]
    assert "single" in out.getvalue() and "4/4" in out.getvalue()


def test_tqdm_refuses_a_bool_first_argument() -> None:
    with pytest.raises(ValueError, match="main_process_only=True"):
        tqdm(True, range(3))


@_needs_tqdm
@pytest.mark.multiprocess
def test_tqdm_draws_on_the_main_process_only() -> None:
    result = run_distributed(SCRIPTS / "tqdm_checks.py", num_processes=2, timeout=150)
    assert "rank 0 OK" in result.stdout and "rank 1 OK" in result.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("tqdm") is not None, reason="checks the error given without tqdm"
)
def test_tqdm_without_tqdm_names_the_install(fresh_state) -> None:
    with pytest.raises(ImportError, match="pip install tqdm"):
        tqdm(range(2))
