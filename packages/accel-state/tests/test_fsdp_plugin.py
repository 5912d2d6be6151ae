"""FSDP and tensor-parallel settings in one process: the plugin dataclasses, what they read from
the launcher's environment, and their errors (the engine that applies them is tested in the
accel suite: test_fsdp_engine.py, test_fsdp_multiprocess.py)."""

import pytest
import torch

from accel_state import (
    FullyShardedDataParallelPlugin,
    ParallelismConfig,
    TorchTensorParallelPlugin,
    patch_environment,
)


def test_plugin_defaults_are_the_reference_torch_objects():
    from torch.distributed.fsdp import (
        CPUOffload,
        FullStateDictConfig,
        OffloadPolicy,
        ShardedStateDictConfig,
        ShardingStrategy,
        StateDictType,
    )

    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 1 and not plugin.is_fsdp2
    assert plugin.sharding_strategy is ShardingStrategy.FULL_SHARD
    assert plugin.reshard_after_forward is None and plugin.backward_prefetch is None
    assert plugin.state_dict_type is StateDictType.FULL_STATE_DICT
    assert isinstance(plugin.state_dict_config, FullStateDictConfig)
    assert plugin.state_dict_config.rank0_only and plugin.state_dict_config.offload_to_cpu
    assert plugin.auto_wrap_policy is None and plugin.mixed_precision_policy is None
    assert plugin.cpu_offload == CPUOffload(offload_params=False)
    assert plugin.use_orig_params and plugin.sync_module_states is False
    fsdp2 = FullyShardedDataParallelPlugin(fsdp_version=2)
    assert fsdp2.sharding_strategy is None and fsdp2.reshard_after_forward is True
    assert fsdp2.state_dict_type is StateDictType.SHARDED_STATE_DICT
    assert isinstance(fsdp2.state_dict_config, ShardedStateDictConfig)
    assert type(fsdp2.cpu_offload) is OffloadPolicy
    assert (fsdp2.use_orig_params, fsdp2.sync_module_states, fsdp2.forward_prefetch) == (
        None,
        None,
        None,
    )


def test_plugin_reads_launcher_environment_and_arguments_win():
    from torch.distributed.fsdp import CPUOffload, ShardingStrategy, StateDictType
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    env = {
        "ACCEL_FSDP_VERSION": "1",
        "ACCEL_FSDP_SHARDING_STRATEGY": "SHARD_GRAD_OP",
        "ACCEL_FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
        "ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP": "Block,Attention",
        "ACCEL_FSDP_OFFLOAD_PARAMS": "1",
        "ACCEL_FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT",
        "ACCEL_FSDP_ACTIVATION_CHECKPOINTING": "true",
        "ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING": "1",
    }
    with patch_environment(**env):
        plugin = FullyShardedDataParallelPlugin()
        explicit = FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="FULL_SHARD")
    assert plugin.fsdp_version == 1 and plugin.sharding_strategy is ShardingStrategy.SHARD_GRAD_OP
    assert plugin.auto_wrap_policy is transformer_auto_wrap_policy
    assert plugin.transformer_cls_names_to_wrap == ["Block", "Attention"]
    assert plugin.cpu_offload == CPUOffload(offload_params=True)
    assert plugin.activation_checkpointing is True
    assert plugin.cpu_ram_efficient_loading is True and plugin.sync_module_states is True
    assert plugin.state_dict_type is StateDictType.SHARDED_STATE_DICT
    assert explicit.fsdp_version == 2 and explicit.sharding_strategy is ShardingStrategy.FULL_SHARD
    assert explicit.reshard_after_forward is True


def test_plugin_accepts_torch_enums_numbers_and_objects():
    from torch.distributed.fsdp import (
        BackwardPrefetch,
        CPUOffloadPolicy,
        MixedPrecision,
        MixedPrecisionPolicy,
        ShardingStrategy,
    )

    plugin = FullyShardedDataParallelPlugin(
        sharding_strategy=ShardingStrategy.HYBRID_SHARD,
        backward_prefetch=BackwardPrefetch.BACKWARD_POST,
        mixed_precision_policy={"param_dtype": "bf16", "reduce_dtype": torch.float32},
    )
    assert plugin.sharding_strategy is ShardingStrategy.HYBRID_SHARD
    assert plugin.backward_prefetch is BackwardPrefetch.BACKWARD_POST
    assert plugin.mixed_precision_policy == MixedPrecision(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32
    )
    two = FullyShardedDataParallelPlugin(
        2, sharding_strategy="hybrid_shard_zero2", mixed_precision_policy="fp16", cpu_offload=True
    )
    assert two.sharding_strategy is ShardingStrategy._HYBRID_SHARD_ZERO2
    assert two.reshard_after_forward is False  # the ZeRO-2 flavour keeps gathered parameters
    assert two.mixed_precision_policy == MixedPrecisionPolicy(
        param_dtype=torch.float16, reduce_dtype=torch.float16, output_dtype=torch.float16
    )
    assert isinstance(two.cpu_offload, CPUOffloadPolicy)
    assert FullyShardedDataParallelPlugin(sharding_strategy=2).sharding_strategy is (
        ShardingStrategy.SHARD_GRAD_OP
    )
    with pytest.raises(ValueError, match="fsdp_version=2 must be a MixedPrecisionPolicy"):
        FullyShardedDataParallelPlugin(2, mixed_precision_policy=MixedPrecision())


def test_wrap_policy_binds_to_the_model_like_the_reference():
    from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    plugin = FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap="Linear")
    plugin.set_auto_wrap_policy(net)
    assert plugin.auto_wrap_policy.keywords == {"transformer_layer_cls": {torch.nn.Linear}}
    size = FullyShardedDataParallelPlugin(auto_wrap_policy="size_based_wrap")
    assert size.auto_wrap_policy is size_based_auto_wrap_policy and size.min_num_params == 10**8
    size.set_auto_wrap_policy(net)
    assert size.auto_wrap_policy.keywords == {"min_num_params": 10**8}
    with pytest.raises(ValueError, match="'Blok', which is not a class of the model"):
        FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Blok"]).set_auto_wrap_policy(
            net
        )


def test_set_state_dict_type_and_mixed_precision_methods():
    from torch.distributed.fsdp import FullStateDictConfig, MixedPrecision, StateDictType

    plugin = FullyShardedDataParallelPlugin(state_dict_type="sharded_state_dict")
    plugin.set_state_dict_type("FULL_STATE_DICT")
    assert plugin.state_dict_type is StateDictType.FULL_STATE_DICT
    assert not isinstance(plugin.state_dict_config, FullStateDictConfig)  # a set config is kept
    plugin.set_state_dict_type()
    assert plugin.state_dict_type is StateDictType.FULL_STATE_DICT
    plugin.set_mixed_precision("bf16", buffer_autocast=True)
    assert plugin.mixed_precision_policy == MixedPrecision(
        param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.float32
    )
    plugin.validate_mixed_precision_policy()
    plugin.validate_cpu_offload()
    with pytest.raises(ValueError, match="one of fp8, fp16"):
        plugin.set_mixed_precision("fp64", override=True)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"fsdp_version": 3}, ["fsdp_version must be 1 or 2", "got 3"]),
        ({"fsdp_version": 2, "reshard_after_forward": "maybe"}, ["must be a bool", "'maybe'"]),
        ({"reshard_after_forward": True}, ["fsdp_version=1", "sharding strategy"]),
        ({"fsdp_version": 2, "forward_prefetch": True}, ["FSDP1 only"]),
        ({"cpu_offload": "yes"}, ["a bool or a CPUOffload", "'yes'"]),
        ({"sharding_strategy": "SPLIT"}, ["FULL_SHARD", "'SPLIT'"]),
        ({"auto_wrap_policy": "LAYER_WRAP"}, ["TRANSFORMER_BASED_WRAP", "'LAYER_WRAP'"]),
        (
            {"cpu_ram_efficient_loading": True, "sync_module_states": False},
            ["sync_module_states=True"],
        ),
        ({"fsdp_version": 2, "use_orig_params": False}, ["fsdp_version=1"]),
        ({"fsdp_version": 2, "state_dict_type": "LOCAL_STATE_DICT"}, ["FSDP1 only"]),
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
    assert config.sizes == {"dp_replicate": 1, "dp_shard": 2, "cp": 1, "sp": 1, "tp": 2}
    assert config.mesh_dim_names == ("dp_shard", "tp") and config.dp_dim_names == ("dp_shard",)
    hsdp = ParallelismConfig(dp_replicate_size=2, dp_shard_size=1)
    assert hsdp.mesh_dim_names == ("dp_replicate",)  # a dimension of size 1 is left out
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
    assert (plugin.fsdp_version, plugin.sharding_strategy.name) == (1, "SHARD_GRAD_OP")
    assert plugin.activation_checkpointing_offload is False
    offload = FullyShardedDataParallelPlugin(
        fsdp_version=2, activation_checkpointing=True, activation_checkpointing_offload=True
    )
    assert offload.activation_checkpointing_offload is True


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fsdp_version": 2, "activation_checkpointing_offload": True},
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
    monkeypatch.setenv("FSDP_VERSION", "2")
    assert FullyShardedDataParallelPlugin().activation_checkpointing_offload is True
