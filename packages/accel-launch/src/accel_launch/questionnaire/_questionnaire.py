"""``accel config``: the questions, asked only when they apply, and the file they produce."""

from __future__ import annotations

import os
import shutil
import subprocess

from accel_state.environment_variables import (
    BACKWARD_PREFETCH,
    OFFLOAD_DEVICES,
    SHARDING_STRATEGIES,
    STATE_DICT_TYPES,
    WRAP_POLICIES,
)

from ..commands._sagemaker import SageMakerConfig
from ..configs._config_file import LaunchConfig, launcher_settings
from ..configs._engine_configs import (
    DEEPSPEED_LAUNCHERS,
    DeepSpeedConfig,
    DynamoConfig,
    FSDPConfig,
)
from ._prompts import Prompter, number, whole

MACHINE_TYPES = ("No distributed training", "multi-CPU", "multi-GPU", "Amazon SageMaker", "TPU")
"""What the questionnaire offers: what this version runs."""
DYNAMO_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs", "onnxrt", "tvm", "ipex")
DYNAMO_MODES = ("default", "reduce-overhead", "max-autotune")
PRECISIONS = ("no", "fp16", "bf16", "fp8")


def count_gpus() -> int:
    """GPUs on this machine, from ``nvidia-smi -L`` (no torch import); 0 when unknown."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _positive(value: int) -> str | None:
    return None if value >= 1 else f"the value must be >= 1, got {value}"


def _norm(value: float) -> str | None:
    return None if value >= 0 else f"a clipping norm is >= 0 (0 turns clipping off), got {value}"


def _port(value: int) -> str | None:
    return None if 0 <= value < 65536 else f"a port is in 0..65535, got {value}"


def _existing_file(path: str) -> str | None:
    return None if os.path.isfile(path) else f"{path!r} is not an existing file"


def run_questionnaire(
    prompter: Prompter, gpus: int | None = None
) -> LaunchConfig | SageMakerConfig:
    """Ask what applies to this machine and return the validated configuration.

    Args:
        prompter: Where questions go and answers come from.
        gpus: GPUs of this machine (detected when None).

    """
    gpus = count_gpus() if gpus is None else gpus
    ask = prompter
    config = LaunchConfig()
    kind = MACHINE_TYPES[ask.choose("Which type of machine are you using?", MACHINE_TYPES)]
    if kind == "Amazon SageMaker":
        from ._questionnaire_sagemaker import ask_sagemaker

        return ask_sagemaker(ask, _ask_dynamo)
    if kind == "TPU":
        from ._questionnaire_tpu import ask_tpu

        return ask_tpu(ask)
    distributed = kind != "No distributed training"
    config.distributed_type = {
        "No distributed training": "NO",
        "multi-CPU": "MULTI_CPU",
        "multi-GPU": "MULTI_GPU",
    }[kind]
    if distributed:
        _ask_machines(ask, config, kind)
        config.debug = ask.yes_no(
            "Check distributed operations for errors while running (clear errors instead of "
            "hangs, a little slower)?",
            False,
        )
    if kind == "No distributed training":
        config.use_cpu = gpus == 0 or ask.yes_no("Run on CPU only, even with GPUs present?", False)
    if kind == "multi-CPU":
        config.use_cpu = True
    config.dynamo_config = _ask_dynamo(ask)
    if kind in ("multi-GPU", "No distributed training") and not config.use_cpu:
        if ask.yes_no("Do you want to use DeepSpeed?", False):
            config.distributed_type = "DEEPSPEED"
            config.deepspeed_config = _ask_deepspeed(ask, config.num_machines)
    if kind in ("multi-GPU", "multi-CPU") and config.distributed_type != "DEEPSPEED":
        if ask.yes_no("Do you want to use FullyShardedDataParallel (FSDP)?", False):
            config.distributed_type = "FSDP"
            config.fsdp_config = _ask_fsdp(ask)
    if kind == "multi-GPU" and config.distributed_type not in ("DEEPSPEED", "FSDP"):
        config = _maybe_megatron(ask, config)
    if distributed:
        per_machine = gpus if kind != "multi-CPU" and gpus else 2
        machines = config.num_machines
        config.num_processes = ask.ask(
            f"How many processes in TOTAL, over all {machines} machine(s)?",
            per_machine * machines,
            whole,
            check=lambda n: (
                None
                if n >= 1 and n % machines == 0
                else f"the total must be a positive multiple of the {machines} machine(s), got {n}"
            ),
        )
    if config.distributed_type == "FSDP" and config.fsdp_config.fsdp_version == 2:
        from ._questionnaire_parallelism import ask_parallelism

        config.parallelism_config = ask_parallelism(ask, config.num_processes)
    if gpus and not config.use_cpu:
        config.gpu_ids = ask.ask(
            "Which GPUs (ids, comma-separated) should be used on this machine?", "all"
        )
    config.mixed_precision = PRECISIONS[
        ask.choose("Do you wish to use mixed precision?", PRECISIONS)
    ]
    return config.validate()


def _maybe_megatron(ask: Prompter, config: LaunchConfig) -> LaunchConfig:
    from ._questionnaire_megatron import ask_megatron

    if ask.yes_no("Do you want to use Megatron-LM?", False):
        config.distributed_type = "MEGATRON_LM"
        config.megatron_lm_config = ask_megatron(ask)
    return config


def _ask_machines(ask: Prompter, config: LaunchConfig, kind: str) -> None:
    config.num_machines = ask.ask(
        "How many machines will you use (more than 1 for multi-node training)?",
        1,
        whole,
        _positive,
    )
    if config.num_machines == 1:
        return
    machines = config.num_machines
    config.machine_rank = ask.ask(
        "What is the rank of this machine (0 for the main machine)?",
        0,
        whole,
        check=lambda r: None if 0 <= r < machines else f"the rank must be in 0..{machines - 1}",
    )
    config.main_process_ip = ask.ask(
        "What is the IP address of the machine that hosts the main process?", None, str
    )
    config.main_process_port = ask.ask(
        "Which port does the main process use?", 29500, whole, check=_port
    )
    config.same_network = ask.yes_no("Are all the machines on the same local network?", True)
    config.rdzv_backend = ("static", "c10d")[
        ask.choose("Which rendezvous backend will you use?", ["static", "c10d"])
    ]
    for declared in launcher_settings().values():  # the launcher backends' own questions
        if declared.prompt is None or (declared.asked_for and kind not in declared.asked_for):
            continue
        if declared.confirm is not None and not ask.yes_no(declared.confirm, False):
            continue
        kind_of = declared.annotation.split(" ")[0]
        if kind_of == "bool":
            answer = ask.yes_no(declared.prompt, bool(declared.default))
        else:
            convert = {"int": whole, "float": number}.get(kind_of, str)
            answer = ask.ask(declared.prompt, declared.default, convert, declared.answer_check)
        setattr(config, declared.name, answer)


def _ask_dynamo(ask: Prompter) -> DynamoConfig:
    if not ask.yes_no("Do you wish to optimize your script with torch dynamo?", False):
        return DynamoConfig()
    dynamo = DynamoConfig(
        dynamo_backend=DYNAMO_BACKENDS[
            ask.choose("Which dynamo backend would you like to use?", DYNAMO_BACKENDS)
        ]
    )
    if ask.yes_no("Do you want to customize the defaults sent to torch.compile?", False):
        dynamo.dynamo_mode = DYNAMO_MODES[ask.choose("Which mode do you want?", DYNAMO_MODES)]
        dynamo.dynamo_use_fullgraph = ask.yes_no("Refuse graph breaks (fullgraph)?", False)
        dynamo.dynamo_use_dynamic = ask.yes_no("Compile with dynamic shapes?", False)
    dynamo.validate("dynamo_config")
    return dynamo


def _ask_deepspeed(ask: Prompter, machines: int) -> DeepSpeedConfig:
    ds = DeepSpeedConfig()
    if ask.yes_no("Do you want to give a DeepSpeed JSON config file?", False):
        ds.deepspeed_config_file = ask.ask(
            "Path of the DeepSpeed JSON config file?", None, str, check=_existing_file
        )
    else:
        ds.zero_stage = ask.ask(
            "Which ZeRO stage (0, 1, 2 or 3)?",
            2,
            whole,
            check=lambda n: None if 0 <= n <= 3 else f"a ZeRO stage is 0, 1, 2 or 3, got {n}",
        )
        if ds.zero_stage >= 2:
            ds.offload_optimizer_device = OFFLOAD_DEVICES[
                ask.choose("Where should optimizer states be offloaded?", OFFLOAD_DEVICES)
            ]
            if ds.offload_optimizer_device == "nvme":
                ds.offload_optimizer_nvme_path = ask.ask(
                    "NVMe folder for optimizer states?", None, str
                )
        if ds.zero_stage == 3:
            ds.offload_param_device = OFFLOAD_DEVICES[
                ask.choose("Where should parameters be offloaded?", OFFLOAD_DEVICES)
            ]
            if ds.offload_param_device == "nvme":
                ds.offload_param_nvme_path = ask.ask("NVMe folder for parameters?", None, str)
            ds.zero3_save_16bit_model = ask.yes_no(
                "Save 16-bit model weights when using ZeRO stage 3?", False
            )
        ds.gradient_accumulation_steps = ask.ask(
            "How many gradient accumulation steps?", 1, whole, _positive
        )
        if ask.yes_no("Do you want to clip gradients?", False):
            ds.gradient_clipping = ask.ask(
                "Clip gradients to which norm (0 turns clipping off)?", 1.0, number, _norm
            )
    if ds.deepspeed_config_file or ds.zero_stage == 3:
        ds.zero3_init_flag = ask.yes_no(
            "Build huge models directly partitioned (deepspeed.zero.Init, ZeRO stage 3)?", False
        )
    if machines > 1:
        ds.deepspeed_multinode_launcher = DEEPSPEED_LAUNCHERS[
            ask.choose("Which launcher reaches the other machines?", DEEPSPEED_LAUNCHERS)
        ]
        if ds.deepspeed_multinode_launcher != "standard":
            ds.deepspeed_hostfile = ask.ask(
                "Path of the DeepSpeed hostfile (`host slots=N` lines)?", None, str
            )
            ds.deepspeed_inclusion_filter = (
                ask.ask("Hosts to include (e.g. host1:0,1)?", "") or None
            )
            ds.deepspeed_exclusion_filter = ask.ask("Hosts to exclude?", "") or None
    ds.validate("deepspeed_config")
    return ds


def _ask_fsdp(ask: Prompter) -> FSDPConfig:
    fsdp = FSDPConfig()
    fsdp.fsdp_version = (2, 1)[
        ask.choose(
            "Which FSDP version?", ["2 (fully_shard, recommended)", "1 (FullyShardedDataParallel)"]
        )
    ]
    if fsdp.fsdp_version == 1:
        fsdp.fsdp_sharding_strategy = SHARDING_STRATEGIES[
            ask.choose("Which sharding strategy?", SHARDING_STRATEGIES)
        ]
    else:
        fsdp.fsdp_reshard_after_forward = ask.yes_no(
            "Free gathered parameters after forward (reshard_after_forward)?", True
        )
    fsdp.fsdp_offload_params = ask.yes_no("Offload parameters and gradients to CPU?", False)
    fsdp.fsdp_auto_wrap_policy = WRAP_POLICIES[ask.choose("Which auto wrap policy?", WRAP_POLICIES)]
    if fsdp.fsdp_auto_wrap_policy == "TRANSFORMER_BASED_WRAP":
        names = ask.ask(
            "Layer classes to wrap, comma-separated (none: the model's _no_split_modules)?", ""
        )
        fsdp.fsdp_transformer_layer_cls_to_wrap = names or None
    elif fsdp.fsdp_auto_wrap_policy == "SIZE_BASED_WRAP":
        fsdp.fsdp_min_num_params = ask.ask(
            "Minimum parameters per wrapped unit?", 100_000_000, whole, _positive
        )
    if fsdp.fsdp_version == 1:
        fsdp.fsdp_backward_prefetch = BACKWARD_PREFETCH[
            ask.choose("Which backward prefetch?", BACKWARD_PREFETCH)
        ]
        fsdp.fsdp_forward_prefetch = ask.yes_no("Prefetch the next all-gather in forward?", False)
        fsdp.fsdp_use_orig_params = ask.yes_no(
            "Let optimizers see the original parameters (use_orig_params)?", True
        )
    fsdp.fsdp_state_dict_type = STATE_DICT_TYPES[
        ask.choose("Which state dict type for checkpoints?", STATE_DICT_TYPES, default=2)
    ]
    fsdp.fsdp_cpu_ram_efficient_loading = ask.yes_no(
        "Load pretrained weights on rank 0 only (CPU RAM efficient loading)?", True
    )
    if fsdp.fsdp_version == 1:
        fsdp.fsdp_sync_module_states = fsdp.fsdp_cpu_ram_efficient_loading or ask.yes_no(
            "Broadcast rank 0's module states at wrap time?", True
        )
    fsdp.fsdp_activation_checkpointing = ask.yes_no("Use activation checkpointing?", False)
    fsdp.validate("fsdp_config")
    return fsdp
