"""``accel_state.lazy.lazy_module``: the one helper behind every lazy namespace of accel."""

from __future__ import annotations

import collections
import json.decoder
from typing import Any

import pytest

import accel_state
from accel_state import _enums
from accel_state.lazy import lazy_module


def _namespace() -> dict[str, Any]:
    return {"__name__": "accel_state.fake", "__package__": "accel_state"}


def test_resolves_relative_and_absolute_paths_once_and_caches():
    namespace = _namespace()
    exports = {"DistributedType": "._enums", "OrderedDict": "collections"}
    getattr_, dir_ = lazy_module(namespace, exports)
    assert getattr_("DistributedType") is _enums.DistributedType
    assert getattr_("OrderedDict") is collections.OrderedDict
    # Cached into the module's namespace, so the module's own lookup finds it next time.
    assert namespace["DistributedType"] is _enums.DistributedType
    assert namespace["OrderedDict"] is collections.OrderedDict
    assert dir_() == sorted(["__name__", "__package__", "DistributedType", "OrderedDict"])


def test_submodules_import_on_attribute_access_and_are_listed():
    namespace = {"__name__": "json", "__package__": "json"}
    getattr_, dir_ = lazy_module(namespace, {}, submodules=("decoder",))
    assert getattr_("decoder") is json.decoder
    assert "decoder" in dir_()


def test_unknown_name_states_the_rule_the_value_and_a_fix():
    getattr_, _ = lazy_module(
        _namespace(), {"DistributedType": "._enums"}, submodules=("environment_variables",)
    )
    with pytest.raises(AttributeError) as caught:
        getattr_("DistributedTyp")
    message = str(caught.value)
    assert "module 'accel_state.fake' has no attribute 'DistributedTyp'" in message
    assert "the 1 it exports" in message and "environment_variables" in message
    assert "did you mean 'DistributedType'?" in message
    assert caught.value.name == "DistributedTyp"
    with pytest.raises(AttributeError, match=r"check the spelling against dir\(accel_state.fake\)"):
        getattr_("zzz")
    # A dunder probe (``hasattr(module, "__path__")``) gets the short message, as Python's own.
    with pytest.raises(AttributeError, match=r"has no attribute '__path__'$"):
        getattr_("__path__")


def test_package_namespaces_use_it():
    assert "PartialState" in dir(accel_state)
    with pytest.raises(AttributeError, match="did you mean 'PartialState'"):
        accel_state.PartialStat  # noqa: B018


def test_version_is_read_from_the_distribution_on_first_access():
    import importlib.metadata

    namespace = _namespace()
    getattr_, dir_ = lazy_module(namespace, {}, distribution="accel-state")
    assert "__version__" in dir_() and "__version__" not in namespace
    assert getattr_("__version__") == importlib.metadata.version("accel-state")
    assert namespace["__version__"] == accel_state.__version__
    with pytest.raises(AttributeError, match="has no attribute '__version__'"):
        lazy_module(_namespace(), {})[0]("__version__")
