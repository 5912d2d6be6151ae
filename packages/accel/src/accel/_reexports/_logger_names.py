"""Log records under the reference's logger names while accel answers ``accelerate`` imports.

accel's packages log through loggers named by job (``accel_state.env``,
``accel_bigmodel.modeling``). Code
written for the reference listens to the reference's names instead: it silences
``logging.getLogger("accelerate.utils.modeling")`` or waits for a warning on
``accelerate.utils.environment``. While accel serves the reference's module paths
(``install_as_accelerate()``), `route_to_reference_names` sends each record of the loggers
in `REFERENCE_LOGGER_NAMES` to the reference's logger of the module that logs it there,
instead of accel's, so every handler, level and filter set on the reference's names applies,
and a record still reaches the root logger once.
"""

from __future__ import annotations

import logging
import threading

REFERENCE_LOGGER_NAMES: dict[str, str] = {
    # accel_state
    "accel_state.env": "accelerate.utils.environment",
    "accel_state.env:check_os_kernel": "accelerate.utils.other",
    "accel_state.machine": "accelerate.utils.environment",
    "accel_state.plugins": "accelerate.utils.dataclasses",
    # accel_bigmodel
    "accel_bigmodel.modeling": "accelerate.utils.modeling",
    "accel_bigmodel.big_modeling": "accelerate.big_modeling",
    "accel_bigmodel.offload": "accelerate.utils.offload",
    # accel_precision, accel_trackers, accel_pipeline
    "accel_precision.bnb": "accelerate.utils.bnb",
    "accel_trackers": "accelerate.tracking",
    "accel_pipeline": "accelerate.inference",
    # accel
    "accel.checkpointing": "accelerate.checkpointing",
    "accel._training_checkpoints._model_weights": "accelerate.utils.other",
}
"""accel's logger name -> the logger named after the reference's module that holds the
function logging there (``accelerate.utils.modeling`` for ``load_checkpoint_in_model``). A key ``"<logger>:<function>"`` routes the records of one function of that logger's module
(the reference keeps it in another module); it wins over the key of the logger alone."""

_lock = threading.Lock()


def reference_logger_name(record: logging.LogRecord) -> str | None:
    """The reference's logger name for ``record``, or None when accel's name stays."""
    return REFERENCE_LOGGER_NAMES.get(
        f"{record.name}:{record.funcName}", REFERENCE_LOGGER_NAMES.get(record.name)
    )


class _ToReferenceName(logging.Filter):
    """Hands each record of an accel logger to the reference's logger of that name instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = reference_logger_name(record)
        if name is None:
            return True
        target = logging.getLogger(name)
        if target.isEnabledFor(record.levelno):
            record.name = name
            target.handle(record)
        return False  # accel's logger passes it on no further: it reaches the root once


_ROUTER = _ToReferenceName()


def route_to_reference_names() -> None:
    """Log every record of `REFERENCE_LOGGER_NAMES`'s loggers under the reference's name,
    from now on in this process. Calling it again does nothing."""
    with _lock:
        for key in REFERENCE_LOGGER_NAMES:
            logger = logging.getLogger(key.partition(":")[0])
            if _ROUTER not in logger.filters:
                logger.addFilter(_ROUTER)


def is_routed() -> bool:
    """Whether accel's records go to the reference's logger names in this process."""
    return _ROUTER in logging.getLogger("accel_state.env").filters
