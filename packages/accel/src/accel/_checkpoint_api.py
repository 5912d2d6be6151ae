"""The reference's functional checkpoint API (``accel.checkpointing``) over accel's own
``save_state`` / ``load_state`` files."""

from __future__ import annotations

SAMPLER_NAME = "sampler"
"""The reference's file stem for a data loader's sampler state (``sampler.bin``). accel's
``save_state`` writes each prepared loader's full state (sampler included) to
``dataloader[_i].bin`` instead."""
