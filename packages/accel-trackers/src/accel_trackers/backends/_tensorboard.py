"""TensorBoard adapter: event files written by tensorboardX (torch is not needed)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from typing import Any

from .._tracker_interface import BackendTracker, install_command
from .._values import is_number, normalize, stringify_unsupported, warn_once

__all__ = ["TensorBoardTracker"]


def _summary_api() -> tuple[Any, Any]:
    """(SummaryWriter class, hparams summary function) from tensorboardX, else torch."""
    for writer_mod, summary_mod in (
        ("tensorboardX", "tensorboardX.summary"),
        ("torch.utils.tensorboard", "torch.utils.tensorboard.summary"),
    ):
        try:
            writer = importlib.import_module(writer_mod)
            summary = importlib.import_module(summary_mod)
        except ImportError:
            continue
        return writer.SummaryWriter, summary.hparams
    raise ImportError(
        "The 'tensorboard' tracker needs the Python package 'tensorboardX' (or torch with "
        "tensorboard), and neither is installed in this environment. Install it with: "
        + install_command("tensorboard")
    )


class TensorBoardTracker(BackendTracker):
    """Log to TensorBoard event files in `logging_dir/run_name`.

    Args:
        run_name: Name of the run; also the sub-directory of `logging_dir`.
        logging_dir: Directory that holds the runs.
        **kwargs: Passed to `SummaryWriter`.
    """

    name = "tensorboard"
    requires_logging_directory = True
    _module = "tensorboardX"
    _extra = "tensorboard"

    def __init__(self, run_name: str, logging_dir: str | os.PathLike[str], **kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self.logging_dir = os.path.join(os.fspath(logging_dir), run_name)
        self._kwargs = kwargs

    @classmethod
    def is_available(cls) -> bool:
        """True when tensorboardX, or torch with tensorboard, can be imported."""
        if importlib.util.find_spec("tensorboardX") is not None:
            return True
        return (
            importlib.util.find_spec("torch") is not None
            and importlib.util.find_spec("tensorboard") is not None
        )

    def _open(self) -> Any:
        writer_cls, self._hparams = _summary_api()
        return writer_cls(self.logging_dir, **self._kwargs)

    @property
    def writer(self) -> Any:
        """The `SummaryWriter` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Write the hyper-parameters to the HParams plugin and to `hparams.json`.

        TensorBoard stores int, float, str and bool; None, lists and other values are
        stored as their text with a warning naming them. `hparams.json` in the run
        directory keeps the full configuration.
        """
        if not self._active():
            return
        flat = normalize(values)
        hparams = stringify_unsupported(flat, (bool, int, float, str), tracker=self.name)
        exp, ssi, sei = self._hparams(hparams, {})
        file_writer = self._run._get_file_writer()
        for summary in (exp, ssi, sei):
            file_writer.add_summary(summary)
        os.makedirs(self.logging_dir, exist_ok=True)
        with open(os.path.join(self.logging_dir, "hparams.json"), "w", encoding="utf-8") as fh:
            json.dump(normalize(values, flat=False), fh, indent=2, default=str)
        self._run.flush()

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Numbers become scalars, strings become text; None and other values are skipped."""
        if not self._active():
            return
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value):
                self._run.add_scalar(key, value, global_step=step, **kwargs)
            elif isinstance(value, str):
                self._run.add_text(key, value, global_step=step, **kwargs)
            else:
                skipped.append(key)
        warn_once(self._warned, self.name, skipped, "only numbers and strings can be logged")
        self._run.flush()

    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log batches of images (N x C x H x W by default) with `add_images`."""
        if not self._active():
            return
        for key, images in values.items():
            self._run.add_images(key, images, global_step=step, **kwargs)
        self._run.flush()

    def _close(self) -> None:
        self._run.close()
