"""One small engine per distributed type: how models are wrapped, synchronised and unwrapped.

The facade asks `engine_for` for the engine of the run and calls only the methods of
`Engine`; adding an engine (FSDP ...) means adding a module here and a line in the table,
not branches in the facade. An engine's module is imported when a run first needs it, so that
``from accel import Accelerator`` does not pay for DeepSpeed's, FSDP's or Megatron-LM's code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from accel_state import DistributedType

from ._base import Engine
from ._context import EngineContext

if TYPE_CHECKING:
    from accel_state import AcceleratorState

    from ._ddp import DDPEngine
    from ._xla import XLAEngine
    from .deepspeed._deepspeed import DeepSpeedEngine
    from .fsdp._fsdp import FSDPEngine
    from .megatron._megatron import MegatronLMEngine

# Engine class name -> the module of this package that defines it.
_ENGINE_MODULES: dict[str, str] = {
    "Engine": "._base",
    "DDPEngine": "._ddp",
    "DeepSpeedEngine": ".deepspeed._deepspeed",
    "FSDPEngine": ".fsdp._fsdp",
    "MegatronLMEngine": ".megatron._megatron",
    "XLAEngine": "._xla",
}

_ENGINES: dict[DistributedType, str] = {
    DistributedType.NO: "Engine",
    DistributedType.MULTI_CPU: "DDPEngine",
    DistributedType.MULTI_GPU: "DDPEngine",
    DistributedType.MULTI_XPU: "DDPEngine",
    DistributedType.MULTI_NPU: "DDPEngine",
    DistributedType.FSDP: "FSDPEngine",
    DistributedType.DEEPSPEED: "DeepSpeedEngine",
    DistributedType.MEGATRON_LM: "MegatronLMEngine",
    DistributedType.XLA: "XLAEngine",
}


def _load(name: str) -> type[Engine]:
    cls: type[Engine] = getattr(importlib.import_module(_ENGINE_MODULES[name], __name__), name)
    return cls


def engine_class(state: AcceleratorState) -> type[Engine]:
    """The engine class that serves ``state.distributed_type``.

    Raises:
        NotImplementedError: the distributed type has no engine in this version.
    """
    kind = state.distributed_type
    name = _ENGINES.get(kind)
    if (
        getattr(state, "parallelism_config", None) is not None
        and state.num_processes > 1
        and kind != DistributedType.DEEPSPEED
    ):
        # Tensor and context parallelism (alone or with data parallelism) run on the device
        # mesh; DeepSpeed's sequence parallelism builds its own groups.
        name = "FSDPEngine"
    if name is None:
        raise NotImplementedError(
            f"distributed type {kind.value} has no engine in this version of accel; supported: "
            f"{sorted(k.value for k in _ENGINES)}. See the support table in the README."
        )
    return _load(name)


def engine_for(context: EngineContext) -> Engine:
    """Build the engine that serves ``context.state.distributed_type`` from ``context``."""
    return engine_class(context.state)(context)


def __getattr__(name: str) -> Any:
    if name in _ENGINE_MODULES:
        return _load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DDPEngine",
    "DeepSpeedEngine",
    "Engine",
    "EngineContext",
    "FSDPEngine",
    "MegatronLMEngine",
    "XLAEngine",
    "engine_class",
    "engine_for",
]
