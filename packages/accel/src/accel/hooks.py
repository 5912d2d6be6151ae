"""``accel.hooks``: module hooks for device alignment and offload (from accel-bigmodel)."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.hooks"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        AlignDevicesHook,
        CpuOffload,
        LayerwiseCastingHook,
        ModelHook,
        PrefixedDataset,
        SequentialHook,
        UserCpuOffloadHook,
        add_hook_to_module,
        attach_align_device_hook,
        attach_align_device_hook_on_blocks,
        attach_execution_device_hook,
        get_non_persistent_buffers,
        named_module_tensors,
        remove_hook_from_module,
        remove_hook_from_submodules,
        set_module_tensor_to_device,
    )
    from accel_collectives import (
        find_device,
        send_to_device,
    )
    from accel_state import (
        PartialState,
        clear_device_cache,
        is_mlu_available,
        is_musa_available,
        is_npu_available,
        recursive_getattr,
    )
