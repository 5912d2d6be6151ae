"""The ``Accelerator`` is one class: no base class of its own package, every public member
defined in its body, the fields it declares are exactly those ``__init__`` sets, and its
members keep the names, kinds and signatures listed in ``accelerator_members.txt``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from accel import Accelerator
from accel._facade._state_view import fp8_backend_of

MEMBERS = Path(__file__).with_name("accelerator_members.txt")


def member_lines() -> list[str]:
    """One line per member of the class: name, kind, and signature for methods."""
    lines = []
    for name in sorted(vars(Accelerator)):
        if name.startswith("__") and name not in ("__init__", "__repr__"):
            continue
        raw = inspect.getattr_static(Accelerator, name)
        if isinstance(raw, property):
            kind, signature = "property" + (" settable" if raw.fset else ""), ""
        elif callable(raw):
            kind, signature = "method", str(inspect.signature(raw))
        else:
            kind, signature = f"attribute {type(raw).__name__}", ""
        signature = re.sub(r"<object object at 0x[0-9a-f]+>", "<unset>", signature)
        lines.append(f"{name} {kind} {signature}".rstrip())
    return lines


def test_the_accelerator_has_no_base_class_but_object():
    assert Accelerator.__bases__ == (object,)


def test_every_member_is_defined_in_the_class_body():
    own = set(vars(Accelerator))
    inherited = [name for name in dir(Accelerator) if name not in own and name not in dir(object)]
    assert inherited == []


def test_members_keep_their_names_kinds_and_signatures():
    expected = MEMBERS.read_text(encoding="utf-8").splitlines()
    assert member_lines() == expected, (
        "the Accelerator's members changed; if on purpose, regenerate the list with "
        "`python packages/accel/tests/test_accelerator_core.py > "
        "packages/accel/tests/accelerator_members.txt`"
    )


def test_the_class_declares_exactly_the_fields_init_sets():
    acc = Accelerator(cpu=True)
    declared = set(Accelerator.__annotations__)
    with_default = {name for name in declared if name in vars(Accelerator)}
    assert with_default == {"_tracker_set"}
    assert set(vars(acc)) == declared - with_default


def test_fp8_backend_without_a_recipe():
    assert fp8_backend_of(None) == "NO"
    assert Accelerator(cpu=True).fp8_backend == "NO"


if __name__ == "__main__":
    print("\n".join(member_lines()))


class _Recording(Accelerator):
    """Overrides the methods other methods call, as transformers' and TRL's subclasses do."""

    calls: list[str]

    def prepare_model(self, model, device_placement=None, evaluation_mode=False):
        self.calls.append("prepare_model")
        return super().prepare_model(model, device_placement, evaluation_mode)

    def prepare_optimizer(self, optimizer, device_placement=None):
        self.calls.append("prepare_optimizer")
        return super().prepare_optimizer(optimizer, device_placement)

    def no_sync(self, model):
        self.calls.append("no_sync")
        return super().no_sync(model)

    def get_state_dict(self, model, unwrap=True):
        self.calls.append("get_state_dict")
        return super().get_state_dict(model, unwrap)

    def free_memory(self, *objects):
        self.calls.append("free_memory")
        return super().free_memory(*objects)


def test_methods_call_each_other_through_the_instance(tmp_path):
    import torch

    acc = _Recording(cpu=True, gradient_accumulation_steps=2)
    acc.calls = []
    model = torch.nn.Linear(2, 1)
    model, _ = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with acc.accumulate(model):  # the first of two batches: no synchronisation
        acc.backward(model(torch.ones(1, 2)).sum())
    acc.save_model(model, tmp_path)
    acc.clear()
    assert acc.calls == [
        "prepare_model",
        "prepare_optimizer",
        "no_sync",
        "get_state_dict",
        "free_memory",
    ]
