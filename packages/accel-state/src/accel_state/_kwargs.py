"""Kwargs handlers: small dataclasses that customise how torch objects are built."""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field, fields
from typing import Any, Literal


class KwargsHandler:
    """Base of the kwargs dataclasses: ``to_kwargs`` returns only the fields that differ from
    their defaults, so that torch's own defaults apply to everything else."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as a dict (a deep copy)."""
        return copy.deepcopy({f.name: getattr(self, f.name) for f in fields(self)})  # type: ignore[arg-type]

    def to_kwargs(self) -> dict[str, Any]:
        """The fields whose value differs from the default."""
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
    """Arguments of ``torch.nn.parallel.DistributedDataParallel``."""

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
    comm_hook: Any = None
    """A DDP communication hook (e.g. ``torch.distributed.algorithms.ddp_comm_hooks...``)."""
    comm_state_option: dict[str, Any] = field(default_factory=dict)
    """Arguments of the state object of ``comm_hook``."""

    def to_kwargs(self) -> dict[str, Any]:
        """The DDP constructor arguments that differ from their defaults."""
        kwargs = super().to_kwargs()
        kwargs.pop("comm_hook", None)
        kwargs.pop("comm_state_option", None)
        return kwargs


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
