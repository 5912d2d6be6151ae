"""Which engine and sharded layout a run uses: the ``Accelerator``'s DeepSpeed, Megatron-LM,
FSDP, tensor-parallel and ``ParallelismConfig`` arguments checked and filled from the launcher's
environment, and whether the result makes the run a DeepSpeed, Megatron-LM or FSDP run. Kept
apart from the engines so that building an ``Accelerator`` imports only the engine it runs."""

from __future__ import annotations

from typing import Any

from accel_state import (
    DeepSpeedPlugin,
    FullyShardedDataParallelPlugin,
    MegatronLMPlugin,
    ParallelismConfig,
    TorchTensorParallelPlugin,
    unsupported_distributed_type,
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


def resolve_deepspeed_plugins(plugin: Any, plugins: Any) -> dict[str, Any] | None:
    """The named DeepSpeed plugins of the run (None without DeepSpeed)."""
    if plugin is not None and plugins is not None:
        raise ValueError(
            "pass deepspeed_plugin or deepspeed_plugins, not both; got both. Put every plugin "
            "in deepspeed_plugins={name: DeepSpeedPlugin(...)}."
        )
    given = plugins if plugins is not None else plugin
    if given is None and env.read_env(env.ACCEL_USE_DEEPSPEED, False):
        given = DeepSpeedPlugin()
    if given is None:
        return None
    named = dict(given) if isinstance(given, dict) else {"default": given}
    for name, value in named.items():
        if not isinstance(value, DeepSpeedPlugin):
            raise TypeError(
                f"deepspeed plugins must be DeepSpeedPlugin instances; got {name!r}: "
                f"{type(value).__name__}. Wrap the config: DeepSpeedPlugin(hf_ds_config=...)."
            )
    return named


def resolve_megatron_plugin(plugin: Any, other_engine: bool) -> MegatronLMPlugin | None:
    """The Megatron-LM plugin of the run: the argument, else one built from the launcher's
    ``ACCEL_MEGATRON_LM_*`` variables under ``ACCEL_USE_MEGATRON_LM=1``, else None.

    Raises:
        NotImplementedError: when megatron-core is not installed (the launcher's words).
        ValueError: together with a DeepSpeed or FSDP plugin.
        TypeError: for an argument that is not a ``MegatronLMPlugin``.
    """
    if plugin is not None:
        asked = "megatron_lm_plugin set"
    elif env.read_env(env.ACCEL_USE_MEGATRON_LM, False):
        asked = f"{env.ACCEL_USE_MEGATRON_LM}=1 in the environment"
    else:
        return None
    if plugin is not None and not isinstance(plugin, MegatronLMPlugin):
        raise TypeError(
            f"megatron_lm_plugin must be a MegatronLMPlugin; got {type(plugin).__name__}. Build "
            "one with accel.utils.MegatronLMPlugin(...)."
        )
    message = unsupported_distributed_type("MEGATRON_LM", asked)
    if message is not None:
        raise NotImplementedError(message)
    if other_engine:
        raise ValueError(
            "Megatron-LM, DeepSpeed and FSDP each own the model and cannot be combined; got a "
            f"Megatron-LM plugin ({asked}) and a DeepSpeed or FSDP plugin. Pass only one."
        )
    return plugin if plugin is not None else MegatronLMPlugin()


def megatron_runs_distributed(plugin: MegatronLMPlugin | None, num_processes: int) -> bool:
    """Whether the run is a Megatron-LM run (a plugin, on more than one process); one process
    trains plainly, which only its degrees of 1 allow.

    Raises:
        ValueError: for a tensor-parallel degree larger than the number of processes.
    """
    if plugin is None:
        return False
    if int(plugin.tp_degree or 1) > num_processes:
        raise ValueError(
            f"tp_degree={plugin.tp_degree} splits each layer over more processes than the run "
            f"has ({num_processes}). Launch at least {plugin.tp_degree} processes or lower "
            "tp_degree."
        )
    return num_processes > 1
