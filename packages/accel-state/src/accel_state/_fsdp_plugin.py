"""``FullyShardedDataParallelPlugin``: how models are sharded with FSDP (``fully_shard`` or
``FullyShardedDataParallel``), and ``get_module_class_from_name``.

The plugin only holds and checks settings; it imports nothing from ``torch.distributed.fsdp``.
The FSDP engine of ``accel`` turns the settings into torch objects. Every field left at ``None``
is read from the launcher's environment (the ``ACCEL_FSDP_*`` variables of
``accel_state.environment_variables``), then from a default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from . import environment_variables as env
from ._env_contract import BACKWARD_PREFETCH, SHARDING_STRATEGIES, STATE_DICT_TYPES, WRAP_POLICIES
from ._kwargs import KwargsHandler

_FLAGS = {
    "use_orig_params": env.ACCEL_FSDP_USE_ORIG_PARAMS,
    "sync_module_states": env.ACCEL_FSDP_SYNC_MODULE_STATES,
    "forward_prefetch": env.ACCEL_FSDP_FORWARD_PREFETCH,
    "activation_checkpointing": env.ACCEL_FSDP_ACTIVATION_CHECKPOINTING,
    "activation_checkpointing_offload": env.ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD,
    "cpu_ram_efficient_loading": env.ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING,
}


def _choice(value: Any, field: str, choices: tuple[str, ...]) -> str:
    """Normalise a torch enum member, its name, or a 1-based index to one of ``choices``."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(choices):
        return choices[value - 1]
    text = getattr(value, "name", value)
    text = str(text).strip().upper()
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    if text not in choices:
        raise ValueError(
            f"FullyShardedDataParallelPlugin.{field} must be one of {', '.join(choices)}; got "
            f"{value!r}. Pass one of these names (or the torch enum member)."
        )
    return text


@dataclass
class FullyShardedDataParallelPlugin(KwargsHandler):
    """Settings of fully sharded data parallelism (FSDP).

    With ``fsdp_version=2`` (the default) models are sharded with ``torch``'s ``fully_shard``
    (parameters become ``DTensor`` shards); with ``fsdp_version=1`` they are wrapped in
    ``FullyShardedDataParallel``. Fields left at ``None`` take the launcher's
    ``ACCEL_FSDP_*`` variable (or the reference's ``FSDP_*``), else the default given below.
    """

    fsdp_version: int | None = None
    """1 (``FullyShardedDataParallel``) or 2 (``fully_shard``, the default)."""
    sharding_strategy: Any = None
    """``FULL_SHARD`` (default), ``SHARD_GRAD_OP``, ``NO_SHARD``, ``HYBRID_SHARD`` or
    ``HYBRID_SHARD_ZERO2``: a name, a torch ``ShardingStrategy`` or its 1-based number. With
    FSDP2, ``SHARD_GRAD_OP`` means ``reshard_after_forward=False`` and the hybrid strategies
    replicate across machines and shard within one."""
    reshard_after_forward: bool | None = None
    """FSDP2: free gathered parameters after the forward pass (default: True, unless
    ``sharding_strategy`` is ``SHARD_GRAD_OP`` / ``HYBRID_SHARD_ZERO2``)."""
    backward_prefetch: Any = None
    """FSDP1: ``BACKWARD_PRE``, ``BACKWARD_POST`` or ``NO_PREFETCH`` (default
    ``BACKWARD_PRE``). FSDP2 always prefetches one unit ahead."""
    mixed_precision_policy: Any = None
    """Dtypes FSDP keeps parameters in for compute and reduces gradients in: a torch
    ``MixedPrecision`` (FSDP1) / ``MixedPrecisionPolicy`` (FSDP2), a dict with
    ``param_dtype``, ``reduce_dtype`` (and ``buffer_dtype`` / ``output_dtype``), or None for
    full precision parameters (the Accelerator's ``mixed_precision`` still autocasts)."""
    auto_wrap_policy: Callable[..., Any] | str | None = None
    """Which submodules become their own FSDP unit: ``TRANSFORMER_BASED_WRAP`` (classes named
    in ``transformer_cls_names_to_wrap``, else the model's ``_no_split_modules``),
    ``SIZE_BASED_WRAP`` (modules with at least ``min_num_params`` parameters), ``NO_WRAP``, or
    a callable ``policy(module, recurse, nonwrapped_numel) -> bool``. Default ``NO_WRAP``."""
    cpu_offload: Any = None
    """Keep sharded parameters (and gradients, optimizer states) in CPU memory: a bool or a
    torch ``CPUOffload`` / ``CPUOffloadPolicy``."""
    ignored_modules: Iterable[torch.nn.Module] | str | None = None
    """Modules left out of sharding (kept whole on every process), or a regular expression
    matched against module names."""
    state_dict_type: Any = None
    """How ``save_state`` writes models and optimizers: ``SHARDED_STATE_DICT`` (each process
    writes its shards with ``torch.distributed.checkpoint``; default for FSDP2),
    ``FULL_STATE_DICT`` (the whole state gathered on process 0; default for FSDP1) or
    ``LOCAL_STATE_DICT`` (FSDP1 only)."""
    state_dict_config: Any = None
    """FSDP1: a torch ``StateDictConfig`` passed to ``FSDP.state_dict_type``."""
    optim_state_dict_config: Any = None
    """FSDP1: a torch ``OptimStateDictConfig`` passed to ``FSDP.state_dict_type``."""
    limit_all_gathers: bool = True
    """FSDP1: bound the number of all-gathers in flight (saves memory)."""
    use_orig_params: bool | None = None
    """FSDP1: expose the original parameters to optimizers (needed for parameter groups and
    for an optimizer created before ``prepare``). Default True. FSDP2 always does."""
    param_init_fn: Callable[[torch.nn.Module], None] | None = None
    """How a module whose parameters are on the meta device gets real (empty) storage before
    receiving process 0's weights. Default: ``module.to_empty(device=..., recurse=False)``."""
    sync_module_states: bool | None = None
    """Broadcast process 0's parameters and buffers to the others when the model is prepared
    (required by ``cpu_ram_efficient_loading``). Default True."""
    forward_prefetch: bool | None = None
    """FSDP1: issue the next all-gather during the forward pass. Default False."""
    activation_checkpointing: bool | None = None
    """Recompute the activations of each wrapped unit in the backward pass instead of keeping
    them. Default False."""
    activation_checkpointing_offload: bool | None = None
    """FSDP2, with ``activation_checkpointing``: keep the inputs each checkpointed unit saves for
    its recomputation in (pinned) CPU memory until the backward pass needs them. Default
    False."""
    cpu_ram_efficient_loading: bool | None = None
    """Only process 0 holds real weights; the others build the model on the meta device and
    receive their shards from process 0, so N processes never hold N full copies. Default
    False."""
    transformer_cls_names_to_wrap: list[str] | None = None
    """Class names wrapped one unit each by ``TRANSFORMER_BASED_WRAP``."""
    min_num_params: int | None = None
    """Minimum parameter count of a unit for ``SIZE_BASED_WRAP`` (default 100 000 000)."""

    def __post_init__(self) -> None:
        if self.fsdp_version is None:
            self.fsdp_version = env.read_env(env.ACCEL_FSDP_VERSION, 2)
        if self.fsdp_version not in (1, 2):
            raise ValueError(
                f"FullyShardedDataParallelPlugin.fsdp_version must be 1 or 2; got "
                f"{self.fsdp_version!r}. Use 2 for fully_shard, 1 for FullyShardedDataParallel."
            )
        self.sharding_strategy = _choice(
            self.sharding_strategy
            or env.read_env(env.ACCEL_FSDP_SHARDING_STRATEGY)
            or "FULL_SHARD",
            "sharding_strategy",
            SHARDING_STRATEGIES,
        )
        if self.reshard_after_forward is None:
            reshard = env.read_env(env.ACCEL_FSDP_RESHARD_AFTER_FORWARD)
            if reshard is not None:
                self.reshard_after_forward = reshard
            else:
                self.reshard_after_forward = self.sharding_strategy not in (
                    "SHARD_GRAD_OP",
                    "HYBRID_SHARD_ZERO2",
                )
        prefetch = (
            self.backward_prefetch
            or env.read_env(env.ACCEL_FSDP_BACKWARD_PREFETCH)
            or "BACKWARD_PRE"
        )
        self.backward_prefetch = _choice(prefetch, "backward_prefetch", BACKWARD_PREFETCH)
        default_sd = "SHARDED_STATE_DICT" if self.fsdp_version == 2 else "FULL_STATE_DICT"
        self.state_dict_type = _choice(
            self.state_dict_type or env.read_env(env.ACCEL_FSDP_STATE_DICT_TYPE) or default_sd,
            "state_dict_type",
            STATE_DICT_TYPES,
        )
        if self.fsdp_version == 2 and self.state_dict_type == "LOCAL_STATE_DICT":
            raise ValueError(
                "state_dict_type LOCAL_STATE_DICT exists for FSDP1 only; got it with "
                "fsdp_version=2. Use SHARDED_STATE_DICT (each process writes its shards) or "
                "FULL_STATE_DICT."
            )
        self._resolve_wrap_policy()
        if self.cpu_offload is None:
            self.cpu_offload = env.read_env(env.ACCEL_FSDP_OFFLOAD_PARAMS, False)
        for name, default in (
            ("use_orig_params", True),
            ("sync_module_states", True),
            ("forward_prefetch", False),
            ("activation_checkpointing", False),
            ("activation_checkpointing_offload", False),
            ("cpu_ram_efficient_loading", False),
        ):
            if getattr(self, name) is None:
                setattr(self, name, env.read_env(_FLAGS[name], default))
        if self.activation_checkpointing_offload and not (
            self.activation_checkpointing and self.fsdp_version == 2
        ):
            raise ValueError(
                "activation_checkpointing_offload moves what checkpointed FSDP2 units save to "
                "CPU, so it needs activation_checkpointing=True and fsdp_version=2; got "
                f"activation_checkpointing={self.activation_checkpointing}, fsdp_version="
                f"{self.fsdp_version}. Enable both, or drop activation_checkpointing_offload."
            )
        if self.cpu_ram_efficient_loading and not self.sync_module_states:
            raise ValueError(
                "cpu_ram_efficient_loading loads weights on process 0 only, so the other "
                "processes need sync_module_states=True to receive them; got "
                "sync_module_states=False. Set sync_module_states=True."
            )
        if self.fsdp_version == 2 and self.use_orig_params is False:
            raise ValueError(
                "use_orig_params=False flattens parameters, which only FSDP1 does; got it with "
                "fsdp_version=2. Drop use_orig_params (FSDP2 always keeps the original "
                "parameters) or use fsdp_version=1."
            )

    def _resolve_wrap_policy(self) -> None:
        if self.transformer_cls_names_to_wrap is None:
            names = env.read_env(env.ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP)
            if names:
                self.transformer_cls_names_to_wrap = [n.strip() for n in names.split(",") if n]
        elif isinstance(self.transformer_cls_names_to_wrap, str):
            self.transformer_cls_names_to_wrap = [
                n.strip() for n in self.transformer_cls_names_to_wrap.split(",") if n.strip()
            ]
        if self.min_num_params is None:
            self.min_num_params = env.read_env(env.ACCEL_FSDP_MIN_NUM_PARAMS)
        policy = self.auto_wrap_policy
        if policy is None:
            policy = env.read_env(env.ACCEL_FSDP_AUTO_WRAP_POLICY)
            if policy is None:
                if self.transformer_cls_names_to_wrap:
                    policy = "TRANSFORMER_BASED_WRAP"
                elif self.min_num_params:
                    policy = "SIZE_BASED_WRAP"
                else:
                    policy = "NO_WRAP"
        if not callable(policy):
            policy = _choice(policy, "auto_wrap_policy", WRAP_POLICIES)
            if policy == "SIZE_BASED_WRAP" and self.min_num_params is None:
                self.min_num_params = 100_000_000
        self.auto_wrap_policy = policy

    @property
    def is_fsdp2(self) -> bool:
        """Whether models are sharded with ``fully_shard``."""
        return self.fsdp_version == 2

    def set_state_dict_type(self, state_dict_type: str | None = None) -> None:
        """Change how checkpoints are written (``FULL_STATE_DICT``, ``SHARDED_STATE_DICT`` ...).

        Args:
            state_dict_type: The new type; None re-reads ``ACCEL_FSDP_STATE_DICT_TYPE``
                (or ``FSDP_STATE_DICT_TYPE``).
        """
        value = state_dict_type or env.read_env(env.ACCEL_FSDP_STATE_DICT_TYPE) or "FULL_STATE_DICT"
        self.state_dict_type = _choice(value, "state_dict_type", STATE_DICT_TYPES)

    def to_dict(self) -> dict[str, Any]:
        """Every field (callables and modules as they are, not copied)."""
        return dict(self.__dict__)


def get_module_class_from_name(module: torch.nn.Module, name: str) -> type[torch.nn.Module] | None:
    """Return the class called ``name`` among ``module`` and its submodules, or None.

    Args:
        module: The model to search.
        name: A class name such as ``"LlamaDecoderLayer"``.
    """
    for sub in module.modules():
        if type(sub).__name__ == name:
            return type(sub)
    return None
