"""ParallelismConfig's context / sequence parallel settings: the handler dataclasses, their
validation, the refusal of sequence splitting, and the round trip through the environment."""

import pytest
import torch

from accel_state import (
    DeepSpeedSequenceParallelConfig,
    ParallelismConfig,
    TorchContextParallelConfig,
    TorchTensorParallelConfig,
    TorchTensorParallelPlugin,
    patch_environment,
)


def test_defaults_follow_the_reference():
    config = ParallelismConfig()
    assert (config.cp_backend, config.sp_backend, config.sp_size) == ("torch", "deepspeed", 1)
    assert config.cp_handler is None and config.sp_handler is None
    assert not config.sp_enabled and not config.cp_enabled
    assert TorchContextParallelConfig().cp_comm_strategy == "allgather"
    sp = DeepSpeedSequenceParallelConfig()
    assert (sp.sp_seq_length, sp.sp_seq_length_is_variable, sp.sp_attn_implementation) == (
        None,
        True,
        None,
    )
    assert TorchTensorParallelConfig().enable_async_tp is False


def test_handlers_are_filled_and_each_sequence_split_needs_its_engine():
    cp = ParallelismConfig(cp_size=2)
    assert isinstance(cp.cp_handler, TorchContextParallelConfig)
    sp = ParallelismConfig(sp_size=2)
    assert isinstance(sp.sp_handler, DeepSpeedSequenceParallelConfig) and sp.sp_enabled
    cp.check_engine(deepspeed=False)
    sp.check_engine(deepspeed=True)  # Ulysses runs inside the DeepSpeed engine
    with pytest.raises(ValueError, match=r"sp_size=2 .* got no DeepSpeed plugin"):
        sp.check_engine(deepspeed=False)
    with pytest.raises(ValueError, match=r"cp_size=2 .* DeepSpeed plugin"):
        cp.check_engine(deepspeed=True)
    with pytest.raises(ValueError, match=r"tp_size=2 .* DeepSpeed plugin"):
        ParallelismConfig(tp_size=2).check_engine(deepspeed=True)
    ParallelismConfig().check_engine(deepspeed=True)


def test_sequence_dimensions_take_their_place_in_the_mesh():
    cp = ParallelismConfig(dp_shard_size=2, cp_size=2)
    cp.validate(4)
    assert cp.mesh_dim_names == ("dp_shard", "cp")
    assert (cp.dp_dim_names, cp.non_dp_dim_names) == (("dp_shard",), ("cp",))
    assert (cp.dp_shard_cp_dim_names, cp.dp_cp_dim_names) == (("dp_shard", "cp"),) * 2
    # Row-major: the context-parallel partner of process 0 is process 1.
    assert [cp.local_rank("cp", r) for r in range(4)] == [0, 1, 0, 1]
    assert [cp.local_rank("dp_shard", r) for r in range(4)] == [0, 0, 1, 1]
    sp = ParallelismConfig(sp_size=2)
    sp.validate(4)  # the data-parallel size fills what sp leaves
    assert (sp.dp_shard_size, sp.mesh_dim_names, sp.total_size) == (2, ("dp_shard", "sp"), 4)
    assert [sp.local_rank("sp", r) for r in range(4)] == [0, 1, 0, 1]
    with pytest.raises(ValueError, match=r"cp_size \* sp_size \* tp_size.*\(3\)"):
        ParallelismConfig(dp_shard_size=1, cp_size=2).validate(3)


@pytest.mark.parametrize(
    ("sizes", "names", "shape"),
    [
        ((8, 1, 1, 1), ("dp_replicate",), (8,)),
        ((2, 4, 1, 1), ("dp_replicate", "dp_shard"), (2, 4)),
        ((1, 4, 2, 1), ("dp_shard", "tp"), (4, 2)),
        ((1, 2, 2, 2), ("dp_shard", "cp", "tp"), (2, 2, 2)),
        ((2, 2, 2, 2), ("dp_replicate", "dp_shard", "cp", "tp"), (2, 2, 2, 2)),
        ((1, 1, 1, 4), ("cp",), (4,)),
    ],
)
def test_mesh_keeps_the_dimensions_above_one_outermost_first(sizes, names, shape):
    replicate, shard, tp, cp = sizes
    config = ParallelismConfig(
        dp_replicate_size=replicate, dp_shard_size=shard, tp_size=tp, cp_size=cp
    )
    assert config._get_mesh() == (names, shape)
    assert config.mesh_dim_names == names
    assert config.dp_dim_names == tuple(n for n in names if n.startswith("dp_"))
    assert config.dp_cp_dim_names == tuple(n for n in names if n != "tp")
    assert config.dp_shard_cp_dim_names == tuple(n for n in names if n in ("dp_shard", "cp"))


def test_a_layout_of_one_process_has_no_mesh():
    config = ParallelismConfig(dp_shard_size=1)
    assert config._get_mesh() == () and config.mesh_dim_names == ()
    assert config.dp_dim_names == config.dp_cp_dim_names == ()
    # Nothing to lay out: no mesh, and no process group is started for it.
    assert config.build_device_mesh("cpu") is None
    assert not torch.distributed.is_initialized()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ParallelismConfig(cp_backend="ring"), "cp_backend must be one of"),
        (lambda: ParallelismConfig(sp_backend="ulysses"), "sp_backend must be one of"),
        (lambda: ParallelismConfig(sp_size=0), "sp_size must be an integer >= 1"),
        (lambda: ParallelismConfig(cp_size=2, sp_size=2), "not both"),
        (
            lambda: ParallelismConfig(cp_handler=DeepSpeedSequenceParallelConfig()),
            "cp_handler must be a TorchContextParallelConfig",
        ),
        (lambda: TorchContextParallelConfig("ring"), "cp_comm_strategy must be one of"),
        (
            lambda: DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=False),
            "needs the fixed length",
        ),
        (
            lambda: DeepSpeedSequenceParallelConfig(sp_attn_implementation="eager"),
            "sp_attn_implementation must be one of",
        ),
        (lambda: TorchTensorParallelConfig(enable_async_tp=True), "does not enable"),
        (lambda: TorchTensorParallelPlugin(2, object()), "takes no mesh here"),
    ],
)
def test_invalid_settings_are_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    "name", ["ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY", "PARALLELISM_CONFIG_CP_COMM_STRATEGY"]
)
def test_a_bad_handler_setting_leads_with_the_setting_and_its_value(monkeypatch, name):
    # The reference's phrase first ('Invalid <field>: <value>'), then the rule and the fix.
    with pytest.raises(ValueError) as info:
        TorchContextParallelConfig("ring")
    assert str(info.value) == (
        "Invalid cp_comm_strategy: ring (TorchContextParallelConfig.cp_comm_strategy must be "
        "one of ['allgather', 'alltoall']). Use 'allgather' or 'alltoall'."
    )
    with pytest.raises(ValueError, match=r"^Invalid sp_attn_implementation: eager \(.* Use 'sdpa'"):
        DeepSpeedSequenceParallelConfig(sp_attn_implementation="eager")
    monkeypatch.setenv(name, " ring ")
    with pytest.raises(ValueError) as info:
        ParallelismConfig(cp_size=2)
    assert str(info.value) == (
        f"Invalid cp_comm_strategy: ring (environment variable {name} must be one of "
        "allgather, alltoall; got ' ring '. Set it to one of allgather, alltoall, or unset it.)"
    )


def test_hub_flash_attention_kernels_are_accepted():
    kernel = "kernels-community/flash-attn2"
    assert (
        DeepSpeedSequenceParallelConfig(sp_attn_implementation=kernel).sp_attn_implementation
        == kernel
    )


def test_tensor_parallel_config_becomes_the_plugin_of_tp_size():
    config = ParallelismConfig(tp_size=2, tp_handler=TorchTensorParallelConfig())
    assert isinstance(config.tp_handler, TorchTensorParallelPlugin)
    assert config.tp_handler.tp_size == 2 and config.tp_handler.tp_plan is None
    assert TorchTensorParallelPlugin(2, tp_plan={"a": "colwise"}).tp_plan == {"a": "colwise"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dp_replicate_size": 2, "dp_shard_size": 3, "tp_size": 2},
        {"cp_size": 4, "cp_handler": TorchContextParallelConfig("alltoall")},
        {
            "sp_size": 2,
            "sp_handler": DeepSpeedSequenceParallelConfig(
                sp_seq_length=128, sp_seq_length_is_variable=False, sp_attn_implementation="sdpa"
            ),
        },
    ],
)
def test_environment_round_trip(kwargs):
    config = ParallelismConfig(**kwargs)
    variables = config.to_env()
    assert all(name.startswith("ACCEL_PARALLELISM_CONFIG_") for name in variables)
    with patch_environment(**variables):
        again = ParallelismConfig()
    for name in ("dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "sp_size"):
        assert getattr(again, name) == getattr(config, name), name
    assert (again.cp_backend, again.sp_backend) == (config.cp_backend, config.sp_backend)
    assert again.cp_handler == config.cp_handler and again.sp_handler == config.sp_handler


def test_reference_variable_names_are_read():
    with patch_environment(
        PARALLELISM_CONFIG_SP_SIZE="2", PARALLELISM_CONFIG_CP_COMM_STRATEGY="alltoall"
    ):
        assert ParallelismConfig().sp_size == 2
        assert TorchContextParallelConfig().cp_comm_strategy == "alltoall"
    with patch_environment(ACCEL_PARALLELISM_CONFIG_SP_BACKEND="megatron"):
        with pytest.raises(ValueError, match="ACCEL_PARALLELISM_CONFIG_SP_BACKEND must be one of"):
            ParallelismConfig()
