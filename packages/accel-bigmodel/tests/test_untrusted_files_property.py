"""Property: the DCP metadata reader refuses every global outside its allow-list, before it
imports or looks anything up (so a name of a module that does not exist is refused too)."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis (the workspace's dev group)")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_bigmodel import UntrustedPickleError, read_dcp_metadata_safely

_IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    module=st.one_of(st.sampled_from(["os", "posix", "subprocess", "builtins", "torch"]), _IDENT),
    name=st.one_of(st.sampled_from(["system", "eval", "exec", "load", "Popen"]), _IDENT),
)
def test_dcp_metadata_reader_refuses_any_other_global_before_looking_it_up(tmp_path, module, name):
    import torch as _torch

    if module == "torch" and isinstance(getattr(_torch, name, None), _torch.dtype):
        return  # dtypes are the one family accepted by type
    (tmp_path / ".metadata").write_bytes(f"c{module}\n{name}\n.".encode())
    with pytest.raises(UntrustedPickleError) as info:
        read_dcp_metadata_safely(tmp_path)
    assert info.value.refused_global == f"{module}.{name}"
