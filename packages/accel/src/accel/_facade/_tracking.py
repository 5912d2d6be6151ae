"""Experiment tracking on the Accelerator: a thin bridge to ``accel_trackers``."""

from __future__ import annotations

from typing import Any

from ._fields import AcceleratorCore


class TrackingMixin(AcceleratorCore):
    """``init_trackers``, ``log``, ``get_tracker`` and ``end_training``: one run per job."""

    def init_trackers(
        self,
        project_name: str,
        config: dict[str, Any] | None = None,
        init_kwargs: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Start the trackers named by ``log_with`` (on the main process; no-ops elsewhere).

        Args:
            project_name: Project / run name given to each backend.
            config: Hyper-parameters to store (nested dicts, tensors and None are accepted).
            init_kwargs: Per-tracker keyword arguments, e.g. ``{"wandb": {"mode": "offline"}}``.
        """
        from accel_trackers import init_trackers

        if self._tracker_set is not None:
            self._tracker_set.finish()
        self._tracker_set = init_trackers(
            self.log_with,
            project_name,
            config=config,
            init_kwargs=init_kwargs,
            logging_dir=self.project_configuration.logging_dir,
            is_main_process=self.state.is_main_process,
            process_index=self.state.process_index,
        )
        self.trackers = list(self._tracker_set)

    def log(
        self,
        values: dict[str, Any],
        step: int | None = None,
        log_kwargs: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Log ``values`` (nested dicts, tensors, numpy scalars accepted) to every tracker."""
        if self._tracker_set is not None:
            self._tracker_set.log(values, step=step, log_kwargs=log_kwargs)

    def get_tracker(self, name: str, unwrap: bool = False) -> Any:
        """The tracker called ``name`` (its native object with ``unwrap=True``); on processes
        that do not log, a stand-in whose every call does nothing."""
        if self._tracker_set is None:
            from accel_trackers import NoOpTracker

            tracker = NoOpTracker(name)
            return tracker.tracker if unwrap else tracker
        return self._tracker_set.get(name, unwrap=unwrap)

    def end_training(self) -> None:
        """Finish every tracker, wait for an asynchronous ``save_state`` still writing and free
        the host memory kept for the next one.

        Never raises because a backend already finished; a second call does nothing. Raises
        ``AsyncSaveError`` (after the trackers are finished) if that save failed."""
        try:
            if self._tracker_set is not None:
                self._tracker_set.finish()
        finally:
            self._checkpointer.wait_for_pending_save(release=True)
