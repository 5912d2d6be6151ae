"""Smoke run of accel-trackers installed alone, with no extra and no torch: a tracker of the
user's own (a ``GeneralTracker`` subclass) logs a run, and an uninstalled backend is refused
with the command that installs it.

Run: ``python tools/smoke/accel-trackers.py DIR`` (prints ``ok: accel-trackers`` on success).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from accel_trackers import GeneralTracker, filter_trackers, init_trackers, register_tracker


class JsonLinesTracker(GeneralTracker):
    """Writes the configuration and every logged step as JSON lines."""

    name = "jsonl"
    requires_logging_directory = True

    def __init__(self, run_name: str, logging_dir: str) -> None:
        super().__init__()
        self.path = Path(logging_dir) / f"{run_name}.jsonl"

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = self.path.open("w")

    @property
    def tracker(self) -> Any:
        return self.handle

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        self.handle.write(json.dumps({"config": values}) + "\n")

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        self.handle.write(json.dumps({"step": step, **values}) + "\n")

    def finish(self) -> None:
        if not self.handle.closed:
            self.handle.close()


def main(folder: str) -> None:
    register_tracker("jsonl", JsonLinesTracker)
    trackers = init_trackers(
        "jsonl", "smoke", config={"lr": 0.1, "optim": {"name": "sgd"}}, logging_dir=folder
    )
    trackers.log({"loss": 0.5, "eval": {"acc": 0.75}}, step=1)
    trackers.finish()
    trackers.finish()  # a second call does nothing
    lines = [json.loads(line) for line in (Path(folder) / "smoke.jsonl").read_text().splitlines()]
    assert lines[0]["config"]["lr"] == 0.1, lines
    assert lines[1]["step"] == 1 and lines[1]["loss"] == 0.5, lines
    assert "torch" not in sys.modules, "accel-trackers must not import torch"
    try:
        filter_trackers("wandb")
    except ImportError as err:
        assert 'pip install "accel-trackers[wandb]"' in str(err), str(err)
    else:
        import importlib.util

        assert importlib.util.find_spec("wandb") is not None, "an absent backend was accepted"
    print("ok: accel-trackers")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
