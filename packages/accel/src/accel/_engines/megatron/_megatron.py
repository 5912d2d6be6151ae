"""Megatron-LM on megatron-core: model-parallel groups from ``parallel_state`` over the run's
process group, data parallelism over Megatron's data-parallel group, gradient clipping, and
megatron-core's learning-rate / weight-decay schedule.

What runs where (megatron-core 0.16 / 0.19):

- On CPU (gloo) and CUDA: the groups (``initialize_model_parallel``), tensor-parallel degree 1
  with data parallelism (``DistributedDataParallel`` over ``get_data_parallel_group()``),
  ``MegatronLMDummyScheduler`` -> ``OptimizerParamScheduler``, the train steps,
  ``save_state`` / ``load_state``.
- On CUDA only: a tensor-parallel degree > 1, for a model built from megatron-core's
  tensor-parallel layers after the ``Accelerator`` (which forms the groups then); gradients
  are clipped by the norm over the model-parallel group and each tensor-parallel rank saves
  its own shard. (megatron-core's own ``DistributedDataParallel`` allocates its gradient
  buffers with ``torch.cuda.current_device()``: data parallelism uses torch's, over
  megatron-core's data-parallel group, on every device.)

Settings that belong to Megatron-LM's own model builder, pipeline schedules or optimizer (which
this engine does not run) are refused when they leave their defaults, instead of being ignored.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from accel_state import MegatronLMPlugin

from .._ddp import DDPEngine
from ._megatron_objects import (
    MegatronLMDummyScheduler,
    MegatronLMSchedulerWrapper,
    build_param_scheduler,
    import_megatron_core,
)

if TYPE_CHECKING:
    from .._context import EngineContext

# Plugin fields this engine does not act on -> the default it requires.
_NOT_RUN: dict[str, Any] = {
    "pp_degree": 1,
    "num_micro_batches": 1,
    "sequence_parallelism": False,
    "recompute_activations": False,
    "use_distributed_optimizer": False,
    "use_custom_fsdp": False,
    "optimizer_cpu_offload": False,
    "overlap_cpu_optimizer_d2h_h2d": False,
    "use_precision_aware_optimizer": False,
    "decoder_last_pipeline_num_layers": None,
    "pipeline_model_parallel_split_rank": None,
    "num_layers_per_virtual_pipeline_stage": None,
    "recompute_granularity": "full",
    "recompute_method": "uniform",
    "recompute_num_layers": 1,
    "attention_backend": True,
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
    "attention_softmax_in_fp32": True,
    "calculate_per_token_loss": True,
    "use_rotary_position_embeddings": True,
    "context_parallel_size": 1,
    "expert_model_parallel_size": 1,
    "expert_tensor_parallel_size": 1,
    "consumed_samples": None,
    "no_wd_decay_cond": None,
    "scale_lr_cond": None,
    "lr_mult": 1.0,
    "tensorboard_dir": None,
    "eval_iters": 100,
    "eval_interval": 1000,
    "custom_model_provider_function": None,
    "custom_prepare_model_function": None,
    "custom_megatron_datasets_provider_function": None,
    "no_save_optim": False,
    "no_load_optim": False,
}
_TRAIN_STEP_ARGS = ("eos_token_id", "reset_position_ids", "reset_attention_mask")
"""Keys of ``other_megatron_args`` the train steps read."""
MODEL_FILE = "megatron_model_{}_tp_rank_{:02d}.safetensors"
OPTIMIZER_FILE = "megatron_optimizer_{}_tp_rank_{:02d}.bin"


def check_plugin(plugin: MegatronLMPlugin) -> None:
    """Refuse the settings this engine would not act on (called by the first ``prepare``).

    Raises:
        NotImplementedError: listing each such setting, its value and its default.
    """
    unused = {
        name: getattr(plugin, name)
        for name, default in _NOT_RUN.items()
        if getattr(plugin, name) != default
    }
    extra = sorted(set(plugin.other_megatron_args or {}) - set(_TRAIN_STEP_ARGS))
    if extra:
        unused["other_megatron_args"] = extra
    if unused:
        wanted = {
            name: _NOT_RUN.get(name, f"keys among {list(_TRAIN_STEP_ARGS)}") for name in unused
        }
        raise NotImplementedError(
            "accel's Megatron-LM engine trains the model passed to prepare over megatron-core's "
            "process groups (data parallelism; tensor parallelism on CUDA); these settings "
            "belong to Megatron-LM's own model builder, pipeline schedules or optimizer, which "
            f"it does not run, so they would be ignored; got {unused}. Leave them at {wanted}."
        )


class MegatronLMEngine(DDPEngine):
    """Data parallelism over megatron-core's data-parallel group; tensor-parallel shards are
    saved per rank."""

    def __init__(self, context: EngineContext) -> None:
        super().__init__(context)
        self.plugin: MegatronLMPlugin = context.state.megatron_lm_plugin
        tp = int(self.plugin.tp_degree or 1)
        self.replicated_states = tp == 1
        self.plugin.set_mixed_precision(context.mixed_precision)
        if tp > 1 and context.device.type == "cuda":
            # Tensor-parallel layers need the groups when the user builds the model.
            self.parallel_state()

    # ------------------------------------------------------------------ groups
    def _check_layout(self) -> None:
        tp = int(self.plugin.tp_degree or 1)
        if self.context.device.type == "cpu" and tp > 1:
            raise NotImplementedError(
                "megatron-core's tensor-parallel communication allocates its buffers on "
                f"torch.cuda.current_device(), so it needs CUDA devices; got tp_degree={tp} on CPU. Use tp_degree=1 on CPU (data parallelism "
                "over the processes), or run on CUDA GPUs."
            )
        if self.context.num_processes % tp:
            raise ValueError(
                f"the number of processes must be a multiple of tp_degree; got "
                f"{self.context.num_processes} processes and tp_degree={tp}. Launch a multiple "
                f"of {tp} processes or change tp_degree."
            )

    def parallel_state(self) -> Any:
        """megatron-core's ``parallel_state``, initialised over the run's process group."""
        parallel_state = import_megatron_core()
        if not parallel_state.model_parallel_is_initialized():
            check_plugin(self.plugin)
            self._check_layout()
            parallel_state.initialize_model_parallel(
                tensor_model_parallel_size=int(self.plugin.tp_degree or 1),
                pipeline_model_parallel_size=1,
            )
        return parallel_state

    def data_parallel_rank(self) -> tuple[int, int]:
        state = self.parallel_state()
        return state.get_data_parallel_world_size(), state.get_data_parallel_rank()

    # ------------------------------------------------------------------ prepare
    def prepare_all(self, objects: Sequence[object]) -> dict[int, object]:
        """Replace a ``MegatronLMDummyScheduler`` by megatron-core's schedule of its optimizer."""
        prepared: dict[int, Any] = {}
        for index, obj in enumerate(objects):
            if not isinstance(obj, MegatronLMDummyScheduler):
                continue
            world, _ = self.data_parallel_rank()
            loaders = self.context.prepared.dataloaders
            micro = getattr(loaders[0], "batch_size", None) if loaders else None
            self.plugin.set_training_args(int(micro or 1), world)
            self.plugin.set_optimizer_type(_raw(obj.optimizer))
            wrapper = MegatronLMSchedulerWrapper(
                build_param_scheduler(self.plugin, obj),
                [],
                find_optimizers=partial(_prepared_optimizers, self, obj),
            )
            self.context.prepared.add_scheduler(wrapper)
            prepared[index] = wrapper
        return prepared

    def wrap_model(self, model: torch.nn.Module, evaluation_mode: bool) -> torch.nn.Module:
        state = self.parallel_state()
        if evaluation_mode or not any(p.requires_grad for p in model.parameters()):
            return model
        if state.get_data_parallel_world_size() == 1:
            return model
        device = self.context.device
        device_ids = [device.index] if device.type != "cpu" and device.index is not None else None
        return torch.nn.parallel.DistributedDataParallel(
            model, device_ids=device_ids, process_group=state.get_data_parallel_group()
        )

    def adapt_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Clip gradients to ``gradient_clipping`` before each optimizer step."""
        norm = float(self.plugin.gradient_clipping or 0)
        if norm <= 0:
            return optimizer
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if self.replicated_states:

            def clip(*_: Any) -> None:
                torch.nn.utils.clip_grad_norm_(params, norm)

        else:  # tensor-parallel shards: the norm of the whole model, over the model-parallel group
            clip_grads = import_megatron_core("megatron.core.optimizer.clip_grads")
            tensor_parallel = import_megatron_core("megatron.core.tensor_parallel")
            group = self.parallel_state().get_model_parallel_group()

            def clip(*_: Any) -> None:
                with_grad = [p for p in params if p.grad is not None]
                counted = [
                    p.grad
                    for p in with_grad
                    if tensor_parallel.param_is_not_tensor_parallel_duplicate(p)
                ]
                total = clip_grads.get_grad_norm_fp32(counted, grad_stats_parallel_group=group)
                clip_grads.clip_grad_by_total_norm_fp32(with_grad, norm, total)

        optimizer.register_step_pre_hook(clip)
        return optimizer

    # ------------------------------------------------------------------ checkpoints
    def _tp_rank(self) -> int:
        return int(self.parallel_state().get_tensor_model_parallel_rank())

    def _writes(self) -> bool:
        return int(self.parallel_state().get_data_parallel_rank()) == 0

    def save_model_state(self, model: torch.nn.Module, output_dir: str, index: int) -> bool:
        if self.replicated_states:
            return False
        if self._writes():
            from safetensors.torch import save_file

            state = {
                k: v.detach().contiguous().cpu() for k, v in self.unwrap(model).state_dict().items()
            }
            save_file(state, os.path.join(output_dir, MODEL_FILE.format(index, self._tp_rank())))
        return True

    def load_model_state(
        self, model: torch.nn.Module, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> bool:
        path = os.path.join(input_dir, MODEL_FILE.format(index, self._tp_rank()))
        if self.replicated_states or not os.path.exists(path):
            return False
        from safetensors.torch import load_file

        self.unwrap(model).load_state_dict(load_file(path))
        return True

    def save_optimizer_state(
        self, optimizer: torch.optim.Optimizer, output_dir: str, index: int
    ) -> bool:
        if self.replicated_states:
            return False
        if self._writes():
            path = os.path.join(output_dir, OPTIMIZER_FILE.format(index, self._tp_rank()))
            torch.save(optimizer.state_dict(), path)
        return True

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        input_dir: str,
        index: int,
        *,
        trust_pickles: bool = False,
    ) -> bool:
        path = os.path.join(input_dir, OPTIMIZER_FILE.format(index, self._tp_rank()))
        if self.replicated_states or not os.path.exists(path):
            return False
        from accel_bigmodel import safe_torch_load

        optimizer.load_state_dict(safe_torch_load(path, trust_pickles=trust_pickles))
        return True


def _raw(optimizer: Any) -> Any:
    return getattr(optimizer, "optimizer", optimizer)


def _prepared_optimizers(engine: MegatronLMEngine, dummy: MegatronLMDummyScheduler) -> list[Any]:
    raw = _raw(dummy.optimizer)
    return [opt for opt in engine.context.prepared.optimizers if _raw(opt) is raw] or [
        dummy.optimizer
    ]


__all__ = [
    "MegatronLMEngine",
    "check_plugin",
]
