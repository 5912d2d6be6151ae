import pytest
import torch
from bigmodel_helpers import Block, TinyLM
from torch import nn

from accel_bigmodel import (
    check_device_map,
    clean_device_map,
    compute_module_sizes,
    infer_auto_device_map,
    init_empty_weights,
)
from accel_bigmodel.placement._device_map import _layer_sizes
from accel_bigmodel.placement._sizes import scan_modules


@pytest.fixture
def skeleton():
    with init_empty_weights():
        return TinyLM(vocab=50, width=16, depth=6)


def _sizes(model):
    return compute_module_sizes(model)


def test_everything_fits_on_cpu(skeleton):
    assert infer_auto_device_map(skeleton, {"cpu": "1GB"}) == {"": "cpu"}


def test_gpus_first_then_cpu_then_disk(skeleton):
    s = _sizes(skeleton)
    block = s["blocks.0"]
    budget = {0: s["embed"] + 2 * block + 10, "cpu": 3 * block + 10, "disk": "1GB"}
    device_map = infer_auto_device_map(skeleton, budget, ["Block"], check_devices=False)
    values = list(device_map.values())
    assert values[0] == 0 and "cpu" in values and values[-1] == "disk"
    order = {0: 0, "cpu": 1, "disk": 2}
    assert [order[v] for v in values] == sorted(order[v] for v in values)
    check_device_map(skeleton, device_map, check_devices=False)


def test_reserves_only_the_largest_offloaded_layer(skeleton):
    s = _sizes(skeleton)
    block = s["blocks.0"]
    cpu = s["embed"] + s["scale"] + 4 * block + 1
    device_map = infer_auto_device_map(
        skeleton, {"cpu": cpu, "disk": "1GB"}, ["Block"], reserve="offloaded_layers"
    )
    on_cpu = [k for k, v in device_map.items() if v == "cpu" and k.startswith("blocks")]
    # 4 blocks of room: one is kept free to run the disk blocks, three are used.
    assert len(on_cpu) == 3
    assert device_map["blocks.5"] == "disk"


def test_small_layers_on_disk_need_only_their_own_room():
    # One big layer first, then many small ones: only the small layers go to disk, so only
    # their size is reserved.
    class Unbalanced(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.big = nn.Linear(100, 100)
            self.small = nn.ModuleList(nn.Linear(10, 10) for _ in range(20))

    with init_empty_weights():
        model = Unbalanced()
    s = _sizes(model)
    cpu = s["big"] + 10 * s["small.0"] + 1
    device_map = infer_auto_device_map(
        model, {"cpu": cpu, "disk": "1GB"}, reserve="offloaded_layers"
    )
    assert device_map["big"] == "cpu"
    on_cpu = [k for k, v in device_map.items() if v == "cpu" and k.startswith("small.")]
    assert len(on_cpu) == 9  # ten fit, one slot reserved for the small disk layers


class ThreeLayers(nn.Module):
    """linear1 64 bytes, batchnorm 72 (with 16 more of buffers), linear2 100."""

    def __init__(self) -> None:
        super().__init__()
        self.linear1 = nn.Linear(3, 4)
        self.batchnorm = nn.BatchNorm1d(4)
        self.linear2 = nn.Linear(4, 5)


def test_the_default_keeps_room_for_the_largest_layer_not_placed_yet():
    # GPU 0 keeps 100 bytes (linear2) free while it is filled, even though nothing ends up
    # offloaded: batchnorm goes to GPU 1 (the reference's placement).
    model = ThreeLayers()
    memory = {0: 200, 1: 200}
    expected = {"linear1": 0, "batchnorm": 1, "linear2": 1}
    assert infer_auto_device_map(model, dict(memory), check_devices=False) == expected
    # Keeping room for offloaded layers only: nothing is offloaded, so GPU 0 holds more.
    tight = infer_auto_device_map(
        model, dict(memory), check_devices=False, reserve="offloaded_layers"
    )
    assert tight == {"linear1": 0, "batchnorm": 0, "linear2": 1}


def test_an_unknown_reserve_is_refused():
    with pytest.raises(ValueError, match=r"reserve must be one of .*'largest'"):
        infer_auto_device_map(ThreeLayers(), {"cpu": 1000}, reserve="largest")


def test_tied_parameters_stay_together(skeleton):
    s = _sizes(skeleton)
    device_map = infer_auto_device_map(
        skeleton,
        {"cpu": s["embed"] + s["blocks.0"] * 2, "disk": "1GB"},
        ["Block"],
        clean_result=False,
    )
    assert device_map["embed"] == device_map["head"]


def test_a_cpu_too_small_for_the_largest_layer_is_left_out_unless_the_budget_is_strict(skeleton):
    s = _sizes(skeleton)
    memory = {"cpu": s["blocks.0"] // 2, "disk": "1GB"}
    # as the reference: the CPU cannot run an offloaded layer within its budget, so it holds
    # nothing and every layer streams from disk
    assert dict(infer_auto_device_map(skeleton, memory, ["Block"])) == {"": "disk"}
    with pytest.raises(ValueError, match="largest offloaded layer.*max_memory"):
        infer_auto_device_map(skeleton, memory, ["Block"], offload_to_disk=False)


def test_model_that_fits_nowhere_is_an_error_without_disk(skeleton):
    with pytest.raises(ValueError, match="fit on a device.*add 'disk'"):
        infer_auto_device_map(skeleton, {"cpu": 1000}, ["Block"], offload_to_disk=False)
    # with the disk added (the default), a CPU too small to run a layer is left out
    assert dict(infer_auto_device_map(skeleton, {"cpu": 1000}, ["Block"])) == {"": "disk"}


def test_verbose_prints_decisions(skeleton, capsys):
    s = _sizes(skeleton)
    infer_auto_device_map(skeleton, {"cpu": s[""] // 2, "disk": "1GB"}, ["Block"], verbose=True)
    out = capsys.readouterr().out
    assert "Putting" in out and "disk" in out


def test_dtype_changes_the_placement(skeleton):
    s = _sizes(skeleton)
    budget = {"cpu": s[""] // 2 + s["blocks.0"], "disk": "1GB"}
    fp32 = infer_auto_device_map(skeleton, budget, ["Block"])
    fp16 = infer_auto_device_map(skeleton, budget, ["Block"], dtype=torch.float16)
    assert "disk" in fp32.values() and fp16 == {"": "cpu"}


def test_clean_device_map_merges_uniform_subtrees():
    raw = {"a.x": 0, "a.y": 0, "b": 1, "c.d.e": 1, "c.d.f": 1, "c.g": 0}
    assert clean_device_map(raw) == {"a": 0, "b": 1, "c.d": 1, "c.g": 0}
    assert clean_device_map({"a": "cpu", "b.c": "cpu"}) == {"": "cpu"}


def test_clean_device_map_keeps_a_lone_entry_where_it_is():
    # A subtree is merged only when it covers several entries (the reference's rule): a lone
    # entry stays at its own depth, so a map of one child is not lifted to the model.
    assert clean_device_map({"c0": "disk"}) == {"c0": "disk"}
    assert clean_device_map({"c0": 1, "c1.c0": "disk"}) == {"c0": 1, "c1.c0": "disk"}
    assert clean_device_map({"a.b.c": 0, "a.d": 1}) == {"a.b.c": 0, "a.d": 1}
    assert clean_device_map({"a.b.c": 0, "a.b.e": 0, "a.d": 1}) == {"a.b": 0, "a.d": 1}
    raw = {"m.a.x": 0, "m.a.y": 1, "n.k": 0}
    assert clean_device_map(raw, module_name="m") == raw


def test_check_device_map_errors(skeleton):
    with pytest.raises(ValueError, match="'blocks.99'"):
        check_device_map(skeleton, {"embed": "cpu", "blocks.99": "cpu"})
    with pytest.raises(ValueError, match="no device|none"):
        check_device_map(skeleton, {"embed": "cpu"})


class _Expert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(4, 4, bias=False)
        self.w2 = nn.Linear(4, 4, bias=False)


class _MoE(nn.Module):
    def __init__(self, experts: int) -> None:
        super().__init__()
        self.experts = nn.ModuleList(_Expert() for _ in range(experts))


def _moe_skeleton(layers: int) -> nn.Module:
    with init_empty_weights():
        return nn.Sequential(*[_MoE(50) for _ in range(layers)])


def _plan_a_third_on_cpu(model: nn.Module, size: int) -> dict:
    return infer_auto_device_map(model, {"cpu": size // 3, "disk": "1GB"}, ["_Expert"])


def test_plans_many_modules_across_cpu_and_disk():
    # Planning time on ~100k modules is measured in benchmarks/bigmodel/bench_device_map.py.
    for layers in (8, 64):
        model = _moe_skeleton(layers)
        size = compute_module_sizes(model)[""]
        assert set(_plan_a_third_on_cpu(model, size).values()) == {"cpu", "disk"}


def test_no_split_block_goes_whole():
    with init_empty_weights():
        model = nn.Sequential(Block(16), Block(16), Block(16))
    s = _sizes(model)
    device_map = infer_auto_device_map(model, {"cpu": 2 * s["0"] + 10, "disk": "1GB"}, ["Block"])
    assert device_map == {"0": "cpu", "1": "disk", "2": "disk"}
    split = infer_auto_device_map(model, {"cpu": 2 * s["0"] + 10, "disk": "1GB"})
    assert any(k.startswith("1.") for k in split)


def test_layer_sizes_name_only_splittable_modules_and_their_largest_block():
    with init_empty_weights():
        model = nn.Sequential(Block(16), nn.Sequential(nn.Linear(16, 128), Block(16)))
    s = _sizes(model)
    layers = _layer_sizes(scan_modules(model), {"Block"})
    # Leaves and unsplittable blocks run whole (their size); containers run their largest part.
    assert layers == {"": s["1.0"], "1": s["1.0"]}
    assert s["1.0"] > s["0"]
