"""``accel.utils.rich``: importing it makes rich format uncaught exceptions' tracebacks, like the
reference's ``accelerate.utils.rich``.

Raises:
    ModuleNotFoundError: on import, when rich is not installed, naming the install command.
"""

from __future__ import annotations

from accel_state import is_rich_available

if not is_rich_available():
    raise ModuleNotFoundError(
        "accel.utils.rich formats tracebacks with rich, which is not installed. Install it: "
        "pip install rich",
        name="rich",
    )

from rich.traceback import install

install(show_locals=False)
