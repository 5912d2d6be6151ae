"""``AcceleratorState`` (precision and plugins on top of ``PartialState``) and ``GradientState``."""

from __future__ import annotations

from typing import Any

from .. import environment_variables as env
from .._enums import DistributedType, PrecisionType
from ._partial_state import (
    _STATE_ATTRIBUTES,
    PartialState,
    join_shared_state,
    missing_state_attribute,
)

_OWN_ATTRIBUTES = frozenset(
    {
        "_mixed_precision",
        "deepspeed_plugins",
        "device_mesh",
        "dynamo_plugin",
        "fsdp_plugin",
        "megatron_lm_plugin",
        "parallelism_config",
        "torch_tp_plugin",
    }
)
"""The attributes ``AcceleratorState.__init__`` sets itself (gone after ``_reset_state()``)."""
_PROCESS_VIEW = _STATE_ATTRIBUTES | {
    name for name, value in vars(PartialState).items() if isinstance(value, property)
}
"""What ``AcceleratorState`` reads from its ``PartialState``: attributes and properties."""
_PROCESS_CONTROL = frozenset(
    {
        "destroy_process_group",
        "fork_launched",
        "is_last_process",
        "is_local_main_process",
        "is_main_process",
        "local_main_process_first",
        "main_process_first",
        "print",
        "split_between_processes",
        "use_distributed",
        "wait_for_everyone",
    }
)
"""Process control that ``AcceleratorState`` asks of ``PartialState()`` even after its reset."""


class AcceleratorState:
    """The shared state of an ``Accelerator``: ``PartialState`` plus precision and plugins.

    Every attribute of [`PartialState`][accel_state.PartialState] is readable here too. Like ``PartialState``, all
    instances share one state: the first one decides the mixed precision (argument, else
    ``ACCEL_MIXED_PRECISION``, else ``"no"``).

    Args:
        mixed_precision: ``"no"``, ``"fp16"``, ``"bf16"`` or ``"fp8"``.
        cpu: Force the CPU.
        dynamo_plugin: A ``TorchDynamoPlugin`` or None.
        deepspeed_plugin: A ``DeepSpeedPlugin``, or a dict of named plugins (the first is active;
            switch with [`select_deepspeed_plugin`][accel_state.AcceleratorState.select_deepspeed_plugin]).
        fsdp_plugin: Engine plugin, stored for the engine that reads it.
        torch_tp_plugin: A ``TorchTensorParallelPlugin`` or None.
        megatron_lm_plugin: Engine plugin, stored for the engine that reads it.
        parallelism_config: A ``ParallelismConfig`` (how processes split between kinds of
            parallelism) or None.
        _from_accelerator: Set by ``Accelerator``.
        **kwargs: Passed to ``PartialState`` (process-group arguments).
    """

    _shared_state: dict[str, Any] = {}
    __setstate__ = join_shared_state
    _mixed_precision: PrecisionType
    parallelism_config: Any

    def __init__(
        self,
        mixed_precision: str | PrecisionType | None = None,
        cpu: bool = False,
        dynamo_plugin: Any = None,
        deepspeed_plugin: Any = None,
        fsdp_plugin: Any = None,
        torch_tp_plugin: Any = None,
        megatron_lm_plugin: Any = None,
        parallelism_config: Any = None,
        _from_accelerator: bool = False,
        **kwargs: Any,
    ) -> None:
        self.__dict__ = self._shared_state
        partial = self._shared_state.get("_partial")
        if partial is not None and not partial.initialized:
            # PartialState._reset_state() left this state without its process view: what was
            # built on that view is stale, so this state is built again from these arguments.
            self._shared_state.clear()
        if self._shared_state.get("_is_initialized"):
            if (
                mixed_precision is not None
                and PrecisionType.parse(mixed_precision, "mixed_precision") != self._mixed_precision
            ):
                raise ValueError(
                    "AcceleratorState was already created with mixed_precision="
                    f"{self._mixed_precision.value!r}; got {str(mixed_precision)!r}. Create one "
                    "Accelerator per process, or call AcceleratorState._reset_state() first."
                )
            if deepspeed_plugin is not None:
                self.deepspeed_plugins = _named_plugins(deepspeed_plugin)
            return
        self._partial = PartialState(cpu, **kwargs)
        precision = mixed_precision
        if precision is None:
            precision = env.read_env(env.ACCEL_MIXED_PRECISION, "no")
        self._mixed_precision = PrecisionType.parse(precision, "mixed_precision")
        self.dynamo_plugin = dynamo_plugin
        self.deepspeed_plugins = _named_plugins(deepspeed_plugin)
        self.fsdp_plugin = fsdp_plugin
        self.torch_tp_plugin = torch_tp_plugin
        self.megatron_lm_plugin = megatron_lm_plugin
        self.parallelism_config = parallelism_config
        self.device_mesh: Any = None
        """The ``DeviceMesh`` of ``parallelism_config`` once an engine has built it."""
        self._distributed_type: DistributedType | None = None
        self._is_initialized = True

    def __getattr__(self, name: str) -> Any:
        # Attributes of the process view live on the PartialState.
        if name.startswith("__") or name == "_partial":
            raise AttributeError(name)
        partial = self.__dict__.get("_partial")
        if name in _PROCESS_CONTROL and (partial is None or not partial.initialized):
            # Process control outlives a reset of this state: it is the process group's.
            return getattr(PartialState(), name)
        if partial is None or not partial.initialized:
            # This state (or the PartialState under it) was reset: say which.
            cls = AcceleratorState if partial is None else PartialState
            raise missing_state_attribute(cls, name, _PROCESS_VIEW | _OWN_ATTRIBUTES)
        try:
            return getattr(partial, name)
        except AttributeError:
            raise AttributeError(
                f"'AcceleratorState' object has no attribute '{name}'", name=name
            ) from None

    @property
    def initialized(self) -> bool:
        """Whether the shared state exists in this process."""
        return self._shared_state.get("_is_initialized", False)

    @property
    def mixed_precision(self) -> str:
        """The mixed precision of the run as text (``"no"``, ``"fp16"``, ``"bf16"``, ``"fp8"``)."""
        return self._mixed_precision.value

    @property
    def distributed_type(self) -> DistributedType:
        """The engine's distributed type when one is set (DeepSpeed, FSDP ...), else the world's."""
        return self._distributed_type or self._partial.distributed_type

    @distributed_type.setter
    def distributed_type(self, value: DistributedType) -> None:
        self._distributed_type = DistributedType.parse(value, "distributed_type")

    @property
    def is_fsdp2(self) -> bool:
        """Whether the run uses FSDP version 2 (``fully_shard``)."""
        plugin = self.__dict__.get("fsdp_plugin")
        return self.distributed_type == DistributedType.FSDP and (
            plugin is not None and plugin.fsdp_version == 2
        )

    @property
    def deepspeed_plugin(self) -> Any:
        """The active ``DeepSpeedPlugin`` (None without DeepSpeed)."""
        plugins = self.__dict__.get("deepspeed_plugins")
        if not plugins:
            return None
        return next((p for p in plugins.values() if p.selected), next(iter(plugins.values())))

    def get_deepspeed_plugin(self, name: str) -> Any:
        """The ``DeepSpeedPlugin`` registered under ``name``."""
        plugins = self.__dict__.get("deepspeed_plugins") or {}
        if name not in plugins:
            raise ValueError(
                f"no DeepSpeed plugin is named {name!r}; got plugins {sorted(plugins)}. Pass one "
                "of these names, or add the plugin to Accelerator(deepspeed_plugins={...})."
            )
        return plugins[name]

    def select_deepspeed_plugin(self, name: str | None = None) -> None:
        """Make the plugin named ``name`` the active one (the next ``prepare`` uses it)."""
        plugins = self.__dict__.get("deepspeed_plugins") or {}
        if name is None:
            name = next(iter(plugins), None)
        chosen = self.get_deepspeed_plugin(name)  # type: ignore[arg-type]
        for plugin in plugins.values():
            plugin._unselect()
        chosen.select(_from_accelerator_state=True)

    def __repr__(self) -> str:
        return repr(self._partial) + f"Mixed precision type: {self.mixed_precision}\n"

    @classmethod
    def _reset_state(cls, reset_partial_state: bool = False) -> None:
        """Forget the shared state (tests only)."""
        cls._shared_state.clear()
        if reset_partial_state:
            PartialState._reset_state()


def _named_plugins(plugin: Any) -> dict[str, Any] | None:
    if plugin is None:
        return None
    plugins = dict(plugin) if isinstance(plugin, dict) else {"default": plugin}
    if not plugins:
        return None
    first = next(iter(plugins.values()))
    if not any(p.selected for p in plugins.values()):
        first.select(_from_accelerator_state=True)
    return plugins


class GradientState:
    """Shared bookkeeping of gradient accumulation and of the active dataloader.

    ``sync_gradients`` says whether this step ends an accumulation cycle; ``end_of_dataloader``
    and ``remainder`` say whether the current batch is the last one of the active loader and how
    many of its samples are real (the rest duplicate the start of the data so that every process
    has a full batch), which ``gather_for_metrics`` uses to drop exactly the duplicates.
    """

    _shared_state: dict[str, Any] = {}
    __setstate__ = join_shared_state

    def __init__(self, gradient_accumulation_plugin: Any = None) -> None:
        self.__dict__ = self._shared_state
        if not self._shared_state.get("_is_initialized"):
            self.sync_gradients = True
            self.active_dataloader: Any = None
            self.dataloader_references: list[Any] = [None]
            self.plugin_kwargs: dict[str, Any] = {}
            self._is_xla_gradients_synced = False
            self._is_initialized = True
        if gradient_accumulation_plugin is not None:
            self.plugin_kwargs = gradient_accumulation_plugin.to_kwargs()

    @property
    def initialized(self) -> bool:
        """Whether the shared state exists in this process."""
        return self._shared_state.get("_is_initialized", False)

    @property
    def is_xla_gradients_synced(self) -> bool:
        """Whether gradients were already all-reduced by XLA this step (always True under FSDP,
        which synchronises them itself); set by ``clip_grad_norm_`` on XLA, reset by the step."""
        if env.read_env(env.ACCEL_USE_FSDP, False):
            return True
        return self._is_xla_gradients_synced

    @is_xla_gradients_synced.setter
    def is_xla_gradients_synced(self, is_synced: bool) -> None:
        self._is_xla_gradients_synced = is_synced

    @property
    def num_steps(self) -> int:
        """Number of batches accumulated per optimizer step."""
        return self.plugin_kwargs.get("num_steps", 1)

    @property
    def adjust_scheduler(self) -> bool:
        """Whether the scheduler steps are scaled for accumulation."""
        return self.plugin_kwargs.get("adjust_scheduler", False)

    @property
    def sync_with_dataloader(self) -> bool:
        """Whether the end of the dataloader forces a gradient sync."""
        return self.plugin_kwargs.get("sync_with_dataloader", True)

    @property
    def sync_each_batch(self) -> bool:
        """Whether gradients are synchronised on every batch even while accumulating."""
        return self.plugin_kwargs.get("sync_each_batch", False)

    @property
    def end_of_dataloader(self) -> bool:
        """Whether the active dataloader has yielded its last batch."""
        if not self.in_dataloader:
            return False
        return bool(getattr(self.active_dataloader, "end_of_dataloader", False))

    @property
    def remainder(self) -> int:
        """Number of real samples in the last batch (-1 when unknown or not at the end)."""
        if not self.in_dataloader:
            return -1
        return int(getattr(self.active_dataloader, "remainder", -1))

    @property
    def in_dataloader(self) -> bool:
        """Whether a prepared dataloader is being iterated."""
        return self.active_dataloader is not None

    def _set_sync_gradients(self, sync_gradients: bool) -> None:
        self.sync_gradients = sync_gradients

    def _add_dataloader(self, dataloader: Any) -> None:
        self.active_dataloader = dataloader
        self.dataloader_references.append(dataloader)

    def _remove_dataloader(self, dataloader: Any) -> None:
        if dataloader in self.dataloader_references:
            self.dataloader_references.remove(dataloader)
        self.active_dataloader = self.dataloader_references[-1]

    def __repr__(self) -> str:
        return (
            f"Sync Gradients: {self.sync_gradients}\n"
            f"At end of current dataloader: {self.end_of_dataloader}\n"
            f"Extra samples added: {self.remainder}\n"
            f"Gradient accumulation plugin: {self.plugin_kwargs}\n"
        )

    @classmethod
    def _reset_state(cls) -> None:
        """Forget the shared state (tests only)."""
        cls._shared_state.clear()
