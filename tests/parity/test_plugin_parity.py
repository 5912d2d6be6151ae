"""Differential tests: the plugin and kwargs dataclasses built with the same arguments in accel
and in the reference library (``accelerate``) show the same values after construction.

Deliberate differences are listed in ``docs/migration-behaviour.md`` ("Plugins and kwargs
after construction") and are left out of the compared fields here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any

import pytest
import torch

reference = pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)

import accel.utils as ours  # noqa: E402
from accelerate import utils as ref  # noqa: E402
from accelerate.parallelism_config import ParallelismConfig as RefParallelismConfig  # noqa: E402


def _fields(obj: Any, names: list[str]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def _both(name: str, ref_cls: Any = None, **kwargs: Any) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = (ref_cls or getattr(ref, name))(**kwargs)
    return getattr(ours, name)(**kwargs), theirs


DEEPSPEED_FIELDS = [
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "is_train_batch_min",
    "offload_optimizer_device",
    "offload_param_device",
    "offload_optimizer_nvme_path",
    "offload_param_nvme_path",
    "zero3_init_flag",
    "zero3_save_16bit_model",
    "transformer_moe_cls_names",
    "enable_msamp",
    "msamp_opt_level",
]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"zero_stage": 1, "gradient_clipping": 1.0, "gradient_accumulation_steps": 4},
        {"zero_stage": 3, "offload_optimizer_device": "cpu", "zero3_init_flag": True},
        {"zero_stage": 3},
        {"zero_stage": 3, "zero3_init_flag": False, "zero3_save_16bit_model": True},
        {
            "hf_ds_config": {
                "train_micro_batch_size_per_gpu": "auto",
                "zero_optimization": {"stage": 2},
            }
        },
    ],
)
def test_deepspeed_plugin_values(kwargs):
    theirs_cls = ref.DeepSpeedPlugin
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = theirs_cls(**json.loads(json.dumps(kwargs)))
    mine = ours.DeepSpeedPlugin(**json.loads(json.dumps(kwargs)))
    names = DEEPSPEED_FIELDS
    if "hf_ds_config" in kwargs:
        # migration-behaviour.md, "DeepSpeed config without gradient_accumulation_steps": the
        # reference writes 1 into the config; accel leaves "auto" for the Accelerator's value.
        assert (mine.gradient_accumulation_steps, theirs.gradient_accumulation_steps) == ("auto", 1)
        names = [n for n in names if n != "gradient_accumulation_steps"]
    assert _fields(mine, names) == _fields(theirs, names)
    zero_mine = mine.deepspeed_config["zero_optimization"]
    zero_theirs = theirs.deepspeed_config["zero_optimization"]
    assert zero_mine["stage"] == zero_theirs["stage"]


def test_deepspeed_plugin_from_a_config_file(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        json.dumps({"gradient_accumulation_steps": 2, "zero_optimization": {"stage": 3}})
    )
    mine, theirs = _both("DeepSpeedPlugin", hf_ds_config=str(path))
    assert _fields(mine, DEEPSPEED_FIELDS) == _fields(theirs, DEEPSPEED_FIELDS)
    assert mine.hf_ds_config.config == {
        k: v for k, v in theirs.hf_ds_config.config.items() if k != "steps_per_print"
    }


FSDP_FIELDS = [f.name for f in dataclasses.fields(ref.FullyShardedDataParallelPlugin)]


@pytest.fixture
def fsdp_env():
    """Leave no FSDP variable set around the test (the reference writes
    ``FSDP_CPU_RAM_EFFICIENT_LOADING`` into ``os.environ`` when the argument is given)."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(("FSDP_", "ACCEL_FSDP_")):
            del os.environ[name]
    yield os.environ
    os.environ.clear()
    os.environ.update(saved)


def _fsdp_differences(mine: Any, theirs: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """Fields whose type or value differ (torch objects compare by their dataclass fields)."""
    out = []
    for name in FSDP_FIELDS:
        a, b = getattr(mine, name), getattr(theirs, name)
        if name not in skip and not (type(a) is type(b) and a == b):
            out.append(f"{name}: accel {a!r}, reference {b!r}")
    return out


def _fsdp_cases() -> list[dict[str, Any]]:
    from torch.distributed.fsdp import (
        BackwardPrefetch,
        CPUOffload,
        CPUOffloadPolicy,
        MixedPrecision,
        MixedPrecisionPolicy,
        ShardingStrategy,
        StateDictType,
    )

    bf16, fp32 = torch.bfloat16, torch.float32
    return [
        {"use_orig_params": False},
        {"fsdp_version": 2},
        {
            "fsdp_version": 1,
            "sharding_strategy": "SHARD_GRAD_OP",
            "backward_prefetch": "BACKWARD_POST",
            "state_dict_type": "SHARDED_STATE_DICT",
            "cpu_offload": True,
            "mixed_precision_policy": "bf16",
            "use_orig_params": True,
        },
        {
            "sharding_strategy": ShardingStrategy.NO_SHARD,
            "backward_prefetch": BackwardPrefetch.BACKWARD_PRE,
            "state_dict_type": StateDictType.LOCAL_STATE_DICT,
            "use_orig_params": False,
        },
        {"sharding_strategy": "4", "backward_prefetch": "no_prefetch", "use_orig_params": False},
        {
            "fsdp_version": 2,
            "mixed_precision_policy": {
                "param_dtype": bf16,
                "reduce_dtype": fp32,
                "output_dtype": bf16,
            },
            "cpu_offload": True,
            "reshard_after_forward": False,
        },
        {
            "mixed_precision_policy": {
                "param_dtype": bf16,
                "reduce_dtype": fp32,
                "buffer_dtype": bf16,
            },
            "cpu_offload": CPUOffload(offload_params=True),
            "use_orig_params": False,
        },
        {
            "mixed_precision_policy": MixedPrecision(param_dtype=bf16),
            "auto_wrap_policy": "transformer_based_wrap",
            "transformer_cls_names_to_wrap": "Block,Attn",
            "use_orig_params": False,
        },
        {"auto_wrap_policy": "SIZE_BASED_WRAP", "min_num_params": 1000, "use_orig_params": False},
        {
            "fsdp_version": 2,
            "activation_checkpointing": True,
            "activation_checkpointing_offload": True,
            "state_dict_type": "FULL_STATE_DICT",
            "cpu_ram_efficient_loading": True,
        },
        {
            "fsdp_version": 2,
            "cpu_offload": CPUOffloadPolicy(pin_memory=False),
            "mixed_precision_policy": MixedPrecisionPolicy(param_dtype=bf16),
            "reshard_after_forward": "false",
        },
        {"fsdp_version": 1, "use_orig_params": True, "forward_prefetch": True},
        {"fsdp_version": 1, "limit_all_gathers": False, "use_orig_params": False},
    ]


def test_fsdp_plugin_fields_match_field_by_field(fsdp_env):
    for kwargs in _fsdp_cases():
        mine, theirs = _both("FullyShardedDataParallelPlugin", **kwargs)
        assert _fsdp_differences(mine, theirs) == [], kwargs
        fsdp_env.pop("FSDP_CPU_RAM_EFFICIENT_LOADING", None)  # written by the reference


@pytest.mark.parametrize(
    "variables",
    [
        {
            "VERSION": "1",
            "SHARDING_STRATEGY": "2",
            "BACKWARD_PREFETCH": "BACKWARD_PRE",
            "STATE_DICT_TYPE": "SHARDED_STATE_DICT",
            "OFFLOAD_PARAMS": "true",
            "AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
            "TRANSFORMER_CLS_TO_WRAP": "Block,Layer",
            "USE_ORIG_PARAMS": "false",
            "SYNC_MODULE_STATES": "false",
            "FORWARD_PREFETCH": "true",
            "ACTIVATION_CHECKPOINTING": "true",
        },
        {
            "VERSION": "2",
            "RESHARD_AFTER_FORWARD": "false",
            "AUTO_WRAP_POLICY": "SIZE_BASED_WRAP",
            "MIN_NUM_PARAMS": "2000",
            "STATE_DICT_TYPE": "FULL_STATE_DICT",
            "CPU_RAM_EFFICIENT_LOADING": "true",
            "ACTIVATION_CHECKPOINTING": "true",
            "ACTIVATION_CHECKPOINTING_OFFLOAD": "true",
        },
    ],
)
def test_fsdp_plugin_from_the_launchers_variables(fsdp_env, variables):
    """The reference reads ``FSDP_*``; accel reads them too, and its own ``ACCEL_FSDP_*``."""
    fsdp_env.update({f"FSDP_{k}": v for k, v in variables.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ref.FullyShardedDataParallelPlugin()
    assert _fsdp_differences(ours.FullyShardedDataParallelPlugin(), theirs) == []
    for name in variables:
        del fsdp_env[f"FSDP_{name}"]
    renamed = {"TRANSFORMER_CLS_TO_WRAP": "TRANSFORMER_LAYER_CLS_TO_WRAP"}
    fsdp_env.update({f"ACCEL_FSDP_{renamed.get(k, k)}": v for k, v in variables.items()})
    assert _fsdp_differences(ours.FullyShardedDataParallelPlugin(), theirs) == []


def test_fsdp_plugin_documented_differences(fsdp_env):
    """migration-behaviour.md, "Plugins and kwargs after construction"."""
    from torch.distributed.fsdp import ShardingStrategy

    # FSDP1 keeps the original parameters unless told otherwise.
    mine, theirs = _both("FullyShardedDataParallelPlugin")
    assert (mine.use_orig_params, theirs.use_orig_params) == (True, False)
    assert _fsdp_differences(mine, theirs, skip=("use_orig_params",)) == []
    # Class names alone choose the transformer policy; the reference leaves NO_WRAP.
    mine, theirs = _both("FullyShardedDataParallelPlugin", transformer_cls_names_to_wrap=["B"])
    assert mine.auto_wrap_policy.__name__ == "transformer_auto_wrap_policy"
    assert theirs.auto_wrap_policy is None
    # SIZE_BASED_WRAP without a size takes torch's 100M, not 0 (= no wrapping).
    mine, theirs = _both("FullyShardedDataParallelPlugin", auto_wrap_policy="SIZE_BASED_WRAP")
    assert (mine.min_num_params, theirs.min_num_params) == (10**8, 0)
    # FSDP2 with a sharding strategy: accel derives reshard_after_forward, the reference refuses.
    mine = ours.FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="SHARD_GRAD_OP")
    assert mine.sharding_strategy is ShardingStrategy.SHARD_GRAD_OP
    assert mine.reshard_after_forward is False
    with pytest.raises(ValueError, match="reshard_after_forward"):
        ref.FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="SHARD_GRAD_OP")


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("TERecipeKwargs", {}),
        ("TERecipeKwargs", {"margin": 2, "fp8_format": "e4m3", "use_mxfp8_block_scaling": True}),
        ("MSAMPRecipeKwargs", {}),
        ("MSAMPRecipeKwargs", {"opt_level": "O1"}),
    ],
)
def test_fp8_recipe_values(name, kwargs, monkeypatch):
    # The reference refuses to build a TE recipe without Transformer Engine installed; pretend
    # it is there so the values it fills can be compared.
    monkeypatch.setattr(ref.dataclasses, "is_transformer_engine_available", lambda: True)
    mine, theirs = _both(name, **kwargs)
    names = [f for f in vars(theirs) if not f.startswith("_")]
    assert _fields(mine, names) == _fields(theirs, names)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"comm_hook": "fp16"},
        {
            "comm_hook": "power_sgd",
            "comm_wrapper": "bf16",
            "comm_state_option": {"matrix_approximation_rank": 2},
        },
    ],
)
def test_ddp_kwargs_values(kwargs):
    theirs_kwargs = dict(kwargs)
    for key in ("comm_hook", "comm_wrapper"):
        if key in theirs_kwargs:
            theirs_kwargs[key] = ref.DDPCommunicationHookType(theirs_kwargs[key])
    mine = ours.DistributedDataParallelKwargs(**kwargs)
    theirs = ref.DistributedDataParallelKwargs(**theirs_kwargs)
    for name in ("comm_hook", "comm_wrapper"):
        assert getattr(mine, name).value == getattr(theirs, name).value
    assert mine.comm_state_option == theirs.comm_state_option
    assert mine.to_kwargs() == theirs.to_kwargs()


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"dp_replicate_size": 2, "dp_shard_size": 2, "tp_size": 2},
        {"cp_size": 2},
        {"sp_size": 2, "sp_backend": "deepspeed"},
    ],
)
def test_parallelism_config_values(kwargs):
    mine = ours.ParallelismConfig(**kwargs)
    theirs = RefParallelismConfig(**kwargs)
    names = [
        "dp_replicate_size",
        "dp_shard_size",
        "tp_size",
        "cp_size",
        "cp_backend",
        "sp_size",
        "sp_backend",
    ]
    assert _fields(mine, names) == _fields(theirs, names)
    assert (mine.cp_handler is None) == (theirs.cp_handler is None)
    assert (mine.sp_handler is None) == (theirs.sp_handler is None)
    if theirs.cp_handler is not None:
        assert mine.cp_handler.cp_comm_strategy == theirs.cp_handler.cp_comm_strategy
    if theirs.sp_handler is not None:
        assert vars(mine.sp_handler) == vars(theirs.sp_handler)


@pytest.mark.parametrize(
    ("environment", "kwargs"),
    [
        ({}, {}),
        ({}, {"backend": "inductor", "disable": True, "use_regional_compilation": True}),
        (
            {
                "ACCELERATE_DYNAMO_BACKEND": "aot_ts_nvfuser",
                "ACCELERATE_DYNAMO_MODE": "max-autotune",
            },
            {},
        ),
        ({"ACCELERATE_DYNAMO_USE_FULLGRAPH": "true", "ACCELERATE_DYNAMO_USE_DYNAMIC": "1"}, {}),
    ],
)
def test_dynamo_plugin_values(environment, kwargs, monkeypatch):
    # The defaults to_kwargs compares against are those of an empty environment, so the
    # values the environment gave count as set.
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    mine, theirs = _both("TorchDynamoPlugin", **kwargs)
    assert mine.to_kwargs() == theirs.to_kwargs()
    assert mine.to_dict() == theirs.to_dict()
    # The accel name of a variable is read the same way as the reference's.
    for name, value in environment.items():
        monkeypatch.delenv(name)
        monkeypatch.setenv(name.replace("ACCELERATE_", "ACCEL_"), value)
    assert ours.TorchDynamoPlugin(**kwargs).to_kwargs() == theirs.to_kwargs()
