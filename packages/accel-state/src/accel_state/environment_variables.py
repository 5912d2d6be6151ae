"""The launcher-to-process contract: every ``ACCEL_*`` environment variable, declared once.

``accel launch`` writes these variables into every process it starts; ``PartialState``,
``AcceleratorState``, the plugins and the ``Accelerator`` read them through `read_env`.
Each constant is the variable's name (a ``str``, usable as ``os.environ[ACCEL_USE_CPU]``) and
carries its type (``kind``), its vocabulary (``choices``), the reference library's names read
when it is unset (``fallbacks``: ``ACCELERATE_*``, ``FSDP_*`` ...; the ``ACCEL_*`` name wins
when both are set), who writes it (``written_by``) and who reads it (``read_by``). The table of
``docs/launch.md`` is generated from this module by ``tools/gen_env_docs.py``.

``PartialState()`` (and so ``Accelerator()``) reads every declared variable when the state is
created (`check_environment`), so a value outside its vocabulary fails at once on every
process, naming the variable, the value, the rule and the fix.

Vocabularies (``SHARDING_STRATEGIES``, ``WRAP_POLICIES``, ``OFFLOAD_DEVICES``, ``ZERO_STAGES``
...) are defined here once; the launcher and the plugins import them.

Example:
    >>> from accel_state.environment_variables import ACCEL_MIXED_PRECISION, read_env
    >>> read_env(ACCEL_MIXED_PRECISION, "no")
    'no'

This module imports nothing heavier than the standard library.
"""

from __future__ import annotations

from typing import Final

from ._env._contract import (
    BACKWARD_PREFETCH,
    DISTRIBUTED_TYPES,
    DYNAMO_BACKENDS,
    FSDP_VERSIONS,
    MIXED_PRECISIONS,
    MPI_FLAVOURS,
    OFFLOAD_DEVICES,
    SHARDING_STRATEGIES,
    STATE_DICT_TYPES,
    WRAP_POLICIES,
    ZERO_STAGES,
    BackwardPrefetch,
    EnvironmentVariable,
    FSDPVersion,
    Kind,
    MpiFlavour,
    OffloadDevice,
    ShardingStrategy,
    StateDictType,
    WrapPolicy,
    ZeroStage,
    check_environment,
    declared,
    env_text,
    is_set,
    read_env,
)

ACCEL_MIXED_PRECISION: Final = EnvironmentVariable(
    "ACCEL_MIXED_PRECISION",
    "choice",
    choices=MIXED_PRECISIONS,
    fallbacks=("ACCELERATE_MIXED_PRECISION",),
    written_by="``accel launch`` ``--mixed_precision``",
    read_by="``AcceleratorState`` (when ``mixed_precision`` is not passed)",
)
"""Mixed precision of the run: a ``PrecisionType`` value."""

ACCEL_USE_CPU: Final = EnvironmentVariable(
    "ACCEL_USE_CPU",
    "bool",
    fallbacks=("ACCELERATE_USE_CPU",),
    written_by="``accel launch`` ``--cpu`` (always written, 1 or 0)",
    read_by="``PartialState``",
)
"""Run on the CPU even when an accelerator is present."""

ACCEL_TORCH_DEVICE: Final = EnvironmentVariable(
    "ACCEL_TORCH_DEVICE",
    "text",
    fallbacks=("ACCELERATE_TORCH_DEVICE",),
    written_by="the user",
    read_by="``PartialState`` (when the state is created)",
)
"""The device of this process (``cuda:1``, ``cpu``), in place of the one the state would pick:
any string ``torch.device`` accepts."""

ACCEL_DEBUG_MODE: Final = EnvironmentVariable(
    "ACCEL_DEBUG_MODE",
    "bool",
    fallbacks=("ACCELERATE_DEBUG_MODE",),
    written_by="``accel launch`` ``--debug`` (always written, 1 or 0)",
    read_by="``is_debug_mode`` (``PartialState``, accel-collectives)",
)
"""Check, before each collective, that every process passes matching shapes."""

ACCEL_FORK_LAUNCHED: Final = EnvironmentVariable(
    "ACCEL_FORK_LAUNCHED",
    "bool",
    fallbacks=("FORK_LAUNCHED",),
    written_by="``notebook_launcher`` (1 when it forks its processes, 0 when it spawns them)",
    read_by="``PartialState.fork_launched``",
)
"""The processes were forked from one parent instead of started fresh."""

ACCEL_DISTRIBUTED_TYPE: Final = EnvironmentVariable(
    "ACCEL_DISTRIBUTED_TYPE",
    "choice",
    choices=DISTRIBUTED_TYPES,
    written_by="``accel launch`` (always written)",
    read_by="``Accelerator`` (refuses a type this version cannot run)",
)
"""The distributed type the launcher resolved: a ``DistributedType`` value."""

ACCEL_USE_DEEPSPEED: Final = EnvironmentVariable(
    "ACCEL_USE_DEEPSPEED",
    "bool",
    fallbacks=("ACCELERATE_USE_DEEPSPEED",),
    written_by="``accel launch`` ``--use_deepspeed``",
    read_by="``Accelerator``",
)
"""Train with DeepSpeed: the Accelerator builds a ``DeepSpeedPlugin`` from the ``ACCEL_DEEPSPEED_*`` variables."""

ACCEL_USE_FSDP: Final = EnvironmentVariable(
    "ACCEL_USE_FSDP",
    "bool",
    fallbacks=("ACCELERATE_USE_FSDP",),
    written_by="``accel launch`` ``--use_fsdp``",
    read_by="``Accelerator``",
)
"""Train with FSDP: the Accelerator builds a ``FullyShardedDataParallelPlugin`` from the ``ACCEL_FSDP_*`` variables."""

ACCEL_USE_MEGATRON_LM: Final = EnvironmentVariable(
    "ACCEL_USE_MEGATRON_LM",
    "bool",
    fallbacks=("ACCELERATE_USE_MEGATRON_LM",),
    written_by="``accel launch`` ``--use_megatron_lm``",
    read_by="``Accelerator``",
)
"""Train with Megatron-LM: the Accelerator builds a ``MegatronLMPlugin`` from the ``ACCEL_MEGATRON_LM_*`` variables."""

ACCEL_GRADIENT_ACCUMULATION_STEPS: Final = EnvironmentVariable(
    "ACCEL_GRADIENT_ACCUMULATION_STEPS",
    "int",
    fallbacks=("ACCELERATE_GRADIENT_ACCUMULATION_STEPS",),
    minimum=1,
    written_by="``accel launch`` ``--gradient_accumulation_steps``",
    read_by="``Accelerator`` (overrides its argument), ``DeepSpeedPlugin``",
)
"""Batches accumulated before each optimizer step."""

ACCEL_GRADIENT_CLIPPING: Final = EnvironmentVariable(
    "ACCEL_GRADIENT_CLIPPING",
    "float",
    fallbacks=("ACCELERATE_GRADIENT_CLIPPING",),
    minimum=0,
    written_by="``accel launch`` ``--gradient_clipping``",
    read_by="``DeepSpeedPlugin``",
)
"""Largest gradient norm kept inside DeepSpeed's step (0 turns clipping off)."""

ACCEL_DYNAMO_BACKEND: Final = EnvironmentVariable(
    "ACCEL_DYNAMO_BACKEND",
    "choice",
    choices=DYNAMO_BACKENDS,
    fallbacks=("ACCELERATE_DYNAMO_BACKEND",),
    written_by="``accel launch`` ``--dynamo_backend``",
    read_by="``TorchDynamoPlugin``",
)
"""``torch.compile`` backend (``NO`` turns compilation off): a ``DynamoBackend`` value."""

ACCEL_DYNAMO_MODE: Final = EnvironmentVariable(
    "ACCEL_DYNAMO_MODE",
    "text",
    fallbacks=("ACCELERATE_DYNAMO_MODE",),
    written_by="``accel launch`` ``--dynamo_mode``",
    read_by="``TorchDynamoPlugin``",
)
"""``torch.compile`` mode (``default``, ``reduce-overhead``, ``max-autotune`` ...)."""

ACCEL_DYNAMO_USE_FULLGRAPH: Final = EnvironmentVariable(
    "ACCEL_DYNAMO_USE_FULLGRAPH",
    "bool",
    fallbacks=("ACCELERATE_DYNAMO_USE_FULLGRAPH",),
    written_by="``accel launch`` ``--dynamo_use_fullgraph``",
    read_by="``TorchDynamoPlugin``",
)
"""Refuse graph breaks when compiling."""

ACCEL_DYNAMO_USE_DYNAMIC: Final = EnvironmentVariable(
    "ACCEL_DYNAMO_USE_DYNAMIC",
    "bool",
    fallbacks=("ACCELERATE_DYNAMO_USE_DYNAMIC",),
    written_by="``accel launch`` ``--dynamo_use_dynamic``",
    read_by="``TorchDynamoPlugin``",
)
"""Compile with dynamic shapes (unset: torch decides)."""

ACCEL_DYNAMO_USE_REGIONAL_COMPILATION: Final = EnvironmentVariable(
    "ACCEL_DYNAMO_USE_REGIONAL_COMPILATION",
    "bool",
    fallbacks=("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION",),
    written_by="``accel launch`` ``--dynamo_use_regional_compilation``",
    read_by="``TorchDynamoPlugin``",
)
"""Compile each repeated block once instead of the whole model."""

ACCEL_DEEPSPEED_CONFIG_FILE: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_CONFIG_FILE",
    "text",
    fallbacks=("ACCELERATE_DEEPSPEED_CONFIG_FILE",),
    written_by="``accel launch`` ``--deepspeed_config_file``",
    read_by="``DeepSpeedPlugin``",
)
"""Path of a DeepSpeed JSON config whose ``"auto"`` values the other settings fill."""

ACCEL_DEEPSPEED_ZERO_STAGE: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_ZERO_STAGE",
    "choice",
    choices=ZERO_STAGES,
    fallbacks=("ACCELERATE_DEEPSPEED_ZERO_STAGE",),
    written_by="``accel launch`` ``--zero_stage``",
    read_by="``DeepSpeedPlugin``",
)
"""ZeRO stage."""

ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE",
    "choice",
    choices=OFFLOAD_DEVICES,
    fallbacks=("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE",),
    written_by="``accel launch`` ``--offload_optimizer_device``",
    read_by="``DeepSpeedPlugin``",
)
"""Where optimizer states live."""

ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE",
    "choice",
    choices=OFFLOAD_DEVICES,
    fallbacks=("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE",),
    written_by="``accel launch`` ``--offload_param_device``",
    read_by="``DeepSpeedPlugin``",
)
"""Where parameters live (ZeRO stage 3)."""

ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_NVME_PATH: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_NVME_PATH",
    "text",
    fallbacks=("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_NVME_PATH",),
    written_by="``accel launch`` ``--offload_optimizer_nvme_path``",
    read_by="``DeepSpeedPlugin``",
)
"""Folder of optimizer states offloaded to NVMe."""

ACCEL_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH",
    "text",
    fallbacks=("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH",),
    written_by="``accel launch`` ``--offload_param_nvme_path``",
    read_by="``DeepSpeedPlugin``",
)
"""Folder of parameters offloaded to NVMe."""

ACCEL_DEEPSPEED_ZERO3_INIT_FLAG: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_ZERO3_INIT_FLAG",
    "bool",
    fallbacks=("ACCELERATE_DEEPSPEED_ZERO3_INIT",),
    written_by="``accel launch`` ``--zero3_init_flag``",
    read_by="``DeepSpeedPlugin``",
)
"""Build models directly partitioned with ``deepspeed.zero.Init`` (stage 3)."""

ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL: Final = EnvironmentVariable(
    "ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL",
    "bool",
    fallbacks=("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL",),
    written_by="``accel launch`` ``--zero3_save_16bit_model``",
    read_by="``DeepSpeedPlugin``",
)
"""Gather a 16-bit copy of the weights when saving the model (stage 3)."""

# The FSDP, ParallelismConfig and Megatron-LM variables are declared in their own modules
# (imported here, in this place, so that the contract and its docs table keep one order).
from ._env._fsdp_variables import *  # noqa: E402, F403 (the ACCEL_FSDP_* variables)
from ._env._fsdp_variables import __all__ as _FSDP_NAMES  # noqa: E402
from ._env._megatron_variables import *  # noqa: E402, F403 (the ACCEL_MEGATRON_LM_* variables)
from ._env._megatron_variables import __all__ as _MEGATRON_LM_NAMES  # noqa: E402
from ._env._parallelism_variables import (  # noqa: E402
    ACCEL_PARALLELISM_CONFIG_CP_BACKEND,
    ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY,
    ACCEL_PARALLELISM_CONFIG_CP_SIZE,
    ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE,
    ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE,
    ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION,
    ACCEL_PARALLELISM_CONFIG_SP_BACKEND,
    ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH,
    ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE,
    ACCEL_PARALLELISM_CONFIG_SP_SIZE,
    ACCEL_PARALLELISM_CONFIG_TP_SIZE,
    ACCEL_USE_PARALLELISM_CONFIG,
)

ACCEL_LOG_LEVEL: Final = EnvironmentVariable(
    "ACCEL_LOG_LEVEL",
    "text",
    fallbacks=("ACCELERATE_LOG_LEVEL",),
    written_by="the user",
    read_by="``get_logger``",
)
"""Level of accel's loggers made by ``get_logger`` (``DEBUG``, ``INFO`` ...)."""

_MAX_SECONDS: Final = 1e9  # ~31 years: fits timedelta, the store's waits and threading waits

ACCEL_TEARDOWN_TIMEOUT: Final = EnvironmentVariable(
    "ACCEL_TEARDOWN_TIMEOUT",
    "float",
    minimum=0,
    maximum=_MAX_SECONDS,
    written_by="the user",
    read_by="``teardown_process_group``",
)
"""Seconds the exit barrier waits for the other processes before the process group is destroyed
(at most 1e9)."""

ACCEL_CHECKPOINT_TIMEOUT: Final = EnvironmentVariable(
    "ACCEL_CHECKPOINT_TIMEOUT",
    "float",
    minimum=0,
    maximum=_MAX_SECONDS,
    above_minimum=True,
    written_by="the user",
    read_by="``Accelerator.save_state`` / ``load_state``",
)
"""Seconds a collective of ``save_state`` / ``load_state`` waits for the other processes
(default 600, at most 1e9)."""

ACCEL_HANG_TIMEOUT: Final = EnvironmentVariable(
    "ACCEL_HANG_TIMEOUT",
    "float",
    minimum=0,
    maximum=_MAX_SECONDS,
    written_by="the user, or ``accel launch`` ``--hang_timeout``",
    read_by="``PartialState`` (the hang watchdog, ``accel_state.hang_watchdog``)",
)
"""Seconds a process may wait inside one collective before every process reports where it is
(operation, sequence number, shapes, Python stack) and the job exits with code 124. Unset: 80 %
of the process group's timeout (``InitProcessGroupKwargs(timeout=...)``, else torch's 30
minutes); 0 turns the watchdog off. At most 1e9 (about 31 years): a longer duration fits no
timer and is refused."""

ACCEL_IGNORE_SLURM: Final = EnvironmentVariable(
    "ACCEL_IGNORE_SLURM",
    "bool",
    written_by="the user",
    read_by="``accel launch``",
)
"""Do not read the SLURM allocation when launching."""

ACCEL_CONFIG_HOME: Final = EnvironmentVariable(
    "ACCEL_CONFIG_HOME",
    "text",
    written_by="the user",
    read_by="``accel config``, ``accel launch``",
)
"""Folder of the default config file (default ``$XDG_CACHE_HOME/accel``)."""

ACCEL_RDZV_ID: Final = EnvironmentVariable(
    "ACCEL_RDZV_ID",
    "text",
    written_by="the user",
    read_by="``accel launch``",
)
"""Rendezvous id of a multi-machine torchrun launch (default ``accel``)."""

ACCEL_MPI_FLAVOUR: Final = EnvironmentVariable(
    "ACCEL_MPI_FLAVOUR",
    "choice",
    choices=MPI_FLAVOURS,
    written_by="the user",
    read_by="``accel launch``",
)
"""Which ``mpirun`` command line to build (default: asked to ``mpirun --version``)."""

ACCEL_MAX_PROCESSES_PER_MACHINE: Final = EnvironmentVariable(
    "ACCEL_MAX_PROCESSES_PER_MACHINE",
    "int",
    minimum=1,
    written_by="the user",
    read_by="``accel launch``, ``notebook_launcher``",
)
"""Most processes one machine may start (default: 8 per usable CPU core or per local
accelerator, whichever gives more); a launch asking for more is refused before anything starts."""

ACCEL_MAX_MACHINES: Final = EnvironmentVariable(
    "ACCEL_MAX_MACHINES",
    "int",
    minimum=1,
    written_by="the user",
    read_by="``accel launch``, ``notebook_launcher``",
)
"""Most machines one launch may span (default 65536); a launch asking for more is refused
before anything starts."""

ACCEL_AS_ACCELERATE: Final = EnvironmentVariable(
    "ACCEL_AS_ACCELERATE",
    "bool",
    written_by="``accel launch`` ``--as_accelerate``, or the user",
    read_by="the interpreter's start (the ``accel_as_accelerate.pth`` file of accel-torch)",
)
"""Call ``accel.install_as_accelerate()`` at interpreter start, so code that imports
``accelerate`` (transformers, PEFT, TRL, diffusers) runs on accel with no code change."""


VARIABLES: Final[dict[str, EnvironmentVariable]] = {
    str(value): value
    for value in list(globals().values())
    if isinstance(value, EnvironmentVariable)
}
"""Every declared variable, by name, in declaration order."""

__all__ = [
    "BACKWARD_PREFETCH",
    "DISTRIBUTED_TYPES",
    "DYNAMO_BACKENDS",
    "FSDP_VERSIONS",
    "MIXED_PRECISIONS",
    "MPI_FLAVOURS",
    "OFFLOAD_DEVICES",
    "SHARDING_STRATEGIES",
    "STATE_DICT_TYPES",
    "VARIABLES",
    "WRAP_POLICIES",
    "ZERO_STAGES",
    "BackwardPrefetch",
    "EnvironmentVariable",
    "FSDPVersion",
    "Kind",
    "MpiFlavour",
    "OffloadDevice",
    "ShardingStrategy",
    "StateDictType",
    "WrapPolicy",
    "ZeroStage",
    "check_environment",
    "declared",
    "env_text",
    "is_set",
    "read_env",
    "ACCEL_MIXED_PRECISION",
    "ACCEL_USE_CPU",
    "ACCEL_TORCH_DEVICE",
    "ACCEL_DEBUG_MODE",
    "ACCEL_FORK_LAUNCHED",
    "ACCEL_DISTRIBUTED_TYPE",
    "ACCEL_USE_DEEPSPEED",
    "ACCEL_USE_FSDP",
    "ACCEL_USE_MEGATRON_LM",
    "ACCEL_GRADIENT_ACCUMULATION_STEPS",
    "ACCEL_GRADIENT_CLIPPING",
    "ACCEL_DYNAMO_BACKEND",
    "ACCEL_DYNAMO_MODE",
    "ACCEL_DYNAMO_USE_FULLGRAPH",
    "ACCEL_DYNAMO_USE_DYNAMIC",
    "ACCEL_DYNAMO_USE_REGIONAL_COMPILATION",
    "ACCEL_DEEPSPEED_CONFIG_FILE",
    "ACCEL_DEEPSPEED_ZERO_STAGE",
    "ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE",
    "ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE",
    "ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_NVME_PATH",
    "ACCEL_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH",
    "ACCEL_DEEPSPEED_ZERO3_INIT_FLAG",
    "ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL",
    *_FSDP_NAMES,
    "ACCEL_USE_PARALLELISM_CONFIG",
    "ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE",
    "ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE",
    "ACCEL_PARALLELISM_CONFIG_TP_SIZE",
    "ACCEL_PARALLELISM_CONFIG_CP_SIZE",
    "ACCEL_PARALLELISM_CONFIG_CP_BACKEND",
    "ACCEL_PARALLELISM_CONFIG_SP_SIZE",
    "ACCEL_PARALLELISM_CONFIG_SP_BACKEND",
    "ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY",
    "ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH",
    "ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE",
    "ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION",
    *_MEGATRON_LM_NAMES,
    "ACCEL_LOG_LEVEL",
    "ACCEL_TEARDOWN_TIMEOUT",
    "ACCEL_CHECKPOINT_TIMEOUT",
    "ACCEL_HANG_TIMEOUT",
    "ACCEL_IGNORE_SLURM",
    "ACCEL_CONFIG_HOME",
    "ACCEL_RDZV_ID",
    "ACCEL_MPI_FLAVOUR",
    "ACCEL_MAX_PROCESSES_PER_MACHINE",
    "ACCEL_MAX_MACHINES",
    "ACCEL_AS_ACCELERATE",
]
