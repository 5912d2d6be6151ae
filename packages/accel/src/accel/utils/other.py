"""``accel.utils.other``: the names of the reference's ``accelerate.utils.other``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.other"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        clean_state_dict_for_safetensors,
        convert_bytes,
        id_tensor_storage,
    )
    from accel_launch import (
        write_basic_config,
    )
    from accel_state import (
        FSDP_PYTORCH_VERSION,
        DistributedType,
        PartialState,
        check_os_kernel,
        get_free_port,
        get_logger,
        get_pretty_name,
        is_deepspeed_available,
        is_numpy_available,
        is_port_in_use,
        is_torch_distributed_available,
        is_torch_version,
        is_torch_xla_available,
        is_weights_only_available,
        merge_dicts,
        recursive_getattr,
        wait_for_everyone,
    )

    from accel._checkpoint._model_weights import (
        save,
    )
    from accel._checkpoint._torch_load import TORCH_SAFE_GLOBALS, load
    from accel._engines._deepspeed_helpers import (
        compile_regions_deepspeed,
    )
    from accel._facade._model_probes import (
        get_model_tp_size,
        has_compiled_regions,
        has_repeated_blocks,
        is_repeated_blocks,
        model_has_dtensor,
    )
    from accel._facade._prepare import (
        compile_regions,
    )
    from accel._facade._unwrap import (
        extract_model_from_parallel,
        is_compiled_module,
    )
