"""Launched by tests/test_env_fallbacks.py: builds an Accelerator from the environment alone
(no argument) and prints, as one JSON line per process, every state / plugin field the
launcher's variables configure."""

import json
import os
from enum import Enum

from accel import Accelerator


def plain(value: object) -> object:
    """A JSON value for a plugin field: a torch enum member's name, a function's name, any
    other torch object's repr."""
    if value is None or isinstance(value, (bool, int, float, str, list)):
        return value
    if isinstance(value, Enum):
        return value.name
    return getattr(value, "__name__", None) or repr(value)


def fields(plugin: object, *names: str) -> dict:
    """The named attributes of a plugin."""
    return {name: plain(getattr(plugin, name)) for name in names}


acc = Accelerator()
state = acc.state
report = {
    "rank": acc.process_index,
    "processes": acc.num_processes,
    "mixed_precision": str(acc.mixed_precision),
    "cpu": acc.device.type == "cpu" and bool(state._cpu),
    "debug": bool(state.debug),
    "distributed_type": state.distributed_type.value,
    "gradient_accumulation_steps": acc.gradient_accumulation_steps,
}
dynamo = state.dynamo_plugin
report["dynamo"] = {
    "backend": dynamo.backend.value,
    "mode": dynamo.mode,
    "fullgraph": dynamo.fullgraph,
    "dynamic": dynamo.dynamic,
    "use_regional_compilation": dynamo.use_regional_compilation,
}
fsdp = state.fsdp_plugin
if fsdp is not None:
    report["fsdp"] = fields(
        fsdp,
        "fsdp_version",
        "sharding_strategy",
        "reshard_after_forward",
        "auto_wrap_policy",
        "transformer_cls_names_to_wrap",
        "min_num_params",
        "backward_prefetch",
        "state_dict_type",
        "cpu_offload",
        "forward_prefetch",
        "use_orig_params",
        "cpu_ram_efficient_loading",
        "sync_module_states",
        "activation_checkpointing",
    )
ds = state.deepspeed_plugin
if ds is not None:
    report["deepspeed"] = fields(
        ds,
        "zero_stage",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "offload_optimizer_device",
        "offload_param_device",
        "offload_optimizer_nvme_path",
        "offload_param_nvme_path",
        "zero3_init_flag",
        "zero3_save_16bit_model",
    )
mlm = state.megatron_lm_plugin
if mlm is not None:
    report["megatron_lm"] = fields(
        mlm,
        "tp_degree",
        "pp_degree",
        "num_micro_batches",
        "sequence_parallelism",
        "recompute_activations",
        "use_distributed_optimizer",
        "gradient_clipping",
        "recompute_granularity",
    )
layout = acc.parallelism_config
if layout is not None:
    from accel.utils import DeepSpeedSequenceParallelConfig, TorchContextParallelConfig

    report["parallelism"] = {
        **{f"{name}_size": size for name, size in layout.sizes.items()},
        "cp_backend": layout.cp_backend,
        "sp_backend": layout.sp_backend,
        # The handlers are built for sizes above 1 only; these read the same variables.
        "cp_comm_strategy": TorchContextParallelConfig().cp_comm_strategy,
        "sp": vars(DeepSpeedSequenceParallelConfig()),
    }
os.write(1, ("REPORT " + json.dumps(report) + "\n").encode())  # one write: no interleaving
acc.wait_for_everyone()
