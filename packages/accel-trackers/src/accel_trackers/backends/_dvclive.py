"""DVCLive adapter: metrics and params as plain files in a local directory."""

from __future__ import annotations

from typing import Any

from .._tracker_interface import BackendTracker
from .._values import is_number, normalize, warn_once

__all__ = ["DVCLiveTracker"]


class DVCLiveTracker(BackendTracker):
    """Log with DVCLive.

    Args:
        run_name: Accepted for a uniform signature; DVCLive names runs itself.
        live: An existing `dvclive.Live` to log into instead of creating one.
        **kwargs: Passed to `dvclive.Live`. A `logging_dir` keyword is the output
            directory (DVCLive's `dir`) unless `dir` is given.
    """

    name = "dvclive"
    requires_logging_directory = False
    takes_logging_dir = True
    _module = "dvclive"
    _extra = "dvclive"

    def __init__(self, run_name: str | None = None, live: Any = None, **kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self._live = live
        self.logging_dir = self._keep_options(kwargs)

    def _open(self) -> Any:
        if self._live is not None:
            return self._live
        dvclive = self._backend()
        return dvclive.Live(**self._options_with_dir("dir"))

    @property
    def live(self) -> Any:
        """The `dvclive.Live` object (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Write the configuration to DVCLive's params file (nesting is kept)."""
        if not self._active():
            return
        self._run.log_params(normalize(values, flat=False))

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numbers and strings as metrics of `step`, then advance DVCLive to the next step.

        None and values of other types are skipped with one warning per key.
        """
        if not self._active():
            return
        if step is not None:
            self._run.step = step
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value) or isinstance(value, str):
                self._run.log_metric(key, value, **kwargs)
            else:
                skipped.append(key)
        warn_once(self._warned, self.name, skipped, "DVCLive metrics are numbers or strings")
        self._run.next_step()

    def _close(self) -> None:
        self._run.end()
