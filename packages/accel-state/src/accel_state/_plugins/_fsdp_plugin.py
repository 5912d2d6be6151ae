"""``FullyShardedDataParallelPlugin``: how models are sharded with FSDP (``fully_shard`` or
``FullyShardedDataParallel``), and ``get_module_class_from_name``.

Like the reference library, the plugin turns what it is given (names, numbers, dicts, bools)
into the torch objects FSDP takes (``ShardingStrategy``, ``StateDictType``, ``MixedPrecision``
...); every field left at ``None`` is read from the launcher's environment (the
``ACCEL_FSDP_*`` variables of ``accel_state.environment_variables``, or the reference's
``FSDP_*``), then from a default. ``torch.distributed.fsdp`` is imported only when a plugin is
built.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from .. import environment_variables as env
from . import _fsdp_objects as objects
from ._kwargs import KwargsHandler

logger = logging.getLogger("accel_state.plugins")


@dataclass
class FullyShardedDataParallelPlugin(KwargsHandler):
    """Settings of fully sharded data parallelism (FSDP).

    With ``fsdp_version=1`` (the default, as in the reference library) models are wrapped in
    ``FullyShardedDataParallel``; with ``fsdp_version=2`` they are sharded with ``torch``'s
    ``fully_shard`` (parameters become ``DTensor`` shards). Fields left at ``None`` take the
    launcher's ``ACCEL_FSDP_*`` variable (or the reference's ``FSDP_*``), else the default given
    below. After construction the fields hold the torch objects FSDP takes.

    On gloo (CPU processes) FSDP2 units reduce-scatter their gradients through one
    ``all_to_all_single`` and a local sum instead of torch's gloo ``reduce_scatter_tensor``
    (which all-reduces the whole gradient): half the bytes on 2 processes, the same sums.
    ``ACCEL_FSDP_GLOO_ALL_TO_ALL_REDUCE_SCATTER=0`` keeps torch's own; to use another path, call
    ``set_custom_reduce_scatter`` on the prepared modules.
    """

    fsdp_version: int | None = None
    """1 (``FullyShardedDataParallel``, the default) or 2 (``fully_shard``)."""
    sharding_strategy: Any = None
    """``FULL_SHARD`` (default), ``SHARD_GRAD_OP``, ``NO_SHARD``, ``HYBRID_SHARD`` or
    ``HYBRID_SHARD_ZERO2``: a name, a torch ``ShardingStrategy`` or its 1-based number; held as
    a ``ShardingStrategy``. With FSDP2 it stays None unless given (argument or variable):
    ``SHARD_GRAD_OP`` then means ``reshard_after_forward=False`` and the hybrid strategies
    replicate across machines and shard within one."""
    reshard_after_forward: Any = None
    """FSDP2: free gathered parameters after the forward pass, a bool (default True, unless
    ``sharding_strategy`` is ``SHARD_GRAD_OP`` / ``HYBRID_SHARD_ZERO2``). False saves the
    backward pass one all-gather per unit and holds every unit's full parameters from its
    forward to its backward (at the peak, the whole model's parameters). FSDP1: None, or a
    sharding strategy used when ``sharding_strategy`` is not given."""
    backward_prefetch: Any = None
    """FSDP1: ``BACKWARD_PRE``, ``BACKWARD_POST`` or ``NO_PREFETCH`` (default; held as None),
    held as a ``BackwardPrefetch``. FSDP2 prefetches one unit ahead by itself: None."""
    mixed_precision_policy: Any = None
    """Dtypes FSDP keeps parameters in for compute and reduces gradients in: a torch
    ``MixedPrecision`` (FSDP1) / ``MixedPrecisionPolicy`` (FSDP2), a dict of dtypes (or names)
    keyed ``param_dtype``, ``reduce_dtype`` and ``buffer_dtype`` (FSDP1) / ``output_dtype``
    (FSDP2), a precision name (``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp8"``: bf16 parameters),
    or None for full precision parameters (the Accelerator's ``mixed_precision`` still
    autocasts). Held as the torch object."""
    auto_wrap_policy: Callable[..., Any] | str | None = None
    """Which submodules become their own FSDP unit: ``TRANSFORMER_BASED_WRAP`` (classes named
    in ``transformer_cls_names_to_wrap``, else the model's ``_no_split_modules``; held as torch's
    ``transformer_auto_wrap_policy``), ``SIZE_BASED_WRAP`` (modules with at least
    ``min_num_params`` parameters; ``size_based_auto_wrap_policy``), ``NO_WRAP`` (None), or a
    callable ``policy(module, recurse, nonwrapped_numel) -> bool``. Default ``NO_WRAP``, or
    ``TRANSFORMER_BASED_WRAP`` when only ``transformer_cls_names_to_wrap`` is given."""
    cpu_offload: Any = None
    """Keep sharded parameters (and gradients, optimizer states) in CPU memory: a bool, or a
    torch ``CPUOffload`` (FSDP1) / ``OffloadPolicy`` or ``CPUOffloadPolicy`` (FSDP2); held as
    the torch object. Default False."""
    ignored_modules: Iterable[torch.nn.Module] | str | None = None
    """Modules left out of sharding (kept whole on every process), or a regular expression
    matched against module names."""
    state_dict_type: Any = None
    """How ``save_state`` writes models and optimizers: ``FULL_STATE_DICT`` (the whole state
    gathered on process 0; default for FSDP1), ``SHARDED_STATE_DICT`` (each process writes its
    shards with ``torch.distributed.checkpoint``; default for FSDP2) or ``LOCAL_STATE_DICT``
    (FSDP1 only); held as a ``StateDictType``."""
    state_dict_config: Any = None
    """A torch ``StateDictConfig`` for ``FSDP.state_dict_type`` (default: CPU offload, and
    process 0 only for full state dicts)."""
    optim_state_dict_config: Any = None
    """A torch ``OptimStateDictConfig`` for ``FSDP.state_dict_type`` (defaults as above)."""
    limit_all_gathers: bool = True
    """FSDP1: bound the number of all-gathers in flight (saves memory)."""
    use_orig_params: bool | None = None
    """FSDP1: expose the original parameters to optimizers (needed for parameter groups and
    for an optimizer created before ``prepare``). Default True. FSDP2 always does: None."""
    param_init_fn: Callable[[torch.nn.Module], None] | None = None
    """How a module whose parameters are on the meta device gets real (empty) storage before
    receiving process 0's weights. Default: ``module.to_empty(device=..., recurse=False)``."""
    sync_module_states: bool | None = None
    """FSDP1: broadcast process 0's parameters and buffers to the others when the model is
    prepared. Default False, True with ``cpu_ram_efficient_loading``. FSDP2: None (accel
    broadcasts process 0's weights when the model is sharded)."""
    forward_prefetch: bool | None = None
    """FSDP1: issue the next all-gather during the forward pass. Default False. FSDP2: None."""
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
    """Class names wrapped one unit each by ``TRANSFORMER_BASED_WRAP`` (a list, or one
    comma-separated string)."""
    min_num_params: int | None = None
    """Minimum parameter count of a unit for ``SIZE_BASED_WRAP`` (default 100 000 000)."""

    def __post_init__(self) -> None:
        if self.fsdp_version is None:
            self.fsdp_version = env.read_env(env.ACCEL_FSDP_VERSION, 1)
        if self.fsdp_version not in (1, 2):
            raise ValueError(
                f"FullyShardedDataParallelPlugin.fsdp_version must be 1 or 2; got "
                f"{self.fsdp_version!r}. Use 1 for FullyShardedDataParallel, 2 for fully_shard."
            )
        self._resolve_sharding()
        self._resolve_prefetch()
        self.set_state_dict_type()
        self._resolve_wrap_policy()
        if self.cpu_offload is None:
            self.cpu_offload = env.read_env(env.ACCEL_FSDP_OFFLOAD_PARAMS, False)
        self.set_cpu_offload()
        self._resolve_flags()
        if self.mixed_precision_policy is not None:
            self.mixed_precision_policy = objects.mixed_precision(
                self.mixed_precision_policy, self.fsdp_version
            )

    # ------------------------------------------------------------------ resolution steps
    def _resolve_sharding(self) -> None:
        strategy = self.sharding_strategy
        if strategy is None:
            strategy = env.read_env(env.ACCEL_FSDP_SHARDING_STRATEGY)
        if self.fsdp_version == 1:
            if isinstance(self.reshard_after_forward, bool):
                raise ValueError(
                    "with fsdp_version=1 reshard_after_forward is a sharding strategy; got "
                    f"{self.reshard_after_forward!r}. Pass sharding_strategy="
                    "'FULL_SHARD' / 'SHARD_GRAD_OP' (or use fsdp_version=2 for a bool)."
                )
            if self.reshard_after_forward is not None:
                self.reshard_after_forward = objects.sharding_strategy(
                    self.reshard_after_forward, "reshard_after_forward"
                )
            if strategy is None:
                strategy = self.reshard_after_forward
            self.sharding_strategy = objects.sharding_strategy(strategy or "FULL_SHARD")
            return
        self.sharding_strategy = None if strategy is None else objects.sharding_strategy(strategy)
        reshard = self.reshard_after_forward
        if reshard is None:
            reshard = env.read_env(env.ACCEL_FSDP_RESHARD_AFTER_FORWARD)
        if reshard is None:
            reshard = objects.name_of(self.sharding_strategy) not in (
                "SHARD_GRAD_OP",
                "HYBRID_SHARD_ZERO2",
            )
        if isinstance(reshard, str) and reshard.strip().lower() in ("true", "1", "yes", "on"):
            reshard = True
        elif isinstance(reshard, str) and reshard.strip().lower() in ("false", "0", "no", "off"):
            reshard = False
        if not isinstance(reshard, bool):
            raise ValueError(
                "with fsdp_version=2 reshard_after_forward must be a bool; got "
                f"{self.reshard_after_forward!r}. Pass True (free gathered parameters after "
                "forward) or False."
            )
        self.reshard_after_forward = reshard

    def _resolve_prefetch(self) -> None:
        if self.fsdp_version == 2:
            if self.backward_prefetch is not None:
                logger.warning(
                    "backward_prefetch is not used by FSDP2, which prefetches one unit ahead "
                    "by itself; setting it to None."
                )
            self.backward_prefetch = None
            return
        prefetch = self.backward_prefetch
        if prefetch is None:
            prefetch = env.read_env(env.ACCEL_FSDP_BACKWARD_PREFETCH)
        self.backward_prefetch = objects.backward_prefetch(prefetch)

    def _resolve_flags(self) -> None:
        for name, variable in (
            ("activation_checkpointing", env.ACCEL_FSDP_ACTIVATION_CHECKPOINTING),
            ("activation_checkpointing_offload", env.ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD),
            ("cpu_ram_efficient_loading", env.ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING),
        ):
            if getattr(self, name) is None:
                setattr(self, name, env.read_env(variable, False))
        if self.activation_checkpointing_offload and not (
            self.activation_checkpointing and self.fsdp_version == 2
        ):
            raise ValueError(
                "activation_checkpointing_offload moves what checkpointed FSDP2 units save to "
                "CPU, so it needs activation_checkpointing=True and fsdp_version=2; got "
                f"activation_checkpointing={self.activation_checkpointing}, fsdp_version="
                f"{self.fsdp_version}. Enable both, or drop activation_checkpointing_offload."
            )
        if self.fsdp_version == 2:
            self._fsdp2_flags()
            return
        if self.use_orig_params is None:
            self.use_orig_params = env.read_env(env.ACCEL_FSDP_USE_ORIG_PARAMS, True)
        if self.forward_prefetch is None:
            self.forward_prefetch = env.read_env(env.ACCEL_FSDP_FORWARD_PREFETCH, False)
        if self.sync_module_states is None:
            self.sync_module_states = env.read_env(env.ACCEL_FSDP_SYNC_MODULE_STATES, False)
            if self.cpu_ram_efficient_loading:
                self.sync_module_states = True
        if self.cpu_ram_efficient_loading and not self.sync_module_states:
            raise ValueError(
                "cpu_ram_efficient_loading loads weights on process 0 only, so the other "
                "processes need sync_module_states=True to receive them; got "
                "sync_module_states=False. Set sync_module_states=True."
            )

    def _fsdp2_flags(self) -> None:
        if self.use_orig_params is False:
            raise ValueError(
                "use_orig_params=False flattens parameters, which only FSDP1 does; got it with "
                "fsdp_version=2. Drop use_orig_params (FSDP2 always keeps the original "
                "parameters) or use fsdp_version=1."
            )
        if self.forward_prefetch:
            raise ValueError(
                "forward_prefetch exists for FSDP1 only; got forward_prefetch=True with "
                "fsdp_version=2. Drop it, or use fsdp_version=1."
            )
        # FSDP2 always uses the original parameters, and accel broadcasts process 0's weights
        # when it shards a model: these FSDP1 switches read None, as in the reference.
        self.use_orig_params = None
        self.sync_module_states = None
        self.forward_prefetch = None

    def _resolve_wrap_policy(self) -> None:
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
        if isinstance(policy, str):
            policy = objects.wrap_policy_function(policy)
        elif policy is not None and not callable(policy):
            raise ValueError(
                "FullyShardedDataParallelPlugin.auto_wrap_policy must be TRANSFORMER_BASED_WRAP, "
                f"SIZE_BASED_WRAP, NO_WRAP or a callable; got {policy!r}. Pass one of these."
            )
        self.auto_wrap_policy = policy
        kind = objects.wrap_policy_name(policy)
        if kind == "TRANSFORMER_BASED_WRAP" and self.transformer_cls_names_to_wrap is None:
            self.transformer_cls_names_to_wrap = env.read_env(
                env.ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP
            )
        if isinstance(self.transformer_cls_names_to_wrap, str):
            self.transformer_cls_names_to_wrap = [
                n.strip() for n in self.transformer_cls_names_to_wrap.split(",") if n.strip()
            ]
        if kind == "SIZE_BASED_WRAP" and self.min_num_params is None:
            self.min_num_params = env.read_env(env.ACCEL_FSDP_MIN_NUM_PARAMS, 100_000_000)
        if self.min_num_params is not None and (
            not isinstance(self.min_num_params, int) or isinstance(self.min_num_params, bool)
        ):
            raise ValueError(
                "FullyShardedDataParallelPlugin.min_num_params must be an integer; got "
                f"{self.min_num_params!r}. Pass e.g. 100_000_000."
            )

    # ------------------------------------------------------------------- public methods
    @property
    def is_fsdp2(self) -> bool:
        """Whether models are sharded with ``fully_shard``."""
        return self.fsdp_version == 2

    def set_state_dict_type(self, state_dict_type: Any = None) -> None:
        """Set how checkpoints are written, and the state-dict configs that go with it.

        Args:
            state_dict_type: ``FULL_STATE_DICT``, ``SHARDED_STATE_DICT``, ``LOCAL_STATE_DICT``
                (a name, number or ``StateDictType``). None keeps the current type (or, when
                there is none yet, reads ``ACCEL_FSDP_STATE_DICT_TYPE`` / ``FSDP_STATE_DICT_TYPE``,
                defaulting to full for FSDP1 and sharded for FSDP2). A config already set is
                kept.
        """
        if state_dict_type is not None:
            self.state_dict_type = state_dict_type
        if self.state_dict_type is None:
            default = "FULL_STATE_DICT" if self.fsdp_version == 1 else "SHARDED_STATE_DICT"
            self.state_dict_type = env.read_env(env.ACCEL_FSDP_STATE_DICT_TYPE, default)
        kind = objects.state_dict_type(self.state_dict_type)
        if self.fsdp_version == 2 and kind.name == "LOCAL_STATE_DICT":
            raise ValueError(
                "state_dict_type LOCAL_STATE_DICT exists for FSDP1 only; got it with "
                "fsdp_version=2. Use SHARDED_STATE_DICT (each process writes its shards) or "
                "FULL_STATE_DICT."
            )
        self.state_dict_type = kind
        model_config, optim_config = objects.state_dict_configs(kind)
        if self.state_dict_config is None:
            self.state_dict_config = model_config
        if self.optim_state_dict_config is None:
            self.optim_state_dict_config = optim_config

    def set_auto_wrap_policy(self, model: torch.nn.Module) -> None:
        """Bind the wrap policy to ``model``: the transformer policy to the classes named in
        ``transformer_cls_names_to_wrap`` (else the model's ``_no_split_modules``), the size
        policy to ``min_num_params``; ``auto_wrap_policy`` becomes a ``functools.partial``.

        Raises:
            ValueError: when a named class is not in the model (naming the classes present).
        """
        kind = objects.wrap_policy_name(self.auto_wrap_policy)
        if kind == "TRANSFORMER_BASED_WRAP":
            if self.transformer_cls_names_to_wrap is None:
                self.transformer_cls_names_to_wrap = list(
                    getattr(model, "_no_split_modules", None) or []
                )
            classes = set()
            for name in self.transformer_cls_names_to_wrap:
                cls = get_module_class_from_name(model, name)
                if cls is None:
                    present = sorted({type(m).__name__ for m in model.modules()})
                    raise ValueError(
                        f"transformer_cls_names_to_wrap names {name!r}, which is not a class of "
                        f"the model; its classes are {present}. Use names from that list."
                    )
                classes.add(cls)
            self.auto_wrap_policy = functools.partial(
                objects.wrap_policy_function(kind), transformer_layer_cls=classes
            )
        elif kind == "SIZE_BASED_WRAP":
            self.auto_wrap_policy = (
                functools.partial(
                    objects.wrap_policy_function(kind), min_num_params=self.min_num_params
                )
                if self.min_num_params
                else None
            )

    def set_mixed_precision(
        self, mixed_precision: Any, buffer_autocast: bool = False, override: bool = False
    ) -> None:
        """Set ``mixed_precision_policy`` from a precision name (``"bf16"`` ...) or a dtype.

        Args:
            mixed_precision: ``"fp16"``, ``"bf16"``, ``"fp32"``, ``"fp8"`` (bf16 parameters) or a
                torch dtype.
            buffer_autocast: FSDP1: keep buffers in float32.
            override: Replace a policy already set (otherwise only an unset policy, or a dict,
                is filled).
        """
        if override or self.mixed_precision_policy is None:
            self.mixed_precision_policy = objects.mixed_precision(
                mixed_precision, self.fsdp_version or 1, buffer_autocast
            )
        elif isinstance(self.mixed_precision_policy, dict):
            self.mixed_precision_policy = objects.mixed_precision(
                self.mixed_precision_policy, self.fsdp_version or 1
            )

    def validate_mixed_precision_policy(self) -> None:
        """Check that ``mixed_precision_policy`` is the torch class of this FSDP version.

        Raises:
            ValueError: naming the expected class and the value.
        """
        cls = objects.mixed_precision_class(self.fsdp_version or 1)
        if not isinstance(self.mixed_precision_policy, cls):
            raise ValueError(
                f"mixed_precision_policy must be a torch {cls.__name__} with fsdp_version="
                f"{self.fsdp_version}; got {self.mixed_precision_policy!r}. Call "
                "set_mixed_precision('bf16') or pass the torch object."
            )

    def set_cpu_offload(self) -> None:
        """Turn a bool ``cpu_offload`` into ``CPUOffload`` (FSDP1) or ``OffloadPolicy`` /
        ``CPUOffloadPolicy`` (FSDP2), and check a torch object matches the version."""
        self.cpu_offload = objects.cpu_offload(self.cpu_offload, self.fsdp_version or 1)

    def validate_cpu_offload(self) -> None:
        """Check that ``cpu_offload`` is the torch offload object of this FSDP version.

        Raises:
            ValueError: naming what this version takes and the value.
        """
        if isinstance(self.cpu_offload, bool):
            raise ValueError(
                f"cpu_offload must be a torch offload object here; got {self.cpu_offload!r}. "
                "Call set_cpu_offload() first."
            )
        objects.cpu_offload(self.cpu_offload, self.fsdp_version or 1)

    def to_dict(self) -> dict[str, Any]:
        """Every field (callables, modules and torch objects as they are, not copied)."""
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
