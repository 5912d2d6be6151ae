"""The reference's config file classes ``BaseConfig`` and ``ClusterConfig``, on accel's
[`LaunchConfig`][accel_launch.LaunchConfig]."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accel_state import ComputeEnvironment, DistributedType, PrecisionType

from .._compat_flags import REFUSED
from .._errors import ConfigError
from ._config_file import LaunchConfig


@dataclass
class BaseConfig:
    """The settings every config file holds, whatever the machines (the fields the reference's
    local and SageMaker configs share)."""

    compute_environment: str = ComputeEnvironment.LOCAL_MACHINE.value
    """Where the processes run: ``LOCAL_MACHINE`` or ``AMAZON_SAGEMAKER``."""
    distributed_type: str = DistributedType.NO.value
    """How the processes cooperate (``NO``, ``MULTI_GPU``, ``FSDP`` ...)."""
    mixed_precision: str = PrecisionType.NO.value
    """``no``, ``fp16``, ``bf16`` or ``fp8``."""
    use_cpu: bool = False
    """Run on the CPU even when accelerators are present."""
    debug: bool = False
    """Check that collectives get the same shapes on every process."""

    def validate(self) -> BaseConfig:
        """Check each value against its vocabulary; raise ``ConfigError`` naming the field, the
        value and the fix. Returns ``self``."""
        for name, kind in (
            ("compute_environment", ComputeEnvironment),
            ("distributed_type", DistributedType),
            ("mixed_precision", PrecisionType),
        ):
            value = str(getattr(self, name))
            allowed = [member.value for member in kind]
            if value not in allowed:
                raise ConfigError(
                    f"{name} must be one of {allowed}; got {value!r}. Use one of those values."
                )
        return self

    def to_dict(self) -> dict[str, Any]:
        """The settings as the file's keys and values."""
        return dataclasses.asdict(self)


@dataclass
class ClusterConfig(LaunchConfig):
    """The settings of a launch on local machines: accel's
    [`LaunchConfig`][accel_launch.LaunchConfig] with the reference's ``enable_cpu_affinity``
    field, which must stay ``False`` (pinning processes to NUMA nodes is not implemented)."""

    enable_cpu_affinity: bool = False
    """Pin each process to the CPUs of its GPU's NUMA node: refused when ``True``."""

    def validate(self) -> ClusterConfig:
        """Check every value (see [`LaunchConfig.validate`][accel_launch.LaunchConfig.validate]);
        ``enable_cpu_affinity=True`` is refused with the reason."""
        if self.enable_cpu_affinity:
            raise ConfigError(
                "enable_cpu_affinity must be False: " + REFUSED["enable_cpu_affinity"]
            )
        super().validate()
        return self


__all__ = ["BaseConfig", "ClusterConfig"]
