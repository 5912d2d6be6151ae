"""``AcceleratorCore`` declares exactly the fields ``Accelerator.__init__`` sets, and the method
groups of the Accelerator are typed against it, not against the facade."""

import inspect

from accel import Accelerator
from accel._facade._fields import AcceleratorCore, fp8_backend_of


def test_the_core_declares_exactly_the_fields_the_accelerator_sets():
    acc = Accelerator(cpu=True)
    declared = set(AcceleratorCore.__annotations__)
    with_default = {name for name in declared if name in vars(AcceleratorCore)}
    assert with_default == {"_tracker_set"}
    assert set(vars(acc)) == declared - with_default


def test_method_groups_derive_from_the_core_and_import_no_facade():
    groups = [base for base in Accelerator.__mro__[1:] if base.__name__.endswith("Mixin")]
    assert [group.__name__ for group in groups] == [
        "StateViewMixin",
        "PrepareMixin",
        "TrainingMixin",
        "OpsMixin",
        "TrackingMixin",
        "CheckpointingMixin",
    ]
    for group in groups:
        assert issubclass(group, AcceleratorCore), group
        source = inspect.getsource(inspect.getmodule(group))
        assert "from ._accelerator import" not in source, group
        assert "self: Accelerator" not in source, group


def test_fp8_backend_without_a_recipe():
    assert fp8_backend_of(None) == "NO"
    assert Accelerator(cpu=True).fp8_backend == "NO"
