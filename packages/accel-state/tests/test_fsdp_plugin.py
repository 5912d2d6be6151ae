"""FSDP and tensor-parallel settings in one process: the plugin dataclasses, what they read from
the launcher's environment, and their errors (the engine that applies them is tested in the
accel suite: test_fsdp_engine.py, test_fsdp_multiprocess.py)."""

import pytest

from accel_state import (
    FullyShardedDataParallelPlugin,
    ParallelismConfig,
    TorchTensorParallelPlugin,
    patch_environment,
)


def test_plugin_defaults():
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.is_fsdp2
    assert plugin.sharding_strategy == "FULL_SHARD" and plugin.reshard_after_forward is True
    assert plugin.state_dict_type == "SHARDED_STATE_DICT"
    assert plugin.auto_wrap_policy == "NO_WRAP"
    assert plugin.sync_module_states and plugin.use_orig_params and not plugin.cpu_offload
    assert FullyShardedDataParallelPlugin(fsdp_version=1).state_dict_type == "FULL_STATE_DICT"


def test_plugin_reads_launcher_environment_and_arguments_win():
    env = {
        "ACCEL_FSDP_VERSION": "1",
        "ACCEL_FSDP_SHARDING_STRATEGY": "SHARD_GRAD_OP",
        "ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP": "Block,Attention",
        "ACCEL_FSDP_OFFLOAD_PARAMS": "1",
        "ACCEL_FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT",
        "ACCEL_FSDP_ACTIVATION_CHECKPOINTING": "true",
        "ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING": "1",
    }
    with patch_environment(**env):
        plugin = FullyShardedDataParallelPlugin()
        explicit = FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="FULL_SHARD")
    assert plugin.fsdp_version == 1 and plugin.sharding_strategy == "SHARD_GRAD_OP"
    assert plugin.reshard_after_forward is False
    assert plugin.auto_wrap_policy == "TRANSFORMER_BASED_WRAP"
    assert plugin.transformer_cls_names_to_wrap == ["Block", "Attention"]
    assert plugin.cpu_offload is True and plugin.activation_checkpointing is True
    assert plugin.cpu_ram_efficient_loading is True
    assert plugin.state_dict_type == "SHARDED_STATE_DICT"
    assert explicit.fsdp_version == 2 and explicit.sharding_strategy == "FULL_SHARD"


def test_plugin_accepts_torch_enums_and_numbers():
    from torch.distributed.fsdp import BackwardPrefetch, ShardingStrategy

    plugin = FullyShardedDataParallelPlugin(
        sharding_strategy=ShardingStrategy.HYBRID_SHARD,
        backward_prefetch=BackwardPrefetch.BACKWARD_POST,
    )
    assert plugin.sharding_strategy == "HYBRID_SHARD"
    assert plugin.backward_prefetch == "BACKWARD_POST"
    assert FullyShardedDataParallelPlugin(sharding_strategy=2).sharding_strategy == "SHARD_GRAD_OP"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"fsdp_version": 3}, ["fsdp_version must be 1 or 2", "got 3"]),
        ({"sharding_strategy": "SPLIT"}, ["FULL_SHARD", "'SPLIT'"]),
        ({"auto_wrap_policy": "LAYER_WRAP"}, ["TRANSFORMER_BASED_WRAP", "'LAYER_WRAP'"]),
        (
            {"cpu_ram_efficient_loading": True, "sync_module_states": False},
            ["sync_module_states=True"],
        ),
        ({"use_orig_params": False}, ["fsdp_version=1"]),
        ({"state_dict_type": "LOCAL_STATE_DICT"}, ["FSDP1 only"]),
    ],
)
def test_plugin_errors_state_rule_value_and_fix(kwargs, words):
    with pytest.raises(ValueError) as err:
        FullyShardedDataParallelPlugin(**kwargs)
    for word in words:
        assert word in str(err.value), str(err.value)


def test_parallelism_config_layout():
    config = ParallelismConfig(tp_size=2)
    config.validate(4)  # dp_shard takes what the others leave
    assert config.sizes == {"dp_replicate": 1, "dp_shard": 2, "cp": 1, "tp": 2}
    assert config.mesh_dim_names == ("dp_shard", "tp") and config.dp_dim_names == ("dp_shard",)
    hsdp = ParallelismConfig(dp_replicate_size=2, dp_shard_size=1)
    assert hsdp.mesh_dim_names == ("dp_replicate", "dp_shard")
    assert ParallelismConfig(tp_size=2, dp_shard_size=1).mesh_dim_names == ("tp",)
    with pytest.raises(ValueError, match=r"equal the number of processes \(4\)"):
        ParallelismConfig(dp_shard_size=3).validate(4)
    with pytest.raises(ValueError, match="integer >= 1"):
        ParallelismConfig(tp_size=0)
    with pytest.raises(ValueError, match="differ"):
        ParallelismConfig(tp_size=2, tp_handler=TorchTensorParallelPlugin(tp_size=4))
    with patch_environment(ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE="2"):
        assert ParallelismConfig().dp_replicate_size == 2


def test_positional_order_and_activation_checkpointing_offload_follow_the_reference():
    plugin = FullyShardedDataParallelPlugin(1, "SHARD_GRAD_OP")
    assert (plugin.fsdp_version, plugin.sharding_strategy) == (1, "SHARD_GRAD_OP")
    assert plugin.activation_checkpointing_offload is False
    offload = FullyShardedDataParallelPlugin(
        activation_checkpointing=True, activation_checkpointing_offload=True
    )
    assert offload.activation_checkpointing_offload is True


@pytest.mark.parametrize(
    "kwargs",
    [
        {"activation_checkpointing_offload": True},
        {
            "fsdp_version": 1,
            "activation_checkpointing": True,
            "activation_checkpointing_offload": True,
        },
    ],
)
def test_activation_checkpointing_offload_needs_checkpointing_and_fsdp2(kwargs):
    with pytest.raises(ValueError, match="needs activation_checkpointing=True and fsdp_version=2"):
        FullyShardedDataParallelPlugin(**kwargs)


def test_activation_checkpointing_offload_from_the_environment(monkeypatch):
    monkeypatch.setenv("ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "1")
    monkeypatch.setenv("ACCEL_FSDP_ACTIVATION_CHECKPOINTING", "1")
    assert FullyShardedDataParallelPlugin().activation_checkpointing_offload is True
