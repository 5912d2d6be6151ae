"""``MegatronLMPlugin``: the settings of a Megatron-LM run, and their translation into the
argument names of Megatron (``megatron_lm_default_args``).

The plugin only holds and translates settings; it imports nothing from ``megatron``. The
Megatron-LM engine of ``accel`` builds process groups, wrappers and schedulers from it. Every
field the launcher can set and left at ``None`` is read from the ``ACCEL_MEGATRON_LM_*``
variables of ``accel_state.environment_variables`` (or the reference's ``MEGATRON_LM_*``), then
from its default.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import environment_variables as env

# field -> (variable, default when neither the field nor the variable is set)
_FROM_ENV: dict[str, tuple[str, Any]] = {
    "tp_degree": (env.ACCEL_MEGATRON_LM_TP_DEGREE, 1),
    "pp_degree": (env.ACCEL_MEGATRON_LM_PP_DEGREE, 1),
    "use_custom_fsdp": (env.ACCEL_MEGATRON_LM_USE_CUSTOM_FSDP, False),
    "no_load_optim": (env.ACCEL_MEGATRON_LM_NO_LOAD_OPTIM, False),
    "eod_mask_loss": (env.ACCEL_MEGATRON_LM_EOD_MASK_LOSS, False),
    "no_save_optim": (env.ACCEL_MEGATRON_LM_NO_SAVE_OPTIM, False),
    "optimizer_cpu_offload": (env.ACCEL_MEGATRON_LM_OPTIMIZER_CPU_OFFLOAD, False),
    "overlap_cpu_optimizer_d2h_h2d": (env.ACCEL_MEGATRON_LM_OVERLAP_CPU_OPTIMIZER_D2H_H2D, False),
    "use_precision_aware_optimizer": (env.ACCEL_MEGATRON_LM_USE_PRECISION_AWARE_OPTIMIZER, False),
    "decoder_last_pipeline_num_layers": (
        env.ACCEL_MEGATRON_LM_DECODER_LAST_PIPELINE_NUM_LAYERS,
        None,
    ),
    "num_micro_batches": (env.ACCEL_MEGATRON_LM_NUM_MICRO_BATCHES, 1),
    "gradient_clipping": (env.ACCEL_MEGATRON_LM_GRADIENT_CLIPPING, 1.0),
    "recompute_activations": (env.ACCEL_MEGATRON_LM_RECOMPUTE_ACTIVATIONS, False),
    "use_distributed_optimizer": (env.ACCEL_MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER, False),
    "sequence_parallelism": (env.ACCEL_MEGATRON_LM_SEQUENCE_PARALLELISM, False),
    "recompute_granularity": (env.ACCEL_MEGATRON_LM_RECOMPUTE_GRANULARITY, "full"),
    "recompute_method": (env.ACCEL_MEGATRON_LM_RECOMPUTE_METHOD, "uniform"),
    "recompute_num_layers": (env.ACCEL_MEGATRON_LM_RECOMPUTE_NUM_LAYERS, 1),
    "attention_backend": (env.ACCEL_MEGATRON_LM_ATTENTION_BACKEND, True),
    "expert_model_parallel_size": (env.ACCEL_MEGATRON_LM_EXPERT_MODEL_PARALLEL_SIZE, 1),
    "context_parallel_size": (env.ACCEL_MEGATRON_LM_CONTEXT_PARALLEL_SIZE, 1),
    "attention_dropout": (env.ACCEL_MEGATRON_LM_ATTENTION_DROPOUT, 0.0),
    "hidden_dropout": (env.ACCEL_MEGATRON_LM_HIDDEN_DROPOUT, 0.0),
    "attention_softmax_in_fp32": (env.ACCEL_MEGATRON_LM_ATTENTION_SOFTMAX_IN_FP32, True),
    "expert_tensor_parallel_size": (env.ACCEL_MEGATRON_LM_EXPERT_TENSOR_PARALLEL_SIZE, 1),
    "calculate_per_token_loss": (env.ACCEL_MEGATRON_LM_CALCULATE_PER_TOKEN_LOSS, True),
    "use_rotary_position_embeddings": (
        env.ACCEL_MEGATRON_LM_USE_ROTARY_POSITION_EMBEDDINGS,
        True,
    ),
}

# field -> Megatron argument, copied into ``megatron_lm_default_args`` at construction.
_ARGUMENTS = {
    "tp_degree": "tensor_model_parallel_size",
    "pp_degree": "pipeline_model_parallel_size",
    "pipeline_model_parallel_split_rank": "pipeline_model_parallel_split_rank",
    "num_layers_per_virtual_pipeline_stage": "num_layers_per_virtual_pipeline_stage",
    "DDP_impl": "DDP_impl",
    "use_distributed_optimizer": "use_distributed_optimizer",
    "sequence_parallelism": "sequence_parallel",
    "gradient_clipping": "clip_grad",
    "num_micro_batches": "num_micro_batches",
    "consumed_samples": "consumed_samples",
    "no_wd_decay_cond": "no_wd_decay_cond",
    "scale_lr_cond": "scale_lr_cond",
    "lr_mult": "lr_mult",
    "megatron_dataset_flag": "megatron_dataset_flag",
    "eval_iters": "eval_iters",
    "eval_interval": "eval_interval",
    **{
        name: name
        for name in _FROM_ENV
        if name
        not in (
            "tp_degree",
            "pp_degree",
            "num_micro_batches",
            "gradient_clipping",
            "recompute_activations",
            "use_distributed_optimizer",
            "sequence_parallelism",
        )
    },
}

_SCHEDULER_ARGUMENTS = (
    "train_iters",
    "lr_warmup_iters",
    "train_samples",
    "lr_warmup_samples",
    "lr_decay_iters",
    "lr_decay_samples",
    "lr_warmup_fraction",
    "lr_decay_style",
    "weight_decay_incr_style",
    "start_weight_decay",
    "end_weight_decay",
    "min_lr",
)

_LOGGING_OPTIONS = (
    "log_params_norm",
    "log_num_zeros_in_grad",
    "log_throughput",
    "log_progress",
    "log_timers_to_tensorboard",
    "log_validation_ppl_to_tensorboard",
    "log_memory_to_tensorboard",
    "log_world_size_to_tensorboard",
    "log_loss_scale_to_tensorboard",
    "log_batch_size_to_tensorboard",
    "log_learning_rate_to_tensorboard",
)
"""Megatron's logging switches, all turned on by ``set_all_logging_options``."""

_SCHEDULE_STYLES = ("constant", "linear", "cosine")


@dataclass
class MegatronLMPlugin:
    """Settings of a Megatron-LM run: tensor, pipeline, sequence and data parallelism,
    activation recomputation, the distributed optimizer, and the learning-rate schedule.

    After construction ``megatron_lm_default_args`` holds the settings under Megatron's argument
    names; ``set_network_size_args``, ``set_mixed_precision``, ``set_training_args``,
    ``set_optimizer_type`` and ``set_scheduler_args`` add what the prepared objects decide.
    """

    tp_degree: int | None = None
    """Tensor-parallel degree (default: ``ACCEL_MEGATRON_LM_TP_DEGREE``, else 1)."""
    pp_degree: int | None = None
    """Pipeline-parallel degree (default: ``ACCEL_MEGATRON_LM_PP_DEGREE``, else 1)."""
    use_custom_fsdp: bool | None = None
    """Use Megatron's own FSDP (default False)."""
    overlap_cpu_optimizer_d2h_h2d: bool | None = None
    """Overlap the CPU optimizer step with gradient and parameter copies (default False)."""
    no_load_optim: bool | None = None
    """Do not load the optimizer state from a checkpoint (default False)."""
    eod_mask_loss: bool | None = None
    """Mask the loss at end-of-document tokens (default False)."""
    no_save_optim: bool | None = None
    """Do not save the optimizer state (default False)."""
    optimizer_cpu_offload: bool | None = None
    """Keep the optimizer states on the CPU (default False)."""
    use_precision_aware_optimizer: bool | None = None
    """Use Megatron's precision-aware optimizer (default False)."""
    decoder_last_pipeline_num_layers: int | None = None
    """Layers of the last pipeline stage (None: an even split)."""
    recompute_granularity: str | None = None
    """Recomputation granularity: ``"full"`` (default) or ``"selective"``."""
    recompute_method: str | None = None
    """Recomputation method: ``"uniform"`` (default) or ``"block"``."""
    recompute_num_layers: int | None = None
    """Layers recomputed per unit (default 1)."""
    attention_backend: bool | None = None
    """Let Megatron choose the attention backend (default True)."""
    expert_model_parallel_size: int | None = None
    """Expert-parallel size (default 1)."""
    context_parallel_size: int | None = None
    """Context-parallel size (default 1; the reference writes 2, see the migration guide)."""
    attention_dropout: float | None = None
    """Dropout of the attention probabilities (default 0.0)."""
    hidden_dropout: float | None = None
    """Dropout of the hidden states (default 0.0)."""
    attention_softmax_in_fp32: bool | None = None
    """Compute the attention softmax in fp32 (default True)."""
    expert_tensor_parallel_size: int | None = None
    """Tensor-parallel size inside the experts (default 1)."""
    calculate_per_token_loss: bool | None = None
    """Average the loss over tokens (default True)."""
    use_rotary_position_embeddings: bool | None = None
    """Use rotary position embeddings (default True)."""
    num_micro_batches: int | None = None
    """Micro-batches per step (default 1)."""
    gradient_clipping: float | None = None
    """Clip gradients to this global L2 norm; 0 turns clipping off (default 1.0)."""
    sequence_parallelism: bool | None = None
    """Shard activations along the sequence over tensor-parallel ranks (default False)."""
    recompute_activations: bool | None = None
    """Selective activation recomputation (default False)."""
    use_distributed_optimizer: bool | None = None
    """Shard optimizer states over data-parallel ranks (default False)."""
    pipeline_model_parallel_split_rank: int | None = None
    """Pipeline rank where the encoder and the decoder are split."""
    num_layers_per_virtual_pipeline_stage: int | None = None
    """Layers per virtual pipeline stage (interleaved schedule)."""
    is_train_batch_min: str = True  # type: ignore[assignment]
    """With train and eval dataloaders, take the smaller batch as micro-batch size (else the
    train one). Typed as in the reference."""
    train_iters: int | None = None
    """Total training iterations (``MegatronLMDummyScheduler`` needs this or ``train_samples``;
    default: derived from the scheduler)."""
    train_samples: int | None = None
    """Total training samples."""
    weight_decay_incr_style: str = "constant"
    """How weight decay moves from start to end: ``constant``, ``linear`` or ``cosine``."""
    start_weight_decay: float | None = None
    """Weight decay at the start."""
    end_weight_decay: float | None = None
    """Weight decay at the end."""
    lr_decay_style: str = "linear"
    """Learning-rate decay: ``constant``, ``linear`` or ``cosine``."""
    lr_decay_iters: int | None = None
    """Iterations of learning-rate decay (None: ``train_iters``)."""
    lr_decay_samples: int | None = None
    """Samples of learning-rate decay (None: ``train_samples``)."""
    lr_warmup_iters: int | None = None
    """Iterations of linear warmup."""
    lr_warmup_samples: int | None = None
    """Samples of linear warmup."""
    lr_warmup_fraction: float | None = None
    """Fraction of the decay iterations (or samples) spent warming up."""
    min_lr: float = 0
    """Smallest learning rate of the schedule."""
    consumed_samples: list[int] | None = None
    """Samples already consumed by each dataloader passed to ``prepare`` (train, eval, test);
    shorter lists are padded with zeros."""
    no_wd_decay_cond: Callable[..., Any] | None = None
    """``(name, param) -> bool``: parameters without weight decay."""
    scale_lr_cond: Callable[..., Any] | None = None
    """``(name, param) -> bool``: parameters whose learning rate is multiplied by ``lr_mult``."""
    lr_mult: float = 1.0
    """Learning-rate multiplier of the parameters selected by ``scale_lr_cond``."""
    megatron_dataset_flag: bool = False
    """The data is in Megatron's indexed dataset format."""
    seq_length: int | None = None
    """Maximum sequence length."""
    encoder_seq_length: int | None = None
    """Maximum encoder sequence length."""
    decoder_seq_length: int | None = None
    """Maximum decoder sequence length."""
    tensorboard_dir: str | None = None
    """Folder of TensorBoard logs."""
    set_all_logging_options: bool = False
    """Turn on every Megatron logging option (with ``tensorboard_dir``)."""
    eval_iters: int = 100
    """Iterations of one evaluation."""
    eval_interval: int = 1000
    """Iterations between evaluations."""
    return_logits: bool = False
    """Return the logits from the model as well as the loss."""
    custom_train_step_class: Any | None = None
    """A subclass of ``AbstractTrainStep`` used instead of the GPT / BERT / T5 ones."""
    custom_train_step_kwargs: dict[str, Any] | None = None
    """Keyword arguments of ``custom_train_step_class``."""
    custom_model_provider_function: Callable[..., Any] | None = None
    """Builds the model (``pre_process``, ``post_process`` keyword arguments)."""
    custom_prepare_model_function: Callable[..., Any] | None = None
    """Prepares the model from ``custom_model_provider_function``."""
    custom_megatron_datasets_provider_function: Callable[..., Any] | None = None
    """Builds the train / validation / test datasets from their sample counts."""
    custom_get_batch_function: Callable[..., Any] | None = None
    """Reads one batch from a data iterator (replaces the train step's own)."""
    custom_loss_function: Callable[..., Any] | None = None
    """Computes the loss from the model output (replaces the train step's own)."""
    other_megatron_args: dict[str, Any] | None = None
    """Other Megatron arguments, copied last into ``megatron_lm_default_args``."""

    def __post_init__(self) -> None:
        for name, (variable, default) in _FROM_ENV.items():
            if getattr(self, name) is None:
                setattr(self, name, env.read_env(variable, default))
        self._check()
        self.DDP_impl = (
            "local" if int(self.pp_degree or 1) > 1 or self.use_distributed_optimizer else "torch"
        )
        """Megatron's DDP implementation: ``local`` with pipeline stages or a distributed
        optimizer, else ``torch``."""
        if self.consumed_samples is not None:
            self.consumed_samples = [*self.consumed_samples, 0, 0, 0][
                : max(3, len(self.consumed_samples))
            ]
        self.megatron_lm_default_args: dict[str, Any] = {
            argument: getattr(self, name) for name, argument in _ARGUMENTS.items()
        }
        """The settings under Megatron's argument names."""
        self.megatron_lm_default_args["recompute_activations"] = self.recompute_activations
        if self.tensorboard_dir is not None:
            self.megatron_lm_default_args["tensorboard_dir"] = self.tensorboard_dir
            if self.set_all_logging_options:
                self.set_tensorboard_logging_options()
        if self.other_megatron_args is not None:
            self.megatron_lm_default_args.update(self.other_megatron_args)

    def _check(self) -> None:
        for name in (
            "tp_degree",
            "pp_degree",
            "num_micro_batches",
            "context_parallel_size",
            "expert_model_parallel_size",
            "expert_tensor_parallel_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"MegatronLMPlugin.{name} must be an integer >= 1; got {value!r}. Pass e.g. "
                    f"{name}=1 (no splitting) or 2."
                )
        if float(self.gradient_clipping or 0) < 0:
            raise ValueError(
                "MegatronLMPlugin.gradient_clipping is the largest global gradient norm kept (0 "
                f"turns clipping off); got {self.gradient_clipping!r}. Pass e.g. 1.0, or 0."
            )
        for name in ("lr_decay_style", "weight_decay_incr_style"):
            if getattr(self, name) not in _SCHEDULE_STYLES:
                raise ValueError(
                    f"MegatronLMPlugin.{name} must be one of {', '.join(_SCHEDULE_STYLES)}; got "
                    f"{getattr(self, name)!r}. Pick one of these."
                )

    def set_network_size_args(self, model: Any, batch_data: dict[str, Any] | None = None) -> None:
        """Fill the model-shape arguments from ``model.config`` (a transformers config).

        Raises:
            ValueError: when no parser of ``MODEL_CONFIGS_TO_MEGATRON_PARSERS`` matches the
                model type.
        """
        from ._megatron_parsers import MODEL_CONFIGS_TO_MEGATRON_PARSERS

        model_type = str(model.config.model_type).lower()
        for name, parser in MODEL_CONFIGS_TO_MEGATRON_PARSERS.items():
            if name in model_type:
                parser(self, model, batch_data)
                return
        raise ValueError(
            f"MegatronLMPlugin has no config parser for model type {model_type!r}; known: "
            f"{sorted(MODEL_CONFIGS_TO_MEGATRON_PARSERS)}. Register one with "
            "@add_model_config_to_megatron_parser('<model_type>')."
        )

    def set_mixed_precision(self, mixed_precision: str) -> None:
        """Record the run's mixed precision (bf16 also selects the local DDP implementation)."""
        if mixed_precision == "fp16":
            self.megatron_lm_default_args["fp16"] = True
        elif mixed_precision == "bf16":
            self.megatron_lm_default_args["bf16"] = True
            self.DDP_impl = "local"
            self.megatron_lm_default_args["DDP_impl"] = self.DDP_impl

    def set_training_args(self, micro_batch_size: int, dp_degree: int) -> None:
        """Record the micro-batch size and data-parallel degree; the global batch follows."""
        self.data_parallel_size = dp_degree
        """Data-parallel degree of the run."""
        self.micro_batch_size = micro_batch_size
        """Batch size of one micro-batch on one process."""
        self.global_batch_size = dp_degree * micro_batch_size * int(self.num_micro_batches or 1)
        """Samples of one optimizer step over every process."""
        self.megatron_lm_default_args["data_parallel_size"] = self.data_parallel_size
        self.megatron_lm_default_args["micro_batch_size"] = self.micro_batch_size
        self.megatron_lm_default_args["global_batch_size"] = self.global_batch_size

    def set_optimizer_type(self, optimizer: Any) -> None:
        """Record the optimizer kind (Adam-like or SGD) and its hyper-parameters.

        Raises:
            ValueError: for an optimizer that is neither.
        """
        name = type(optimizer).__name__.lower()
        defaults = optimizer.defaults
        args = self.megatron_lm_default_args
        if "adam" in name:
            args["optimizer"] = "adam"
            args["adam_beta1"], args["adam_beta2"] = defaults["betas"][0], defaults["betas"][1]
            args["adam_eps"] = defaults["eps"]
        elif "sgd" in name:
            args["optimizer"] = "sgd"
            args["sgd_momentum"] = defaults["momentum"]
        else:
            raise ValueError(
                f"Megatron-LM trains with an Adam-like or an SGD optimizer; got "
                f"{type(optimizer).__name__}. Pass torch.optim.AdamW (or Adam) or SGD."
            )
        args["lr"] = defaults["lr"]
        args["weight_decay"] = defaults["weight_decay"]

    def set_scheduler_args(self, scheduler: Any) -> None:
        """Fill the schedule arguments; iterations come from a ``MegatronLMDummyScheduler``
        (its steps over the data-parallel degree) when the plugin does not set them."""
        dp = self.megatron_lm_default_args["data_parallel_size"]
        if self.train_iters is None:
            self.train_iters = scheduler.total_num_steps // dp
            if self.train_samples is not None:
                self.train_samples = None
                warnings.warn(
                    "MegatronLMPlugin.train_samples is dropped: train_iters comes from the "
                    "scheduler's total_num_steps. Set train_iters to choose.",
                    stacklevel=2,
                )
        if self.lr_warmup_iters is None:
            self.lr_warmup_iters = scheduler.warmup_num_steps // dp
            if self.lr_warmup_samples is not None:
                warnings.warn(
                    "MegatronLMPlugin.lr_warmup_samples is dropped: lr_warmup_iters comes from "
                    "the scheduler's warmup_num_steps. Set lr_warmup_iters to choose.",
                    stacklevel=2,
                )
            self.lr_warmup_samples = 0
        for name in _SCHEDULER_ARGUMENTS:
            self.megatron_lm_default_args[name] = getattr(self, name)

    def set_tensorboard_logging_options(self) -> None:
        """Turn on every Megatron logging option."""
        for name in _LOGGING_OPTIONS:
            self.megatron_lm_default_args[name] = True


__all__ = ["MegatronLMPlugin"]
