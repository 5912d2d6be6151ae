"""Kwargs handlers: small dataclasses that customise how torch objects are built."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .._enums import DDPCommunicationHookType


class KwargsHandler:
    """Base of the kwargs dataclasses: ``to_kwargs`` returns only the fields that differ from
    their defaults, so that torch's own defaults apply to everything else."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as a dict (a deep copy)."""
        return copy.deepcopy({f.name: getattr(self, f.name) for f in fields(self)})  # type: ignore[arg-type]

    def to_kwargs(self) -> dict[str, Any]:
        """The fields whose value differs from the default (the value a handler built in an
        empty environment holds, so a value read from a variable counts as set)."""
        from .._env._launcher import clear_environment

        with clear_environment():
            default = self.__class__().to_dict()
        return {k: v for k, v in self.to_dict().items() if default[k] != v}


@dataclass
class AutocastKwargs(KwargsHandler):
    """Arguments of ``torch.autocast`` used by ``Accelerator.autocast``."""

    enabled: bool = True
    """Whether autocast is on inside the block."""
    cache_enabled: bool | None = None
    """Whether autocast caches casted weights (torch's default when None)."""


@dataclass
class DistributedDataParallelKwargs(KwargsHandler):
    """Arguments of ``torch.nn.parallel.DistributedDataParallel`` and its communication hook."""

    dim: int = 0
    """Dimension along which inputs are scattered."""
    broadcast_buffers: bool = True
    """Broadcast buffers from rank 0 at every forward."""
    bucket_cap_mb: int = 25
    """Size of the all-reduce buckets in MiB."""
    find_unused_parameters: bool = False
    """Look for parameters that got no gradient (slower; for models with branches)."""
    check_reduction: bool = False
    """Deprecated torch argument, kept for compatibility."""
    gradient_as_bucket_view: bool = False
    """Let gradients be views into the all-reduce buckets (saves memory)."""
    static_graph: bool = False
    """The graph does not change between iterations (enables optimisations)."""
    comm_hook: DDPCommunicationHookType | str | Callable[..., Any] = DDPCommunicationHookType.NO
    """Gradient communication hook: a ``DDPCommunicationHookType`` (or its value, ``"fp16"``,
    ``"power_sgd"`` ...), or a hook function of torch's ``register_comm_hook`` signature."""
    comm_wrapper: DDPCommunicationHookType | str = DDPCommunicationHookType.NO
    """``FP16`` / ``BF16``: compress what ``comm_hook`` sends to half precision (needs a
    ``comm_hook``)."""
    comm_state_option: dict[str, Any] = field(default_factory=dict)
    """Arguments of the hook's state: of ``PowerSGDState`` for the PowerSGD hooks (e.g.
    ``matrix_approximation_rank``); for a hook function, ``state_class`` plus its arguments."""

    def __post_init__(self) -> None:
        if not callable(self.comm_hook):
            self.comm_hook = DDPCommunicationHookType.parse(
                self.comm_hook, "DistributedDataParallelKwargs.comm_hook"
            )
        wrapper = DDPCommunicationHookType.parse(
            self.comm_wrapper, "DistributedDataParallelKwargs.comm_wrapper"
        )
        self.comm_wrapper = wrapper
        if wrapper not in _WRAPPERS:
            raise ValueError(
                "DistributedDataParallelKwargs.comm_wrapper must be one of "
                f"{[w.value for w in _WRAPPERS]}; got {wrapper.value!r}. Use 'fp16' or 'bf16' "
                "to compress what comm_hook sends."
            )
        if wrapper is not DDPCommunicationHookType.NO and self.comm_hook == "no":
            raise ValueError(
                f"DistributedDataParallelKwargs.comm_wrapper={wrapper.value!r} wraps a hook, but "
                "comm_hook is 'no'. Set comm_hook (e.g. 'power_sgd'), or use comm_hook="
                f"{wrapper.value!r} alone to compress the plain all-reduce."
            )
        if self.comm_state_option and self.comm_hook in _NO_STATE:
            raise ValueError(
                "DistributedDataParallelKwargs.comm_state_option configures the state of a "
                f"PowerSGD hook or of a hook function; comm_hook is {str(self.comm_hook)!r} "
                f"(stateless) and comm_state_option={self.comm_state_option!r}. Remove "
                "comm_state_option or choose comm_hook='power_sgd' / 'batched_power_sgd'."
            )

    def to_kwargs(self) -> dict[str, Any]:
        """The DDP constructor arguments that differ from their defaults."""
        kwargs = super().to_kwargs()
        for name in ("comm_hook", "comm_wrapper", "comm_state_option"):
            kwargs.pop(name, None)
        return kwargs

    def register_comm_hook(self, model: Any) -> None:
        """Register the configured hook (wrapped by ``comm_wrapper``) on a DDP ``model``.

        Args:
            model: A ``torch.nn.parallel.DistributedDataParallel`` module.
        """
        if self.comm_hook == "no":
            return
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

        options = dict(self.comm_state_option)
        state: Any = None
        if callable(self.comm_hook):
            hook: Any = self.comm_hook
            state_cls = options.pop("state_class", None)
            if state_cls is not None:
                state = state_cls(**options)
            elif options:
                raise ValueError(
                    "DistributedDataParallelKwargs.comm_state_option for a hook function needs "
                    f"'state_class' (the class its other entries build); got {sorted(options)}. "
                    "Add state_class=<class> or remove comm_state_option."
                )
        else:
            hooks: dict[Any, Any] = {
                DDPCommunicationHookType.FP16: default_hooks.fp16_compress_hook,
                DDPCommunicationHookType.BF16: default_hooks.bf16_compress_hook,
                DDPCommunicationHookType.POWER_SGD: powerSGD_hook.powerSGD_hook,
                DDPCommunicationHookType.BATCHED_POWER_SGD: powerSGD_hook.batched_powerSGD_hook,
            }
            hook = hooks[self.comm_hook]
            if self.comm_hook is DDPCommunicationHookType.BATCHED_POWER_SGD:
                _check_batched_power_sgd(powerSGD_hook)
            if self.comm_hook not in _NO_STATE:
                state = powerSGD_hook.PowerSGDState(process_group=None, **options)
        if self.comm_wrapper == DDPCommunicationHookType.FP16:
            hook = default_hooks.fp16_compress_wrapper(hook)
        elif self.comm_wrapper == DDPCommunicationHookType.BF16:
            hook = default_hooks.bf16_compress_wrapper(hook)
        model.register_comm_hook(state=state, hook=hook)


def _check_batched_power_sgd(module: Any) -> None:
    """Refuse torch's batched PowerSGD hook where it cannot run: some torch releases (2.13)
    hand its 2-D low-rank matrix to an orthogonalisation that accepts only 3-D batches, so
    every backward would fail with a bare ``AssertionError``."""
    import torch

    orthogonalize = getattr(module, "_orthogonalize", None)
    if orthogonalize is None:
        return
    try:
        orthogonalize(torch.ones(2, 1))
    except AssertionError:
        raise ValueError(
            "DistributedDataParallelKwargs.comm_hook='batched_power_sgd' needs torch's "
            "batched_powerSGD_hook, which fails on every bucket in torch "
            f"{torch.__version__} (it passes a 2-D matrix where a 3-D batch is required). "
            "Use comm_hook='power_sgd' (per-tensor PowerSGD), or another torch release."
        ) from None


_WRAPPERS = (
    DDPCommunicationHookType.NO,
    DDPCommunicationHookType.FP16,
    DDPCommunicationHookType.BF16,
)
_NO_STATE = (DDPCommunicationHookType.FP16, DDPCommunicationHookType.BF16)


@dataclass
class GradScalerKwargs(KwargsHandler):
    """Arguments of ``torch.amp.GradScaler`` used for fp16 training."""

    init_scale: float = 65536.0
    """Initial loss scale."""
    growth_factor: float = 2.0
    """Factor applied to the scale after ``growth_interval`` steps without inf/nan."""
    backoff_factor: float = 0.5
    """Factor applied to the scale after a step with inf/nan gradients."""
    growth_interval: int = 2000
    """Number of clean steps between two growths of the scale."""
    enabled: bool = True
    """Whether the scaler is on."""


@dataclass
class InitProcessGroupKwargs(KwargsHandler):
    """Arguments of ``torch.distributed.init_process_group``."""

    backend: str | None = "nccl"
    """Backend on accelerators; on CPU accel always uses gloo whatever this says."""
    init_method: str | None = None
    """URL of the rendezvous (``env://`` when None)."""
    timeout: datetime.timedelta | None = None
    """How long collectives wait before failing (torch's default, 30 min, when None)."""


@dataclass
class ProfileKwargs(KwargsHandler):
    """Arguments of ``torch.profiler.profile`` used by ``Accelerator.profile``."""

    activities: list[Literal["cpu", "xpu", "mtia", "cuda", "hpu"]] | None = None
    """Which activities to record (default: CPU, plus CUDA when present)."""
    schedule_option: dict[str, int] | None = None
    """Arguments of ``torch.profiler.schedule`` (wait, warmup, active, repeat, skip_first)."""
    on_trace_ready: Any = None
    """Callable run when a trace is ready."""
    record_shapes: bool = False
    """Record input shapes of operators."""
    profile_memory: bool = False
    """Track tensor memory allocation."""
    with_stack: bool = False
    """Record source locations."""
    with_flops: bool = False
    """Estimate FLOPs of matrix multiplications and convolutions."""
    with_modules: bool = False
    """Record module hierarchy."""
    output_trace_dir: str | None = None
    """Folder where a Chrome trace (``trace_rank_<i>.json``) is written when profiling ends."""

    def build(self) -> Any:
        """Build the ``torch.profiler.profile`` object."""
        import torch

        names = self.activities or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
        table = {
            "cpu": torch.profiler.ProfilerActivity.CPU,
            "cuda": torch.profiler.ProfilerActivity.CUDA,
        }
        unknown = [a for a in names if a not in table]
        if unknown:
            raise ValueError(
                f"ProfileKwargs.activities must be among {sorted(table)} here; got {unknown}."
            )
        schedule = torch.profiler.schedule(**self.schedule_option) if self.schedule_option else None
        return torch.profiler.profile(
            activities=[table[a] for a in names],
            schedule=schedule,
            on_trace_ready=self.on_trace_ready,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            with_flops=self.with_flops,
            with_modules=self.with_modules,
        )
