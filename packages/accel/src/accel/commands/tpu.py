"""``accel.commands.tpu``: the reference's ``tpu_command_parser`` and ``tpu_command_launcher``,
which run ``accel tpu-config`` (gcloud on every worker of a TPU pod)."""

from __future__ import annotations

from accel_launch import tpu_command_launcher, tpu_command_parser

__all__ = ["tpu_command_launcher", "tpu_command_parser"]
