"""Differential tests: the plugin and kwargs dataclasses built with the same arguments in accel
and in the reference library (``accelerate``) show the same values after construction.

Deliberate differences are listed in ``docs/migration-behaviour.md`` ("Plugins and kwargs
after construction") and are left out of the compared fields here.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

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


FSDP_FIELDS = [
    "reshard_after_forward",
    "limit_all_gathers",
    "activation_checkpointing",
    "activation_checkpointing_offload",
    "cpu_ram_efficient_loading",
    "transformer_cls_names_to_wrap",
    "min_num_params",
]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fsdp_version": 2},
        {
            "fsdp_version": 2,
            "activation_checkpointing": True,
            "activation_checkpointing_offload": True,
        },
        {"fsdp_version": 2, "reshard_after_forward": False, "cpu_ram_efficient_loading": True},
        {"fsdp_version": 2, "transformer_cls_names_to_wrap": ["Block"]},
    ],
)
def test_fsdp_plugin_values(kwargs):
    mine, theirs = _both("FullyShardedDataParallelPlugin", **kwargs)
    assert _fields(mine, FSDP_FIELDS) == _fields(theirs, FSDP_FIELDS)
    assert mine.fsdp_version == theirs.fsdp_version
    # The reference turns names into torch enum members; accel keeps the names.
    assert mine.state_dict_type == theirs.state_dict_type.name


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
