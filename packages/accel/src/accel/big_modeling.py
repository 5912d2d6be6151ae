"""``accel.big_modeling``: the names of the reference's ``accelerate.big_modeling``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.big_modeling"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING,
        AlignDevicesHook,
        CpuOffload,
        LayerwiseCastingHook,
        OffloadedWeightsLoader,
        UserCpuOffloadHook,
        add_hook_to_module,
        attach_align_device_hook,
        attach_align_device_hook_on_blocks,
        attach_layerwise_casting_hooks,
        check_device_map,
        cpu_offload,
        cpu_offload_with_hook,
        disk_offload,
        dispatch_model,
        extract_submodules_state_dict,
        find_tied_parameters,
        get_balanced_memory,
        infer_auto_device_map,
        init_empty_weights,
        init_on_device,
        load_checkpoint_and_dispatch,
        load_checkpoint_in_model,
        offload_state_dict,
        retie_parameters,
    )
    from accel_state import (
        check_cuda_p2p_ib_support,
        is_bnb_available,
        is_mlu_available,
        is_musa_available,
        is_neuron_available,
        is_npu_available,
        is_sdaa_available,
        is_xpu_available,
        parse_flag_from_env,
        recursive_getattr,
    )

    from ._engines._ulysses import (
        _refuse_recurrent_layers_under_sequence_parallelism,
        refuse_recurrent_layers_under_sequence_parallelism,
    )
