"""``accel.memory_utils``: the reference's deprecated ``accelerate.memory_utils`` path.

It defines no names; importing it warns (``FutureWarning``) where the batch-size finder lives
now, as the reference does.
"""

from __future__ import annotations

import warnings

warnings.warn(
    "accel.memory_utils (accelerate.memory_utils) is deprecated and defines nothing: its "
    "contents moved to accel.utils.memory. Import the batch-size finder with `from accel import "
    "find_executable_batch_size` (or `from accelerate import find_executable_batch_size`).",
    FutureWarning,
    stacklevel=2,
)
