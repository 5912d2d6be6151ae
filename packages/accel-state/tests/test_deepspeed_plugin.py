"""The DeepSpeed plugin in one process: the config it builds from its fields, the launcher's
environment and a config file, and the read-only config view (the engine and the Accelerator's
checks are tested in the accel suite: test_deepspeed.py)."""

import json

import pytest

from accel_state import DeepSpeedPlugin, HfDeepSpeedConfig, patch_environment


def test_plugin_builds_a_config_from_its_fields():
    plugin = DeepSpeedPlugin(zero_stage=3, gradient_clipping=1.0, offload_optimizer_device="cpu")
    config = plugin.deepspeed_config
    assert config["zero_optimization"]["stage"] == 3
    assert config["zero_optimization"]["offload_optimizer"] == {"device": "cpu"}
    assert config["gradient_clipping"] == 1.0
    assert config["train_micro_batch_size_per_gpu"] == "auto"
    assert plugin.is_zero3 and plugin.zero3_init_flag  # ZeRO 3 builds partitioned by default
    assert not DeepSpeedPlugin(zero_stage=3, zero3_init_flag=False).zero3_init_flag
    assert DeepSpeedPlugin().zero_stage == 2  # the default without a config


def test_plugin_reads_the_launcher_environment(tmp_path):
    env = {
        "ACCEL_DEEPSPEED_ZERO_STAGE": "3",
        "ACCEL_GRADIENT_ACCUMULATION_STEPS": "4",
        "ACCEL_GRADIENT_CLIPPING": "0.5",
        "ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE": "cpu",
        "ACCEL_DEEPSPEED_ZERO3_INIT_FLAG": "1",
        "ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": "1",
    }
    with patch_environment(**env):
        plugin = DeepSpeedPlugin()
    assert plugin.zero_stage == 3 and plugin.gradient_accumulation_steps == 4
    assert plugin.gradient_clipping == 0.5 and plugin.zero3_init_flag
    zero = plugin.deepspeed_config["zero_optimization"]
    assert zero["offload_param"]["device"] == "cpu"
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    # An explicit argument wins over the environment.
    with patch_environment(**env):
        assert DeepSpeedPlugin(zero_stage=3, gradient_clipping=2.0).gradient_clipping == 2.0


def test_config_file_fills_auto_and_lists_every_mismatch(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        json.dumps(
            {
                "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "auto"}},
                "gradient_clipping": 1.0,
                "gradient_accumulation_steps": "auto",
            }
        )
    )
    plugin = DeepSpeedPlugin(hf_ds_config=str(path), offload_optimizer_device="cpu")
    assert plugin.deepspeed_config["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert plugin.gradient_clipping == 1.0
    with patch_environment(ACCEL_DEEPSPEED_ZERO_STAGE="3", ACCEL_DEEPSPEED_CONFIG_FILE=str(path)):
        with pytest.raises(ValueError) as info:
            DeepSpeedPlugin(gradient_clipping=0.5)
    message = str(info.value)
    assert "zero_optimization.stage=2 vs accel 3" in message
    assert "gradient_clipping=1.0 vs accel 0.5" in message
    assert '"auto"' in message  # says how to fix it


def test_hf_config_view():
    view = HfDeepSpeedConfig(
        {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    )
    assert view.is_zero3() and view.is_offload() and view.get_value("a.b", 7) == 7
    view.del_config_sub_tree("zero_optimization.offload_param")
    assert not view.is_offload()


def test_unset_fields_show_the_values_deepspeed_will_use():
    plugin = DeepSpeedPlugin()
    assert plugin.gradient_accumulation_steps == "auto" and plugin.gradient_clipping == "auto"
    assert plugin.offload_optimizer_device == "none" and plugin.offload_param_device == "none"
    assert plugin.offload_optimizer_nvme_path == "none" and plugin.offload_param_nvme_path == "none"
    assert plugin.zero3_save_16bit_model is False
    assert (plugin.enable_msamp, plugin.msamp_opt_level) == (False, "O1")
    # The built config keeps no nvme path and no clipping that nobody asked for.
    zero = plugin.deepspeed_config["zero_optimization"]
    assert "nvme_path" not in zero["offload_optimizer"]
    assert "gradient_clipping" not in plugin.deepspeed_config


def test_config_values_fill_the_fields():
    plugin = DeepSpeedPlugin(
        hf_ds_config={
            "gradient_accumulation_steps": 4,
            "gradient_clipping": 1.0,
            "zero_optimization": {"stage": 1},
        }
    )
    assert (plugin.gradient_accumulation_steps, plugin.gradient_clipping) == (4, 1.0)
    assert plugin.zero_stage == 1


def test_msamp_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="does not drive MS-AMP"):
        DeepSpeedPlugin(enable_msamp=True)
    with pytest.raises(ValueError, match="msamp_opt_level must be 'O1' or 'O2'"):
        DeepSpeedPlugin(msamp_opt_level="O3")
    assert DeepSpeedPlugin(msamp_opt_level="O2").msamp_opt_level == "O2"
