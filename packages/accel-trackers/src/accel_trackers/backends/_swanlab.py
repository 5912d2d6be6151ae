"""SwanLab adapter: offline (`mode="offline"`) or local (`mode="local"`) runs write plain files."""

from __future__ import annotations

from typing import Any

from .._tracker_interface import BackendTracker
from .._values import is_number, normalize, warn_once

__all__ = ["SwanLabTracker"]


class SwanLabTracker(BackendTracker):
    """Log to a SwanLab run.

    With `mode="offline"` (or `SWANLAB_MODE=offline`) the run is written to a local folder
    that `swanlab sync` can upload later; with `mode="local"` it stays on this machine.
    Without a mode, SwanLab's own default applies (which may ask to log in).

    Args:
        run_name: The SwanLab project name.
        **kwargs: Passed to `swanlab.init` (e.g. `mode="offline"`, `log_dir`, `name`). A
            `logging_dir` keyword (given by `init_trackers` from the Accelerator's project
            directory) becomes `log_dir` unless `log_dir` is given.
    """

    name = "swanlab"
    requires_logging_directory = False
    takes_logging_dir = True
    _module = "swanlab"
    _extra = "swanlab"

    def __init__(self, run_name: str, **kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self.logging_dir = self._keep_options(kwargs)

    def _open(self) -> Any:
        swanlab = self._backend()
        return swanlab.init(project=self.run_name, **self._options_with_dir("log_dir"))

    @property
    def run(self) -> Any:
        """The `swanlab.Run` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration in the run's config (nested dicts and None are kept)."""
        if not self._active():
            return
        self._run.config.update(normalize(values, flat=False))

    def _media(self, value: Any) -> bool:
        """Whether `value` is (a list of) SwanLab media objects, which are logged as they are."""
        items = value if isinstance(value, (list, tuple)) and value else [value]
        return all(type(item).__module__.startswith("swanlab.") for item in items)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numbers, text (as `swanlab.Text`) and SwanLab media objects.

        None and values of other types are skipped with one warning per key.
        """
        if not self._active():
            return
        swanlab = self._backend()
        data: dict[str, Any] = {}
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value) or self._media(value):
                data[key] = value
            elif isinstance(value, str):
                data[key] = swanlab.Text(value)
            else:
                skipped.append(key)
        warn_once(
            self._warned,
            self.name,
            skipped,
            "SwanLab logs numbers, text and swanlab media objects (swanlab.Image ...)",
        )
        if data:
            self._run.log(data, step=step, **kwargs)

    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log lists of images (arrays, PIL images, tensors) as `swanlab.Image` objects."""
        if not self._active():
            return
        swanlab = self._backend()
        images = {key: [swanlab.Image(image) for image in value] for key, value in values.items()}
        self._run.log(images, step=step, **kwargs)

    def _close(self) -> None:
        self._run.finish()
