"""Property-based check of explicit split points: any list either passes every check (and is
then in execution order, distinct, one per stage boundary) or raises ValueError naming it."""

from __future__ import annotations

import pytest
from toy_models import ToyLM, toy_inputs

from accel_pipeline._split_points import check_called_once, check_split_points, probe_forward

pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (dev group)")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _probe(model, names):
    watch = {name: model.get_submodule(name) for name in names}
    return probe_forward(model, (toy_inputs(2),), {}, watch)


_TOY = ToyLM()
_NAMES = [n for n, _ in _TOY.named_modules() if n]


# No timing checks: a loaded machine must not fail a test about inputs.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    points=st.lists(
        st.one_of(
            st.sampled_from(_NAMES),
            st.text(max_size=6),
            st.integers(),
            st.none(),
            st.lists(st.text(max_size=2), max_size=2),
        ),
        max_size=5,
    ),
    num_processes=st.integers(1, 5),
)
def test_any_split_points_work_or_raise_value_error(points: list, num_processes: int) -> None:
    try:
        names = check_split_points(_TOY, points, num_processes)
        check_called_once(_probe(_TOY, names), names)
    except ValueError as error:
        assert "split point" in str(error).lower().replace("_", " ")
        return
    assert len(names) == num_processes - 1 and len(set(names)) == len(names)
    probe = _probe(_TOY, names)
    assert [n for n in probe.order if n in names] == names
