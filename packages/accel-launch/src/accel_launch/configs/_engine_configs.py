"""Typed sections of the config file: dynamo, DeepSpeed, FSDP and Megatron-LM options.

Each section is a dataclass whose field names are the keys of the section in the file and the
names of the matching ``accel launch`` flags. A field left at ``None`` is "not set": nothing is
sent to the processes and the engine applies its own default.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any, ClassVar

from accel_state import DynamoBackend
from accel_state import environment_variables as env
from accel_state.environment_variables import (
    BACKWARD_PREFETCH,
    OFFLOAD_DEVICES,
    SHARDING_STRATEGIES,
    STATE_DICT_TYPES,
    WRAP_POLICIES,
    ZERO_STAGES,
    env_text,
)

from .._errors import ConfigError
from ._config_values import _choice, check_norm, coerce


@dataclass
class Section:
    """Shared behaviour of the typed sections."""

    variables: ClassVar[dict[str, str]] = {}
    """Field -> the variable of ``accel_state.environment_variables`` that carries it."""
    launcher_only: ClassVar[tuple[str, ...]] = ()
    """Fields read by the launcher itself, never sent to the processes."""
    switches: ClassVar[tuple[str, ...]] = ()
    """Boolean fields whose flag takes no value (``--use_parallelism_config``)."""

    @classmethod
    def keys(cls) -> list[str]:
        """The valid keys of this section."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, data: Any, section: str) -> Section:
        """Build and validate a section from the mapping in the file.

        Raises:
            ConfigError: for a key that is not one of `keys` (naming the closest valid
                key) or a value of the wrong type.
        """
        if data is None:
            data = {}
        if isinstance(data, Section):
            data = data.to_dict()
        if not isinstance(data, dict):
            raise ConfigError(
                f"{section} must be a mapping of settings; got {type(data).__name__}. "
                f"Write `{section}: {{key: value}}` with keys among {', '.join(cls.keys())}."
            )
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for key, value in data.items():
            if key not in fields:
                close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.5)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ConfigError(
                    f"{section}: unknown setting {key!r}.{hint} Valid settings: "
                    f"{', '.join(fields)}."
                )
            values[key] = coerce(value, str(fields[key].type), f"{section}.{key}")
        built = cls(**values)
        built.validate(section)
        return built

    def validate(self, section: str) -> None:
        """Check the values together; raise [`ConfigError`][accel_launch.ConfigError] with the rule and the fix."""

    def to_dict(self) -> dict[str, Any]:
        """The values that are set (what the file holds)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def environment(self) -> dict[str, str]:
        """Environment variables of the values that are set."""
        values = self.to_dict()
        return {
            variable: env_text(values[key])
            for key, variable in self.variables.items()
            if key in values
        }


env_value = env_text


@dataclass
class DynamoConfig(Section):
    """``torch.compile`` options (section ``dynamo_config``)."""

    variables: ClassVar[dict[str, str]] = {
        "dynamo_backend": env.ACCEL_DYNAMO_BACKEND,
        "dynamo_mode": env.ACCEL_DYNAMO_MODE,
        "dynamo_use_fullgraph": env.ACCEL_DYNAMO_USE_FULLGRAPH,
        "dynamo_use_dynamic": env.ACCEL_DYNAMO_USE_DYNAMIC,
        "dynamo_use_regional_compilation": env.ACCEL_DYNAMO_USE_REGIONAL_COMPILATION,
    }

    dynamo_backend: str | None = None
    """Compile backend (``no``, ``inductor``, ``eager``, ``aot_eager`` ...)."""
    dynamo_mode: str | None = None
    """Compile mode: ``default``, ``reduce-overhead``, ``max-autotune`` ..."""
    dynamo_use_fullgraph: bool | None = None
    """Refuse graph breaks."""
    dynamo_use_dynamic: bool | None = None
    """Compile with dynamic shapes."""
    dynamo_use_regional_compilation: bool | None = None
    """Compile each repeated block once instead of the whole model."""

    def validate(self, section: str) -> None:
        """Check the backend name."""
        if self.dynamo_backend is not None:
            try:
                self.dynamo_backend = DynamoBackend.parse(
                    self.dynamo_backend, f"{section}.dynamo_backend"
                ).value
            except ValueError as err:
                raise ConfigError(str(err)) from None


DEEPSPEED_LAUNCHERS = ("pdsh", "standard", "openmpi", "mvapich", "mpich", "impi", "slurm", "nossh")


@dataclass
class DeepSpeedConfig(Section):
    """DeepSpeed options (section ``deepspeed_config``; flags of the same names)."""

    variables: ClassVar[dict[str, str]] = {
        "deepspeed_config_file": env.ACCEL_DEEPSPEED_CONFIG_FILE,
        "zero_stage": env.ACCEL_DEEPSPEED_ZERO_STAGE,
        "offload_optimizer_device": env.ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE,
        "offload_param_device": env.ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE,
        "offload_optimizer_nvme_path": env.ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_NVME_PATH,
        "offload_param_nvme_path": env.ACCEL_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH,
        "gradient_accumulation_steps": env.ACCEL_GRADIENT_ACCUMULATION_STEPS,
        "gradient_clipping": env.ACCEL_GRADIENT_CLIPPING,
        "zero3_init_flag": env.ACCEL_DEEPSPEED_ZERO3_INIT_FLAG,
        "zero3_save_16bit_model": env.ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL,
    }
    launcher_only: ClassVar[tuple[str, ...]] = (
        "deepspeed_hostfile",
        "deepspeed_inclusion_filter",
        "deepspeed_exclusion_filter",
        "deepspeed_multinode_launcher",
    )

    deepspeed_config_file: str | None = None
    """A DeepSpeed JSON config; the options below then only fill its ``"auto"`` values."""
    zero_stage: int | None = None
    """ZeRO stage 0, 1, 2 or 3 (the engine uses 2 when neither this nor a file sets it)."""
    offload_optimizer_device: str | None = None
    """Where optimizer states live: ``none``, ``cpu`` or ``nvme`` (stage >= 2)."""
    offload_param_device: str | None = None
    """Where parameters live: ``none``, ``cpu`` or ``nvme`` (stage 3 only)."""
    offload_optimizer_nvme_path: str | None = None
    """Folder for optimizer states when ``offload_optimizer_device`` is ``nvme``."""
    offload_param_nvme_path: str | None = None
    """Folder for parameters when ``offload_param_device`` is ``nvme``."""
    gradient_accumulation_steps: int | None = None
    """Batches accumulated before each optimizer step."""
    gradient_clipping: float | None = None
    """Clip gradients to this norm."""
    zero3_init_flag: bool | None = None
    """Build large models directly partitioned (``deepspeed.zero.Init``; stage 3)."""
    zero3_save_16bit_model: bool | None = None
    """Gather and save a 16-bit model at save time (stage 3)."""
    deepspeed_hostfile: str | None = None
    """Hostfile of DeepSpeed's multi-machine launcher (``host slots=N`` lines)."""
    deepspeed_inclusion_filter: str | None = None
    """Hosts / devices to use, DeepSpeed ``--include`` syntax (``host1:0,1@host2``)."""
    deepspeed_exclusion_filter: str | None = None
    """Hosts / devices to leave out, DeepSpeed ``--exclude`` syntax."""
    deepspeed_multinode_launcher: str | None = None
    """How DeepSpeed reaches the machines: ``pdsh`` (default), ``openmpi``, ``mvapich``,
    ``mpich``, ``impi``, ``slurm``, ``nossh``, or ``standard`` (torchrun on each machine)."""

    def validate(self, section: str) -> None:
        """Check stages, devices and the paths that go with them."""
        if self.zero_stage is not None and self.zero_stage not in ZERO_STAGES:
            raise ConfigError(
                f"{section}.zero_stage must be 0, 1, 2 or 3; got {self.zero_stage}. Use 2 or 3."
            )
        for name in ("offload_optimizer_device", "offload_param_device"):
            value = _choice(getattr(self, name), f"{section}.{name}", OFFLOAD_DEVICES)
            setattr(self, name, value)
            if value == "nvme" and not getattr(self, name.replace("device", "nvme_path")):
                path_name = name.replace("device", "nvme_path")
                raise ConfigError(
                    f"{section}.{name} is 'nvme', which needs {path_name}; got none. Pass "
                    f"--{path_name} /local/nvme/folder."
                )
        if (
            self.offload_param_device not in (None, "none")
            and self.zero_stage is not None
            and self.zero_stage != 3
        ):
            raise ConfigError(
                f"{section}.offload_param_device needs ZeRO stage 3; got stage "
                f"{self.zero_stage} with offload_param_device={self.offload_param_device!r}. "
                "Use --zero_stage 3 or drop the parameter offload."
            )
        if self.gradient_accumulation_steps is not None and self.gradient_accumulation_steps < 1:
            raise ConfigError(
                f"{section}.gradient_accumulation_steps must be >= 1; got "
                f"{self.gradient_accumulation_steps}. Use 1 for no accumulation."
            )
        check_norm(self.gradient_clipping, f"{section}.gradient_clipping")
        self.deepspeed_multinode_launcher = _choice(
            self.deepspeed_multinode_launcher,
            f"{section}.deepspeed_multinode_launcher",
            DEEPSPEED_LAUNCHERS,
        )


_FSDP1_ONLY = ("fsdp_sharding_strategy", "fsdp_backward_prefetch", "fsdp_forward_prefetch")


@dataclass
class FSDPConfig(Section):
    """Fully sharded data parallel options (section ``fsdp_config``; flags of the same
    names)."""

    variables: ClassVar[dict[str, str]] = {
        "fsdp_version": env.ACCEL_FSDP_VERSION,
        "fsdp_sharding_strategy": env.ACCEL_FSDP_SHARDING_STRATEGY,
        "fsdp_reshard_after_forward": env.ACCEL_FSDP_RESHARD_AFTER_FORWARD,
        "fsdp_auto_wrap_policy": env.ACCEL_FSDP_AUTO_WRAP_POLICY,
        "fsdp_transformer_layer_cls_to_wrap": env.ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP,
        "fsdp_min_num_params": env.ACCEL_FSDP_MIN_NUM_PARAMS,
        "fsdp_backward_prefetch": env.ACCEL_FSDP_BACKWARD_PREFETCH,
        "fsdp_state_dict_type": env.ACCEL_FSDP_STATE_DICT_TYPE,
        "fsdp_offload_params": env.ACCEL_FSDP_OFFLOAD_PARAMS,
        "fsdp_forward_prefetch": env.ACCEL_FSDP_FORWARD_PREFETCH,
        "fsdp_use_orig_params": env.ACCEL_FSDP_USE_ORIG_PARAMS,
        "fsdp_cpu_ram_efficient_loading": env.ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING,
        "fsdp_sync_module_states": env.ACCEL_FSDP_SYNC_MODULE_STATES,
        "fsdp_activation_checkpointing": env.ACCEL_FSDP_ACTIVATION_CHECKPOINTING,
    }

    fsdp_version: int | None = None
    """1 (``FullyShardedDataParallel``) or 2 (``fully_shard``)."""
    fsdp_sharding_strategy: str | None = None
    """FSDP1: ``FULL_SHARD``, ``SHARD_GRAD_OP``, ``NO_SHARD``, ``HYBRID_SHARD``,
    ``HYBRID_SHARD_ZERO2``."""
    fsdp_reshard_after_forward: bool | None = None
    """FSDP2: free the gathered parameters after forward (the FULL_SHARD behaviour)."""
    fsdp_auto_wrap_policy: str | None = None
    """``TRANSFORMER_BASED_WRAP``, ``SIZE_BASED_WRAP`` or ``NO_WRAP``."""
    fsdp_transformer_layer_cls_to_wrap: str | None = None
    """Comma-separated class names wrapped one unit each (``TRANSFORMER_BASED_WRAP``)."""
    fsdp_min_num_params: int | None = None
    """Minimum parameters of a wrapped unit (``SIZE_BASED_WRAP``)."""
    fsdp_backward_prefetch: str | None = None
    """FSDP1: ``BACKWARD_PRE``, ``BACKWARD_POST`` or ``NO_PREFETCH``."""
    fsdp_state_dict_type: str | None = None
    """``FULL_STATE_DICT``, ``LOCAL_STATE_DICT`` or ``SHARDED_STATE_DICT``."""
    fsdp_offload_params: bool | None = None
    """Keep parameters and gradients on CPU."""
    fsdp_forward_prefetch: bool | None = None
    """FSDP1: prefetch the next all-gather during forward."""
    fsdp_use_orig_params: bool | None = None
    """Let optimizers see the original parameters (needed for parameter groups)."""
    fsdp_cpu_ram_efficient_loading: bool | None = None
    """Load pretrained weights on rank 0 only and broadcast them."""
    fsdp_sync_module_states: bool | None = None
    """Broadcast rank 0's module states at wrap time."""
    fsdp_activation_checkpointing: bool | None = None
    """Recompute activations of wrapped units in backward."""

    def validate(self, section: str) -> None:
        """Check names, and the options that exclude each other."""
        if self.fsdp_version is not None and self.fsdp_version not in (1, 2):
            raise ConfigError(
                f"{section}.fsdp_version must be 1 or 2; got {self.fsdp_version}. Use 2 for "
                "fully_shard, 1 for FullyShardedDataParallel."
            )
        for name, choices in (
            ("fsdp_sharding_strategy", SHARDING_STRATEGIES),
            ("fsdp_auto_wrap_policy", WRAP_POLICIES),
            ("fsdp_backward_prefetch", BACKWARD_PREFETCH),
            ("fsdp_state_dict_type", STATE_DICT_TYPES),
        ):
            setattr(self, name, _choice(getattr(self, name), f"{section}.{name}", choices))
        if self.fsdp_version == 2:
            for name in _FSDP1_ONLY:
                if getattr(self, name) is not None:
                    raise ConfigError(
                        f"{section}.{name} applies to FSDP1 only; got {getattr(self, name)!r} "
                        "with fsdp_version=2. Drop it (FSDP2 uses fsdp_reshard_after_forward) "
                        "or use fsdp_version=1."
                    )
        if self.fsdp_transformer_layer_cls_to_wrap and self.fsdp_auto_wrap_policy not in (
            None,
            "TRANSFORMER_BASED_WRAP",
        ):
            raise ConfigError(
                f"{section}.fsdp_transformer_layer_cls_to_wrap goes with TRANSFORMER_BASED_WRAP; "
                f"got fsdp_auto_wrap_policy={self.fsdp_auto_wrap_policy!r}. Use "
                "--fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP or drop the class list."
            )
        if self.fsdp_min_num_params is not None and self.fsdp_min_num_params < 1:
            raise ConfigError(
                f"{section}.fsdp_min_num_params must be >= 1; got {self.fsdp_min_num_params}. "
                "Use e.g. 100000000."
            )
        if self.fsdp_min_num_params is not None and self.fsdp_auto_wrap_policy not in (
            None,
            "SIZE_BASED_WRAP",
        ):
            raise ConfigError(
                f"{section}.fsdp_min_num_params goes with SIZE_BASED_WRAP; got "
                f"fsdp_auto_wrap_policy={self.fsdp_auto_wrap_policy!r}. Use "
                "--fsdp_auto_wrap_policy SIZE_BASED_WRAP or drop fsdp_min_num_params."
            )
        if self.fsdp_cpu_ram_efficient_loading and self.fsdp_sync_module_states is False:
            raise ConfigError(
                f"{section}.fsdp_cpu_ram_efficient_loading loads weights on rank 0 only, so the "
                "other ranks need fsdp_sync_module_states; got fsdp_sync_module_states=false. "
                "Set --fsdp_sync_module_states true."
            )


@dataclass
class MegatronLMConfig(Section):
    """Megatron-LM options (section ``megatron_lm_config``)."""

    variables: ClassVar[dict[str, str]] = {
        "megatron_lm_tp_degree": env.ACCEL_MEGATRON_LM_TP_DEGREE,
        "megatron_lm_pp_degree": env.ACCEL_MEGATRON_LM_PP_DEGREE,
        "megatron_lm_num_micro_batches": env.ACCEL_MEGATRON_LM_NUM_MICRO_BATCHES,
        "megatron_lm_sequence_parallelism": env.ACCEL_MEGATRON_LM_SEQUENCE_PARALLELISM,
        "megatron_lm_recompute_activations": env.ACCEL_MEGATRON_LM_RECOMPUTE_ACTIVATIONS,
        "megatron_lm_use_distributed_optimizer": env.ACCEL_MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER,
        "megatron_lm_gradient_clipping": env.ACCEL_MEGATRON_LM_GRADIENT_CLIPPING,
    }

    megatron_lm_tp_degree: int | None = None
    """Tensor parallel degree."""
    megatron_lm_pp_degree: int | None = None
    """Pipeline parallel degree."""
    megatron_lm_num_micro_batches: int | None = None
    """Micro-batches per pipeline step (when pp_degree > 1)."""
    megatron_lm_sequence_parallelism: bool | None = None
    """Shard activations along the sequence (needs tp_degree > 1)."""
    megatron_lm_recompute_activations: bool | None = None
    """Selective activation recomputation."""
    megatron_lm_use_distributed_optimizer: bool | None = None
    """Shard optimizer states over data-parallel ranks."""
    megatron_lm_gradient_clipping: float | None = None
    """Clip gradients to this global norm."""

    def validate(self, section: str) -> None:
        """Degrees and micro-batch counts are >= 1."""
        for name in ("megatron_lm_tp_degree", "megatron_lm_pp_degree"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{section}.{name} must be >= 1; got {value}. Use 1 for none.")
        if (
            self.megatron_lm_num_micro_batches is not None
            and self.megatron_lm_num_micro_batches < 1
        ):
            raise ConfigError(
                f"{section}.megatron_lm_num_micro_batches must be >= 1; got "
                f"{self.megatron_lm_num_micro_batches}. Use 1 for none."
            )
        check_norm(self.megatron_lm_gradient_clipping, f"{section}.megatron_lm_gradient_clipping")


@dataclass
class ParallelismSection(Section):
    """``ParallelismConfig`` of the processes (section ``parallelism_config``): each value
    reaches the processes as an ``ACCEL_PARALLELISM_CONFIG_*`` variable, and an Accelerator
    built without ``parallelism_config`` builds one from them."""

    variables: ClassVar[dict[str, str]] = {
        "use_parallelism_config": env.ACCEL_USE_PARALLELISM_CONFIG,
        "parallelism_config_dp_replicate_size": env.ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE,
        "parallelism_config_dp_shard_size": env.ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE,
        "parallelism_config_tp_size": env.ACCEL_PARALLELISM_CONFIG_TP_SIZE,
        "parallelism_config_cp_size": env.ACCEL_PARALLELISM_CONFIG_CP_SIZE,
        "parallelism_config_cp_backend": env.ACCEL_PARALLELISM_CONFIG_CP_BACKEND,
        "parallelism_config_cp_comm_strategy": env.ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY,
        "parallelism_config_sp_size": env.ACCEL_PARALLELISM_CONFIG_SP_SIZE,
        "parallelism_config_sp_backend": env.ACCEL_PARALLELISM_CONFIG_SP_BACKEND,
        "parallelism_config_sp_seq_length": env.ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH,
        "parallelism_config_sp_seq_length_is_variable": (
            env.ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE
        ),
        "parallelism_config_sp_attn_implementation": (
            env.ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION
        ),
    }

    switches: ClassVar[tuple[str, ...]] = ("use_parallelism_config",)

    use_parallelism_config: bool | None = None
    """Build a ParallelismConfig in the processes (implied by any other setting here)."""
    parallelism_config_dp_replicate_size: int | None = None
    """Number of replicas of the (sharded) model."""
    parallelism_config_dp_shard_size: int | None = None
    """Number of processes one replica is sharded over (default: what the others leave)."""
    parallelism_config_tp_size: int | None = None
    """Number of processes each layer is split over (tensor parallelism)."""
    parallelism_config_cp_size: int | None = None
    """Number of processes each sequence is split over (context parallelism, FSDP2)."""
    parallelism_config_cp_backend: str | None = None
    """Implementation of context parallelism: torch."""
    parallelism_config_cp_comm_strategy: str | None = None
    """How context-parallel processes exchange keys and values: allgather or alltoall."""
    parallelism_config_sp_size: int | None = None
    """Number of processes each sequence is split over with DeepSpeed Ulysses."""
    parallelism_config_sp_backend: str | None = None
    """Implementation of sequence parallelism: deepspeed."""
    parallelism_config_sp_seq_length: int | None = None
    """Fixed sequence length of sequence-parallel batches."""
    parallelism_config_sp_seq_length_is_variable: bool | None = None
    """Whether the sequence length may change between batches (default true)."""
    parallelism_config_sp_attn_implementation: str | None = None
    """Attention under sequence parallelism: sdpa, flash_attention_2 ..."""

    def validate(self, section: str) -> None:
        """Sizes are >= 1; backends and strategies are from their vocabularies."""
        for name in self.keys():
            value = getattr(self, name)
            if name.endswith("_size") and value is not None and value < 1:
                raise ConfigError(f"{section}.{name} must be >= 1; got {value}. Use 1 for none.")
        for name, variable in (
            ("parallelism_config_cp_backend", env.ACCEL_PARALLELISM_CONFIG_CP_BACKEND),
            ("parallelism_config_sp_backend", env.ACCEL_PARALLELISM_CONFIG_SP_BACKEND),
            ("parallelism_config_cp_comm_strategy", env.ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY),
        ):
            value = _choice(getattr(self, name), f"{section}.{name}", tuple(variable.choices))
            setattr(self, name, value)

    def environment(self) -> dict[str, str]:
        """The variables of the values set, plus ``ACCEL_USE_PARALLELISM_CONFIG`` when any is."""
        values = super().environment()
        if values and self.use_parallelism_config is not False:
            values[env.ACCEL_USE_PARALLELISM_CONFIG] = env_text(True)
        return values


SECTIONS: dict[str, type[Section]] = {
    "dynamo_config": DynamoConfig,
    "deepspeed_config": DeepSpeedConfig,
    "fsdp_config": FSDPConfig,
    "megatron_lm_config": MegatronLMConfig,
    "parallelism_config": ParallelismSection,
}
"""Section name in the file -> its dataclass."""


def section_flags() -> dict[str, tuple[str, str]]:
    """Flag name -> (section, key) for every option of every section."""
    return {key: (name, key) for name, cls in SECTIONS.items() for key in cls.keys()}
