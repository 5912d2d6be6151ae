"""Megatron-LM objects of ``accel.utils.megatron_lm``: the config scheduler, the losses and
gathers over Megatron's data-parallel group, and the one import point of megatron-core.

megatron-core prints that Transformer Engine and Apex are missing when it is imported without
them; `import_megatron_core` hides exactly those warnings and nothing else.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch

from ..._core._optimizer_wrappers import AcceleratedOptimizer, AcceleratedScheduler

_TE_APEX = "Transformer Engine and Apex are not installed"


def import_megatron_core(name: str = "megatron.core.parallel_state") -> ModuleType:
    """Import a megatron-core module, hiding its notices about Transformer Engine / Apex.

    Raises:
        ImportError: naming the install command when megatron-core is missing.
    """
    import importlib

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_TE_APEX, category=UserWarning)
            import megatron.core  # noqa: F401 - the package of every module asked for

            return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if not str(err.name or "").startswith("megatron"):
            raise
        raise ImportError(
            f"Megatron-LM training needs megatron-core; got no module {err.name!r}. Install it "
            'with: pip install "accel-torch[megatron]"'
        ) from err


class MegatronLMDummyScheduler:
    """Stands for Megatron's learning-rate and weight-decay schedule in ``prepare``.

    ``prepare`` replaces it by megatron-core's ``OptimizerParamScheduler`` built from the
    plugin's schedule fields (``lr_decay_style``, ``lr_warmup_iters``, ``min_lr``,
    ``weight_decay_incr_style`` ...); the steps below fill ``train_iters`` and
    ``lr_warmup_iters`` when the plugin leaves them unset.

    Args:
        optimizer: The optimizer whose learning rate and weight decay are scheduled.
        total_num_steps: Optimizer steps of the whole run, over all data-parallel ranks.
        warmup_num_steps: Warmup steps, over all data-parallel ranks.
        **kwargs: Kept on the object (``kwargs``), as the reference does.
    """

    def __init__(
        self,
        optimizer: Any,
        total_num_steps: int | None = None,
        warmup_num_steps: int = 0,
        **kwargs: Any,
    ) -> None:
        self.optimizer = optimizer
        self.total_num_steps = total_num_steps
        self.warmup_num_steps = warmup_num_steps
        self.kwargs = kwargs


class MegatronLMSchedulerWrapper(AcceleratedScheduler):
    """Steps megatron-core's ``OptimizerParamScheduler`` by one iteration per real optimizer
    step (none while gradients accumulate or when the optimizer skipped its step).

    Args:
        scheduler: megatron-core's ``OptimizerParamScheduler``.
        optimizers: The prepared optimizers it follows.
        find_optimizers: Called at each step for the optimizers to follow, when they are
            prepared after the scheduler (within one ``prepare`` call).
    """

    def __init__(
        self,
        scheduler: Any,
        optimizers: list[AcceleratedOptimizer],
        *,
        find_optimizers: Callable[[], list[Any]] | None = None,
    ) -> None:
        super().__init__(scheduler, optimizers)
        self._find_optimizers = find_optimizers

    def step(self, *args: Any, **kwargs: Any) -> None:
        if not self.gradient_state.sync_gradients:
            return
        if self._find_optimizers is not None:
            self.optimizers = self._find_optimizers()
        if any(getattr(opt, "step_was_skipped", False) for opt in self.optimizers):
            return
        self.scheduler.step(increment=1)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # megatron-core adds the saved step count to the current one: restart from 0 so that
        # the schedule resumes where it was saved.
        self.scheduler.num_steps = 0
        self.scheduler.load_state_dict(state_dict)

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.scheduler.optimizer.param_groups]

    def get_lr(self) -> Any:
        return self.get_last_lr()


def build_param_scheduler(plugin: Any, dummy: MegatronLMDummyScheduler) -> Any:
    """megatron-core's ``OptimizerParamScheduler`` for ``dummy.optimizer``, in iterations.

    Raises:
        ValueError: when neither the plugin nor the dummy scheduler gives the run's length.
    """
    if plugin.train_iters is None and dummy.total_num_steps is None:
        raise ValueError(
            "MegatronLMDummyScheduler needs the run's length; got total_num_steps=None and "
            "MegatronLMPlugin.train_iters=None. Pass total_num_steps=... or set train_iters."
        )
    plugin.set_scheduler_args(dummy)
    module = import_megatron_core("megatron.core.optimizer_param_scheduler")
    optimizer = dummy.optimizer
    if isinstance(optimizer, AcceleratedOptimizer):
        optimizer = optimizer.optimizer
    defaults = optimizer.defaults
    decay = int(plugin.lr_decay_iters or plugin.train_iters)
    warmup = plugin.lr_warmup_iters
    if plugin.lr_warmup_fraction is not None:
        warmup = int(plugin.lr_warmup_fraction * decay)
    weight_decay = float(defaults.get("weight_decay", 0.0))
    start_wd = plugin.start_weight_decay
    end_wd = plugin.end_weight_decay
    return module.OptimizerParamScheduler(
        optimizer,
        init_lr=0.0,
        max_lr=float(defaults["lr"]),
        min_lr=float(plugin.min_lr),
        lr_warmup_steps=int(warmup or 0),
        lr_decay_steps=decay,
        lr_decay_style=plugin.lr_decay_style,
        start_wd=weight_decay if start_wd is None else float(start_wd),
        end_wd=weight_decay if end_wd is None else float(end_wd),
        wd_incr_steps=int(plugin.train_iters),
        wd_incr_style=plugin.weight_decay_incr_style,
    )


def _data_parallel_group() -> Any:
    parallel_state = import_megatron_core()
    return parallel_state.get_data_parallel_group()


def avg_losses_across_data_parallel_group(losses: Sequence[torch.Tensor]) -> torch.Tensor:
    """Average each loss over Megatron's data-parallel group (for logging).

    Args:
        losses: Scalar losses of this rank.

    Returns:
        A 1-D tensor: the mean of each loss over the data-parallel ranks.
    """
    averaged = torch.cat([loss.clone().detach().view(1) for loss in losses])
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        group = _data_parallel_group()
        torch.distributed.all_reduce(averaged, group=group)
        averaged = averaged / torch.distributed.get_world_size(group=group)
    return averaged


def gather_across_data_parallel_groups(tensor: Any) -> Any:
    """Concatenate, along the first dimension, the tensors of every data-parallel rank
    (recursively in lists, tuples and dicts; scalars become 1-element tensors)."""
    from accel_collectives import recursively_apply

    group = _data_parallel_group()

    def gather_one(value: torch.Tensor) -> torch.Tensor:
        if value.ndim == 0:
            value = value.clone()[None]
        parts = [
            torch.empty_like(value) for _ in range(torch.distributed.get_world_size(group=group))
        ]
        torch.distributed.all_gather(parts, value.contiguous(), group=group)
        return torch.cat(parts, dim=0)

    return recursively_apply(gather_one, tensor, error_on_other_type=True)


__all__ = [
    "MegatronLMDummyScheduler",
    "MegatronLMSchedulerWrapper",
    "avg_losses_across_data_parallel_group",
    "gather_across_data_parallel_groups",
    "import_megatron_core",
]
