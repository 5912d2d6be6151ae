"""Experiment tracking on the Accelerator: a thin bridge to ``accel_trackers``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._accelerator import Accelerator


def init_trackers(
    acc: Accelerator,
    project_name: str,
    config: dict[str, object] | None = None,
    init_kwargs: dict[str, dict[str, object]] | None = None,
) -> None:
    from accel_trackers import init_trackers

    if acc._tracker_set is not None:
        acc._tracker_set.finish()
    acc._tracker_set = init_trackers(
        acc.log_with,
        project_name,
        config=config,
        init_kwargs=init_kwargs,
        logging_dir=acc.project_configuration.logging_dir,
        is_main_process=acc.state.is_main_process,
        process_index=acc.state.process_index,
    )
    acc.trackers = list(acc._tracker_set)


def log(
    acc: Accelerator,
    values: dict[str, object],
    step: int | None = None,
    log_kwargs: dict[str, dict[str, object]] | None = None,
) -> None:
    if acc._tracker_set is not None:
        acc._tracker_set.log(values, step=step, log_kwargs=log_kwargs)


def get_tracker(acc: Accelerator, name: str, unwrap: bool = False) -> Any:
    if acc._tracker_set is None:
        from accel_trackers import NoOpTracker

        tracker = NoOpTracker(name)
        return tracker.tracker if unwrap else tracker
    return acc._tracker_set.get(name, unwrap=unwrap)


def end_training(acc: Accelerator) -> None:
    try:
        if acc._tracker_set is not None:
            acc._tracker_set.finish()
    finally:
        acc._checkpointer.wait_for_pending_save(release=True)
