"""The argument probe's cases: for every name of the clients' scan (``scan.py``), calls with the
kinds of arguments the clients' call sites pass (read in their sources: the file is named in
each group). Each case receives the object that ``accelerate.<module>.<name>`` resolves to and
returns a value the runner encodes (``runner.py``); it runs once with the switch on (accel) and
once with it off (the reference), and ``test_argument_probe.py`` compares the two.

Every case function imports what it needs itself: this module is imported in both interpreters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Case = Callable[[Any], Any]
CASES: dict[tuple[str, str | None], dict[str, Case]] = {}

NOT_ON_CPU: dict[tuple[str, str | None], str] = {
    ("accelerate.utils", "load_fsdp_model"): "needs an FSDP-wrapped model in a process group "
    "(the Trainer's FSDP runs of tests/ecosystem cover the call)",
    ("accelerate.utils", "save_fsdp_model"): "needs an FSDP-wrapped model in a process group "
    "(the Trainer's FSDP runs of tests/ecosystem cover the call)",
    ("accelerate.utils", "load_fsdp_optimizer"): "needs an FSDP-wrapped model in a process group",
    ("accelerate.utils", "save_fsdp_optimizer"): "needs an FSDP-wrapped model in a process group",
    ("accelerate.utils.deepspeed", "HfDeepSpeedConfig"): "a base class transformers subclasses; "
    "its DeepSpeed config is compared by the Trainer's DeepSpeed runs",
    ("accelerate.utils", "DeepSpeedSchedulerWrapper"): "wraps a scheduler of a DeepSpeed engine",
    ("accelerate.commands.launch", "launch_command"): "starts processes: compared by "
    "tests/parity/test_cli_parity.py",
}
"""Names that cannot be probed in one CPU process, with the reason."""

DELIBERATE: dict[str, str] = {
    "accelerate.utils:find_executable_batch_size::halving_batch_size": "accel halves the batch "
    "size after an out-of-memory error, the reference takes 90% (docs/migration.md)",
    "accelerate.utils:DistributedType::distributed_type_as_text": "str() of accel's enums is the "
    "value ('NO'), the reference's is 'DistributedType.NO' (docs/migration.md)",
}
"""Cases whose results differ by a documented rule: both must return, the values may differ."""

ACCEL_ACCEPTS_MORE: dict[str, str] = {
    "accelerate:skip_first_batches::skip_past_the_end": "skipping more batches than the loader "
    "has gives an empty loader on accel; the reference fails in len() (a negative length)",
    "accelerate.utils.modeling:convert_file_size_to_int::file_size_float": "a whole float is a "
    "number of bytes on accel; the reference fails calling str methods on it",
}
"""Cases where the reference raises and accel returns a value, with the reason."""


def case(*keys: str) -> Callable[[Case], Case]:
    """Register a case under each ``"module:name"`` (``"module"`` alone for the module itself)."""

    def register(function: Case) -> Case:
        for key in keys:
            module, _, name = key.partition(":")
            CASES.setdefault((module, name or None), {})[function.__name__] = function
        return function

    return register


def small_model() -> Any:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    model.register_buffer("scale", torch.ones(2))
    return model


def outcome(model: Any) -> Any:
    """The model's forward on a fixed input and where its weights are."""
    import torch

    torch.manual_seed(1)
    with torch.no_grad():
        out = model(torch.randn(3, 4))
    return out, {name: (p.device.type, p.dtype) for name, p in model.state_dict().items()}
