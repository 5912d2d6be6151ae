"""DeepSpeed in the Accelerator: its checks of the plugin against the Accelerator's settings (one
process), and training on 2 processes (the plugin alone is tested in accel-state:
test_deepspeed_plugin.py)."""

import os
import sys
from pathlib import Path

import pytest
import torch
from accel_state import (
    AcceleratorState,
    DeepSpeedPlugin,
    GradientState,
    patch_environment,
)
from accel_state.testing import run_distributed

from accel import Accelerator

SCRIPTS = Path(__file__).parent / "scripts"
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)


def test_config_never_switches_precision_silently():
    plugin = DeepSpeedPlugin(hf_ds_config={"fp16": {"enabled": True}, "zero_optimization": {}})
    with pytest.raises(ValueError, match=r"fp16.enabled=True vs accel mixed_precision='bf16'"):
        Accelerator(cpu=True, mixed_precision="bf16", deepspeed_plugin=plugin)
    AcceleratorState._reset_state()
    plugin = DeepSpeedPlugin(hf_ds_config={"bf16": {"enabled": True}})
    with pytest.raises(ValueError, match=r"bf16.enabled=True vs accel mixed_precision='no'"):
        Accelerator(cpu=True, deepspeed_plugin=plugin)
    AcceleratorState._reset_state()
    plugin = DeepSpeedPlugin(hf_ds_config={"bf16": {"enabled": "auto"}})
    acc = Accelerator(cpu=True, mixed_precision="bf16", deepspeed_plugin=plugin)
    assert plugin.deepspeed_config["bf16"] == {"enabled": True}
    assert acc.distributed_type.value == "DEEPSPEED"
    assert acc.scaler is None and not acc.native_amp  # DeepSpeed casts and scales itself


def test_accumulation_steps_agree_or_raise():
    acc = Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin(gradient_accumulation_steps=4))
    assert acc.gradient_accumulation_steps == 4
    AcceleratorState._reset_state()
    GradientState._reset_state()
    with pytest.raises(ValueError, match="gradient_accumulation_steps=4 in DeepSpeed and 2"):
        Accelerator(
            cpu=True,
            gradient_accumulation_steps=2,
            deepspeed_plugin=DeepSpeedPlugin(gradient_accumulation_steps=4),
        )


def test_unsupported_combinations_raise_clearly():
    with pytest.raises(
        ValueError, match="FSDP and DeepSpeed both shard the model and cannot be combined"
    ):
        Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin(), fsdp_plugin=object())
    with patch_environment(ACCEL_USE_DEEPSPEED="1", ACCEL_USE_FSDP="1"):
        with pytest.raises(ValueError, match="ACCEL_USE_FSDP=1"):
            Accelerator(cpu=True)
    with pytest.raises(ValueError, match="offload_param_device needs ZeRO stage 3"):
        DeepSpeedPlugin(zero_stage=2, offload_param_device="cpu")
    with pytest.raises(ValueError, match="zero3_init_flag .* needs ZeRO stage 3"):
        DeepSpeedPlugin(zero_stage=2, zero3_init_flag=True)
    with pytest.raises(ValueError, match="zero_stage must be 0, 1, 2 or 3; got '5'"):
        DeepSpeedPlugin(zero_stage="5")


def test_several_plugins_select_by_name():
    plugins = {"a": DeepSpeedPlugin(zero_stage=2), "b": DeepSpeedPlugin(zero_stage=3)}
    acc = Accelerator(cpu=True, deepspeed_plugins=plugins)
    assert acc.state.deepspeed_plugin is plugins["a"]
    acc.state.select_deepspeed_plugin("b")
    assert acc.state.deepspeed_plugin is plugins["b"] and not plugins["a"].selected
    with pytest.raises(ValueError, match="no DeepSpeed plugin is named 'c'"):
        acc.state.select_deepspeed_plugin("c")
    with pytest.raises(ValueError, match="select_deepspeed_plugin"):
        plugins["a"].select()


def test_placeholder_values_fill_only_auto_entries_as_in_the_reference():
    # transformers' Trainer completes the optimizer and scheduler sections itself, then hands
    # DummyOptim(params) (lr 0.001 by default) and DummyScheduler(optimizer) to prepare.
    from accel._engines.deepspeed._deepspeed_config import complete_config
    from accel.utils import DummyOptim, DummyScheduler

    config = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": 2},
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": "auto"}},
        "scheduler": {
            "type": "WarmupDecayLR",
            "params": {"total_num_steps": 8, "warmup_max_lr": "auto", "warmup_num_steps": 0},
        },
    }
    plugin = DeepSpeedPlugin(hf_ds_config=config)
    acc = Accelerator(cpu=True, deepspeed_plugin=plugin)
    model = torch.nn.Linear(2, 2)
    optimizer = DummyOptim(model.parameters(), weight_decay=0.1)
    done = complete_config(
        acc.engine.context, plugin, model, optimizer, DummyScheduler(optimizer), 1
    )
    assert done["optimizer"]["params"] == {"lr": 0.01, "weight_decay": 0.1}
    assert done["scheduler"]["params"] == {
        "total_num_steps": 8,
        "warmup_max_lr": 0.001,
        "warmup_num_steps": 0,
    }


def test_missing_deepspeed_names_the_install_command(monkeypatch):
    from accel._engines.deepspeed._deepspeed import import_deepspeed

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # what an absent package looks like
    with pytest.raises(ImportError, match=r'pip install "accel-torch\[deepspeed\]"'):
        import_deepspeed()


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(1600)  # two 2-process runs (up to 900 s + 600 s, ops compiled once)
def test_zero_stages_match_ddp_save_and_resume(tmp_path):
    pytest.importorskip("deepspeed", reason="needs deepspeed: pip install 'accel-torch[deepspeed]'")
    env = {"TORCH_EXTENSIONS_DIR": EXTENSIONS}
    script = SCRIPTS / "ds_checks.py"
    first = run_distributed(script, str(tmp_path), "train", timeout=900, env=env)
    for name in (
        "engine_without_accelerator",
        "zero_parity_save",
        "config_file_and_dummies",
        "two_plugins_and_zero3_init",
    ):
        assert f"PASSED check_{name}" in first.stdout, first.stdout + first.stderr
    second = run_distributed(script, str(tmp_path), "resume", timeout=600, env=env)
    assert "PASSED check_resume_continues" in second.stdout, second.stdout + second.stderr
