"""``accel.inference``: distributed inference helpers (pipeline parallelism)."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.inference"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        calculate_maximum_sizes,
        convert_bytes,
        infer_auto_device_map,
    )
    from accel_collectives import (
        copy_tensor_to_devices,
        ignorant_find_batch_size,
        pad_input_tensors,
        send_to_device,
    )
    from accel_pipeline import (
        build_pipeline,
        find_pippy_batch_size,
        generate_device_map,
        pippy_forward,
        prepare_pippy,
    )
    from accel_state import (
        PartialState,
        is_pippy_available,
    )
