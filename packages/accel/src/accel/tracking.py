"""``accel.tracking``: the names of the reference's ``accelerate.tracking``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.tracking"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_collectives import (
        listify,
    )
    from accel_state import (
        PartialState,
        compare_versions,
        get_logger,
        is_aim_available,
        is_clearml_available,
        is_comet_ml_available,
        is_dvclive_available,
        is_mlflow_available,
        is_swanlab_available,
        is_tensorboard_available,
        is_trackio_available,
        is_wandb_available,
        str_to_bool,
    )
    from accel_trackers import (
        LOGGER_TYPE_TO_CLASS,
        AimTracker,
        ClearMLTracker,
        CometMLTracker,
        DVCLiveTracker,
        GeneralTracker,
        LoggerType,
        MLflowTracker,
        SwanLabTracker,
        TensorBoardTracker,
        TrackioTracker,
        WandBTracker,
        filter_trackers,
        get_available_trackers,
        register_tracker_class,
    )

    from accel._facade._tracker_decorators import (
        on_main_process,
    )
