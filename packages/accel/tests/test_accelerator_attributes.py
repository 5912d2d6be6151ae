"""Attributes of the reference's ``Accelerator`` that accel provides: handler views, FP8 and
parallelism flags, mesh ranks."""

import pytest
import torch
from accel_state import GradientState, ParallelismConfig, PartialState, patch_environment

from accel import Accelerator
from accel.utils import (
    AORecipeKwargs,
    AutocastKwargs,
    DistributedDataParallelKwargs,
    GradScalerKwargs,
    InitProcessGroupKwargs,
    ProfileKwargs,
)


def test_handler_views_return_the_handlers_passed():
    handlers = [
        DistributedDataParallelKwargs(bucket_cap_mb=5),
        GradScalerKwargs(init_scale=8.0),
        InitProcessGroupKwargs(),
        AutocastKwargs(enabled=False),
        ProfileKwargs(),
    ]
    acc = Accelerator(cpu=True, kwargs_handlers=handlers)
    assert acc.ddp_handler is handlers[0] and acc.scaler_handler is handlers[1]
    assert acc.init_handler is handlers[2] and acc.autocast_handler is handlers[3]
    assert acc.profile_handler is handlers[4]
    assert acc.te_recipe_handler is None and acc.ao_recipe_handler is None
    assert acc.msamp_recipe_handler is None
    assert not acc.has_fp8_handler and not acc.fp8_enabled
    bare = Accelerator(cpu=True)
    assert bare.ddp_handler is None and bare.autocast_handler is None


def test_fp8_views():
    pytest.importorskip("torchao", reason="the FP8 recipe needs torchao (pip install torchao)")
    recipe = AORecipeKwargs()
    acc = Accelerator(cpu=True, mixed_precision="fp8", kwargs_handlers=[recipe])
    assert acc.fp8_enabled and acc.has_fp8_handler
    assert acc.ao_recipe_handler is recipe and acc.te_recipe_handler is None


def test_run_flags_on_one_cpu_process():
    acc = Accelerator(cpu=True)
    assert acc.deepspeed_plugin is None and not acc.is_fsdp2
    assert not acc.is_composable_parallelism_enabled and not acc.multi_device
    assert acc.torch_device_mesh is None and acc.should_save_model
    assert acc.use_stateful_dataloader is False and acc.has_lomo_optimizer is False
    assert acc.delayed_fp8_autocast is False and PartialState().fork_launched is False
    assert PartialState().default_device.type in ("cpu", "cuda", "mps", "xpu")
    assert GradientState().is_xla_gradients_synced is False


def test_mesh_ranks_need_a_parallelism_config():
    acc = Accelerator(cpu=True)
    with pytest.raises(RuntimeError, match="needs a ParallelismConfig"):
        _ = acc.data_parallel_rank
    with pytest.raises(NotImplementedError, match="no pipeline dimension|does not have"):
        _ = acc.pipeline_parallel_rank
    config = Accelerator(cpu=True, parallelism_config=ParallelismConfig())
    ranks = (config.data_parallel_rank, config.data_parallel_shard_rank)
    assert ranks == (0, 0) and (config.tensor_parallel_rank, config.context_parallel_rank) == (0, 0)


@pytest.mark.parametrize("sizes", [(2, 2, 1, 2), (1, 4, 1, 2), (3, 1, 1, 1), (2, 1, 1, 3)])
def test_local_rank_follows_the_device_mesh_layout(sizes):
    # init_device_mesh numbers ranks as torch.arange(world).view(shape) over the built dims.
    replicate, shard, cp, tp = sizes
    config = ParallelismConfig(
        dp_replicate_size=replicate, dp_shard_size=shard, cp_size=cp, tp_size=tp
    )
    names = ("dp_replicate", "dp_shard", "cp", "tp")
    layout = torch.arange(replicate * shard * cp * tp).view(*sizes)
    for coords in torch.cartesian_prod(*[torch.arange(n) for n in sizes]).view(-1, 4).tolist():
        rank = int(layout[tuple(coords)])
        assert [config.local_rank(n, rank) for n in names] == coords
    with pytest.raises(ValueError, match="mesh dimensions"):
        config.local_rank("pp", 0)


def test_fork_launched_is_read_from_the_launcher_environment():
    with patch_environment(FORK_LAUNCHED="1"):
        assert PartialState(cpu=True).fork_launched is True
