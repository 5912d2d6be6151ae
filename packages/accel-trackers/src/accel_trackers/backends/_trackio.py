"""Trackio adapter: a local-first tracker that writes one SQLite database per project."""

from __future__ import annotations

from typing import Any

from .._tracker_interface import BackendTracker
from .._values import normalize

__all__ = ["TrackioTracker"]


class TrackioTracker(BackendTracker):
    """Log to a Trackio run.

    Trackio stays on this machine unless told otherwise: with none of `space_id`,
    `server_url`, `dataset_id`, `bucket_id` (nor `TRACKIO_SPACE_ID` / `TRACKIO_SERVER_URL`)
    the run goes to `$TRACKIO_DIR/<project>.db` (default `$HF_HOME/trackio`), and no
    dashboard server starts (this adapter passes `embed=False` unless told otherwise;
    `trackio show` opens the dashboard later).

    Args:
        run_name: The Trackio project name.
        **kwargs: Passed to `trackio.init` (e.g. `name`, `group`, `space_id`).
    """

    name = "trackio"
    requires_logging_directory = False
    _module = "trackio"
    _extra = "trackio"

    def __init__(self, run_name: str, **kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self.init_kwargs = kwargs
        self._pending_config: dict[str, Any] = {}

    def _open(self) -> Any:
        trackio = self._backend()
        kwargs = {"embed": False, **self.init_kwargs}
        if self._pending_config:
            kwargs["config"] = {**(kwargs.get("config") or {}), **self._pending_config}
        return trackio.init(project=self.run_name, **kwargs)

    @property
    def run(self) -> Any:
        """The `trackio.Run` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration in the run's config (nested dicts and None are kept).

        Trackio writes the config with the first logged step, so call this before `log`.
        """
        config = normalize(values, flat=False)
        if not self._started and not self._finished:
            self._pending_config.update(config)
            self.start()
            return
        if not self._active():
            return
        self._run.config.update(config)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numbers, strings and lists; None values are skipped with one warning."""
        if self._active():
            self._log_all_but_none(values, step, **kwargs)

    def _close(self) -> None:
        self._run.finish()
