"""Aim adapter: a local Aim repository in the logging directory."""

from __future__ import annotations

import os
from typing import Any

from .._tracker_interface import BackendTracker
from .._values import is_number, normalize, warn_once

__all__ = ["AimTracker"]

_AIM_PARAM_TYPES = (bool, int, float, str)


def _aim_safe(value: Any, key: str, converted: list[str]) -> Any:
    """Aim stores bool/int/float/str and lists/dicts of them; anything else becomes text."""
    if isinstance(value, dict):
        return {k: _aim_safe(v, f"{key}/{k}", converted) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_aim_safe(v, key, converted) for v in value]
    if isinstance(value, _AIM_PARAM_TYPES):
        return value
    converted.append(key)
    return str(value)


class AimTracker(BackendTracker):
    """Log to an Aim run stored in the repository at `logging_dir`.

    Args:
        run_name: The run's name (and its experiment unless `experiment` is given).
        logging_dir: Directory of the Aim repository (created if missing).
        **kwargs: Passed to `aim.Run`; `repo` is another name for `logging_dir`.
    """

    name = "aim"
    requires_logging_directory = True
    _module = "aim"
    _extra = "aim"

    def __init__(
        self, run_name: str, logging_dir: str | os.PathLike[str] = ".", **kwargs: Any
    ) -> None:
        super().__init__()
        self.run_name = run_name
        repo = kwargs.pop("repo", None)
        if repo is not None and os.fspath(logging_dir) not in (".", os.fspath(repo)):
            raise ValueError(
                "AimTracker takes the repository directory once: got logging_dir="
                f"{os.fspath(logging_dir)!r} and repo={os.fspath(repo)!r}. Pass only one of them."
            )
        self.logging_dir = os.fspath(repo if repo is not None else logging_dir)
        self._kwargs = kwargs

    def _open(self) -> Any:
        aim = self._backend()
        os.makedirs(self.logging_dir, exist_ok=True)
        kwargs = dict(self._kwargs)
        kwargs.setdefault("experiment", self.run_name)
        run = aim.Run(repo=self.logging_dir, **kwargs)
        run.name = self.run_name
        return run

    @property
    def writer(self) -> Any:
        """The `aim.Run` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration under the run's "hparams" key.

        Aim drops a whole dict that holds None, so None and other values Aim cannot
        store are written as text, with a warning naming them.
        """
        if not self._active():
            return
        converted: list[str] = []
        hparams = {k: _aim_safe(v, k, converted) for k, v in normalize(values, flat=False).items()}
        if converted:
            from .._tracker_interface import logger

            logger.warning(
                "aim cannot store these hyper-parameter values natively; stored as text: %s",
                ", ".join(converted),
            )
        self._run["hparams"] = hparams

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Track numbers as metrics and strings as `aim.Text`; None is skipped."""
        if not self._active():
            return
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value):
                self._run.track(value, name=key, step=step, **kwargs)
            elif isinstance(value, str):
                self._run.track(self._backend().Text(value), name=key, step=step, **kwargs)
            else:
                skipped.append(key)
        warn_once(self._warned, self.name, skipped, "only numbers and strings can be logged")

    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Track lists of images (arrays, PIL images ...) as `aim.Image` objects."""
        if not self._active():
            return
        aim = self._backend()
        for key, images in values.items():
            self._run.track([aim.Image(image) for image in images], name=key, step=step, **kwargs)

    def _close(self) -> None:
        self._run.close()
