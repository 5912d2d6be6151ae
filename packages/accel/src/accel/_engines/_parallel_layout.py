"""Which sharded layout a run uses: the ``Accelerator``'s FSDP, tensor-parallel and
``ParallelismConfig`` arguments checked and filled from the launcher's environment, and whether
the result makes the run an FSDP run."""

from __future__ import annotations

from typing import Any

from accel_state import (
    FullyShardedDataParallelPlugin,
    ParallelismConfig,
    TorchTensorParallelPlugin,
)
from accel_state import environment_variables as env


def resolve_parallel_plugins(
    fsdp_plugin: Any,
    torch_tp_plugin: Any,
    parallelism_config: Any,
    deepspeed_given: bool,
) -> tuple[FullyShardedDataParallelPlugin | None, ParallelismConfig | None]:
    """Check the FSDP / tensor-parallel arguments of ``Accelerator`` and fill them from the
    launcher's environment (``ACCEL_USE_FSDP=1`` builds a plugin from ``ACCEL_FSDP_*``,
    ``ACCEL_USE_PARALLELISM_CONFIG=1`` a layout from ``ACCEL_PARALLELISM_CONFIG_*``).

    Returns:
        The FSDP plugin (or None) and the parallelism layout (or None; a tensor-parallel
        plugin alone becomes a layout of its ``tp_size``).

    Raises:
        ValueError: for FSDP together with DeepSpeed, or for arguments of the wrong type.
    """
    use_fsdp = fsdp_plugin is not None or env.read_env(env.ACCEL_USE_FSDP, False)
    if use_fsdp and deepspeed_given:
        raise ValueError(
            "FSDP and DeepSpeed both shard the model and cannot be combined; got an FSDP "
            "plugin (or ACCEL_USE_FSDP=1) and a DeepSpeed plugin (or ACCEL_USE_DEEPSPEED=1). "
            "Pass only one of fsdp_plugin / deepspeed_plugin."
        )
    for value, cls, name in (
        (fsdp_plugin, FullyShardedDataParallelPlugin, "fsdp_plugin"),
        (torch_tp_plugin, TorchTensorParallelPlugin, "torch_tp_plugin"),
        (parallelism_config, ParallelismConfig, "parallelism_config"),
    ):
        if value is not None and not isinstance(value, cls):
            raise TypeError(
                f"{name} must be a {cls.__name__}; got {type(value).__name__}. Build one with "
                f"accel.utils.{cls.__name__}(...)."
            )
    if use_fsdp and fsdp_plugin is None:
        fsdp_plugin = FullyShardedDataParallelPlugin()
    if parallelism_config is None and env.read_env(env.ACCEL_USE_PARALLELISM_CONFIG, False):
        parallelism_config = ParallelismConfig()  # sizes from ACCEL_PARALLELISM_CONFIG_*
    if torch_tp_plugin is not None:
        if parallelism_config is None:
            parallelism_config = ParallelismConfig(
                tp_size=torch_tp_plugin.tp_size, tp_handler=torch_tp_plugin
            )
        elif parallelism_config.tp_size != torch_tp_plugin.tp_size:
            raise ValueError(
                f"torch_tp_plugin.tp_size ({torch_tp_plugin.tp_size}) and "
                f"parallelism_config.tp_size ({parallelism_config.tp_size}) differ. Set the "
                "size in one place."
            )
        else:
            parallelism_config.tp_handler = torch_tp_plugin
    if parallelism_config is not None:
        parallelism_config.check_engine(deepspeed=deepspeed_given)
    return fsdp_plugin, parallelism_config


def shards_data(
    fsdp_plugin: FullyShardedDataParallelPlugin | None,
    parallelism_config: ParallelismConfig | None,
    num_processes: int,
) -> bool:
    """Whether the run is an FSDP run: an FSDP plugin, or a layout with data-parallel
    dimensions, on more than one process (one process trains plainly).

    Raises:
        ValueError: when the layout does not fit ``num_processes``.
    """
    if parallelism_config is not None:
        parallelism_config.validate(num_processes)
    if num_processes < 2:
        return False
    return fsdp_plugin is not None or bool(
        parallelism_config is not None
        and (parallelism_config.dp_dim_names or parallelism_config.cp_enabled)
    )
