"""The environment variables accel-bigmodel reads, declared once.

accel-bigmodel depends on no other accel package, so it declares its own few variables here
rather than in accel-state's launcher-to-process contract, in the same vocabulary: each has a
name, the reference library's names read in order when it is unset, who writes it, what reads
it, and a boolean read from ``1/0, true/false, yes/no, on/off`` (anything else is refused with
the rule, the value and the fix). The docs' table of variables (``tools/gen_env_docs.py``)
lists these beside the contract's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TRUE = ("1", "true", "yes", "y", "on")
_FALSE = ("0", "false", "no", "n", "off")


@dataclass(frozen=True)
class BoolVariable:
    """One boolean environment variable of accel-bigmodel."""

    name: str
    written_by: str
    """Who sets it."""
    read_by: str
    """Which code reads it."""
    description: str
    """What it means (the docs table's text)."""
    fallbacks: tuple[str, ...] = ()
    """The reference library's names, read in order when ``name`` is unset."""

    def vocabulary(self) -> str:
        """The valid values, in words (for errors and the docs table)."""
        return "1/0, true/false, yes/no, on/off"

    def read(self, default: bool = False) -> bool:
        """The variable's value: ``name``, else the first fallback set, else ``default``.

        Raises:
            ValueError: when the value is not one of the vocabulary's words.
        """
        for source in (self.name, *self.fallbacks):
            raw = os.environ.get(source)
            if raw is None or not raw.strip():
                continue
            text = raw.strip().lower()
            if text in _TRUE + _FALSE:
                return text in _TRUE
            raise ValueError(
                f"environment variable {source} must be one of {self.vocabulary()}; got "
                f"{raw!r}. Set it to 1 or 0, or unset it."
            )
        return default


ACCEL_BIGMODEL_QUIET = BoolVariable(
    "ACCEL_BIGMODEL_QUIET",
    written_by="the user",
    read_by="accel-bigmodel's loading progress bars",
    description="Hide accel-bigmodel's loading progress bars.",
)

ACCEL_INIT_INCLUDE_BUFFERS = BoolVariable(
    "ACCEL_INIT_INCLUDE_BUFFERS",
    written_by="the user",
    read_by="``init_empty_weights`` / ``init_on_device`` when ``include_buffers`` is not given",
    description="Also create the buffers of models built under ``init_empty_weights`` on the "
    "meta device (their weights always are).",
    fallbacks=("ACCELERATE_INIT_INCLUDE_BUFFERS",),
)

VARIABLES: dict[str, BoolVariable] = {
    variable.name: variable for variable in (ACCEL_BIGMODEL_QUIET, ACCEL_INIT_INCLUDE_BUFFERS)
}
"""Every variable accel-bigmodel reads, by name."""
