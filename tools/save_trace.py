"""Follow one ``save_state`` through accel's modules and count how often the path turns back.

Runs a real ``Accelerator.save_state`` of two models and two optimizers on the CPU, in this
process, under ``sys.setprofile``. Each call that enters a module of accel (a file under
``packages/*/src``) from another module of accel is one step of the path; consecutive steps
into the same module are one step. The counts:

- places: the modules the path enters;
- folders: the folders those modules lie in;
- returns: the steps into a module the path had already entered and left. Coming back to a
  caller when a call ends is no step (only entries by calls count), so a module that calls
  two helpers of the same module in a row reads as one visit;
- new_returns: the returns taken by a call from one module to another not made before (a
  loop over the files repeats its calls: its second turn adds none).

A reader following the save from ``save_state`` down meets these places in this order; each
return is a jump back to a page already read. A first ``save_state`` runs untraced, so that
the modules it imports on first use do not count.

    python tools/save_trace.py           # print the counts and the path
    python tools/save_trace.py --json    # print the counts as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = str(ROOT / "packages")


@dataclass
class Trace:
    """The path of one traced call through accel's modules."""

    path: list[str] = field(default_factory=list)
    """The modules entered, in order, consecutive repeats collapsed (paths from the repo)."""
    steps: list[tuple[str, str]] = field(default_factory=list)
    """``(caller module, module entered)`` of each step of `path`."""

    @property
    def places(self) -> int:
        return len(set(self.path))

    @property
    def folders(self) -> int:
        return len({os.path.dirname(module) for module in self.path})

    @property
    def returns(self) -> list[str]:
        """The steps into a module entered before, in order."""
        seen: set[str] = set()
        back = []
        for module in self.path:
            if module in seen:
                back.append(module)
            seen.add(module)
        return back

    @property
    def new_returns(self) -> int:
        """The returns taken by a step not taken before (a loop that repeats the same calls
        counts once): the jumps back of a reader who follows each call once."""
        seen: set[str] = set()
        taken: set[tuple[str, str]] = set()
        count = 0
        for module, step in zip(self.path, self.steps, strict=True):
            if module in seen and step not in taken:
                count += 1
            seen.add(module)
            taken.add(step)
        return count

    def counts(self) -> dict[str, int]:
        return {
            "places": self.places,
            "folders": self.folders,
            "returns": len(self.returns),
            "new_returns": self.new_returns,
        }


def _module_of(filename: str) -> str | None:
    """The repository path of an accel source file, or None for any other file."""
    if not filename.startswith(SOURCES) or f"{os.sep}src{os.sep}" not in filename:
        return None
    return os.path.relpath(filename, ROOT)


def _caller_module(frame: FrameType | None) -> str | None:
    """The accel module of the nearest accel frame up the stack."""
    while frame is not None:
        module = _module_of(frame.f_code.co_filename)
        if module is not None:
            return module
        frame = frame.f_back
    return None


def trace(call: Any) -> Trace:
    """Run ``call()`` under the profiler and return the path it took through accel."""
    result = Trace()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = _module_of(frame.f_code.co_filename)
        caller = _caller_module(frame.f_back)
        if module is None or module == caller:
            return
        if not result.path or result.path[-1] != module:
            result.path.append(module)
            result.steps.append((caller or "", module))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return result


def trace_save_state() -> Trace:
    """The path of a ``save_state`` of two models and two optimizers, on one CPU process."""
    import torch
    from accel import Accelerator

    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    models = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    prepared = accelerator.prepare(*models, *optimizers)
    del prepared
    with tempfile.TemporaryDirectory() as folder:
        accelerator.save_state(os.path.join(folder, "warm"))  # first-use imports, untraced
        return trace(lambda: accelerator.save_state(os.path.join(folder, "traced")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    result = trace_save_state()
    if args.json:
        print(json.dumps({**result.counts(), **asdict(result)}))
        return 0
    for module in result.path:
        print(module)
    counts = result.counts()
    print(", ".join(f"{name} {value}" for name, value in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
