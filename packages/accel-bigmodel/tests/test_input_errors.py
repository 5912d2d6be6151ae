"""Bad inputs to loading and placement: each error names the entry, the rule and the fix, and
nothing is loaded or moved before it is raised."""

from __future__ import annotations

import os

import pytest
import torch
from bigmodel_helpers import TinyLM, checkpoint_state, save_safetensors_checkpoint
from torch import nn

from accel_bigmodel import (
    CheckpointKeysError,
    DeviceMapError,
    check_device_map,
    convert_file_size_to_int,
    dispatch_model,
    get_balanced_memory,
    get_max_memory,
    infer_auto_device_map,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    load_checkpoint_in_model,
    write_safetensors,
)
from accel_bigmodel.placement._devices import accelerator_count, accelerator_type

NO_GPU = accelerator_type() is None
HERE = "Devices here: 'cpu', 'disk', 'meta'"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def _empty_net() -> Net:
    with init_empty_weights():
        return Net()


def _checkpoint_without(tmp_path, *dropped: str) -> str:
    torch.manual_seed(0)
    state = {k: v.clone() for k, v in Net().state_dict().items() if k not in dropped}
    path = str(tmp_path / "model.safetensors")
    write_safetensors(path, state)
    return path


# ---------------------------------------------------------------- missing checkpoint keys


@pytest.mark.parametrize("device_map", [None, "auto", {"": "cpu"}])
def test_missing_key_on_meta_is_named_before_torch_fails(tmp_path, device_map):
    path = _checkpoint_without(tmp_path, "head.bias")
    model = _empty_net()
    with pytest.raises(CheckpointKeysError) as info:
        load_checkpoint_and_dispatch(model, path, device_map=device_map)
    message = str(info.value)
    assert "1 of them are on the meta device" in message
    assert "[head.bias] (1)" in message
    assert "model.safetensors" in message  # the file read
    assert "Load a checkpoint that holds them" in message
    assert info.value.missing_keys == ["head.bias"] and info.value.files == [path]
    # Nothing was placed: every tensor is still on meta.
    assert all(p.device.type == "meta" for p in model.parameters())


def test_strict_lists_first_keys_count_and_files_and_loads_nothing(tmp_path):
    torch.manual_seed(0)
    tiny = TinyLM(depth=6)
    state = checkpoint_state(tiny)
    dropped = [k for k in state if k.startswith("blocks.")][:12]
    for key in dropped:
        del state[key]
    state["extra.weight"] = torch.zeros(2)
    path = str(tmp_path / "model.safetensors")
    write_safetensors(path, state)
    model = TinyLM(depth=6)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointKeysError) as info:
        load_checkpoint_in_model(model, path, strict=True)
    message = str(info.value)
    assert message.startswith("With strict=True the checkpoint must hold exactly")
    assert "12 model tensors are missing [" in message and ", ...] (12)" in message
    assert all(key in message for key in dropped[:10]) and dropped[11] not in message
    assert "1 checkpoint tensors are unexpected [extra.weight] (1)" in message
    assert "files read: [model.safetensors] (1)" in message and "pass strict=False" in message
    assert sorted(info.value.missing_keys) == sorted(dropped)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_strict_error_names_every_shard_read(tmp_path):
    torch.manual_seed(0)
    folder = save_safetensors_checkpoint(TinyLM(), tmp_path / "ckpt", max_shard_size="4KB")
    model = TinyLM()
    model.register_buffer("added", torch.zeros(1))
    with pytest.raises(CheckpointKeysError, match=r"\[added\] \(1\)") as info:
        load_checkpoint_in_model(model, folder, strict=True)
    shards = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    assert len(shards) > 1 and sorted(map(os.path.basename, info.value.files)) == shards


def test_missing_key_mapped_to_meta_stays_empty(tmp_path):
    path = _checkpoint_without(tmp_path, "head.bias", "head.weight")
    model = _empty_net()
    load_checkpoint_in_model(model, path, device_map={"body": "cpu", "head": "meta"})
    assert model.body.weight.device.type == "cpu" and model.head.bias.device.type == "meta"


def test_missing_key_with_real_values_is_kept_with_a_warning(tmp_path, caplog):
    path = _checkpoint_without(tmp_path, "head.bias")
    model = Net()
    kept = model.head.bias.detach().clone()
    with caplog.at_level("WARNING", logger="accel_bigmodel"):
        load_checkpoint_in_model(model, path)
    assert torch.equal(model.head.bias, kept) and "head.bias" in caplog.text


# ---------------------------------------------------------------- device_map entries


BAD_DEVICES = [
    ("cpuu", "'cpuu' is not a device name"),
    (-1, "a device index must be >= 0 (got -1)"),
    (True, "a bool is not a device"),
    (1.5, "a float is not a device"),
    ("0", "a GPU index is an int, not a string (write 0, not '0')"),
]
if NO_GPU:
    BAD_DEVICES += [
        (9, "the GPU index 9 needs a GPU, and this machine has none"),
        ("cuda:9", "this machine has 0 cuda devices, so cuda:9 does not exist"),
        (torch.device("cuda", 0), "this machine has 0 cuda devices, so cuda:0 does not exist"),
    ]
elif accelerator_count(accelerator_type() or "cuda") <= 9:
    BAD_DEVICES += [(9, "so " + f"{accelerator_type()}:9 does not exist")]


@pytest.mark.parametrize(("value", "reason"), BAD_DEVICES)
@pytest.mark.parametrize("entry", ["load_checkpoint_and_dispatch", "dispatch_model", "load"])
def test_bad_device_is_named_with_devices_here_and_fix(tmp_path, value, reason, entry):
    path = _checkpoint_without(tmp_path)
    model = _empty_net()
    device_map = {"body": "cpu", "head": value}
    with pytest.raises(DeviceMapError) as info:
        if entry == "load_checkpoint_and_dispatch":
            load_checkpoint_and_dispatch(model, path, device_map=device_map)
        elif entry == "dispatch_model":
            dispatch_model(Net(), device_map)
        else:
            load_checkpoint_in_model(model, path, device_map=device_map)
    message = str(info.value)
    assert message.startswith(f"device_map['head'] must be a device of this machine; got {value!r}")
    assert reason in message
    assert HERE in message and (not NO_GPU or "and no GPU" in message)
    assert "Use 'cpu', 'disk' (with an offload folder), a GPU listed here" in message
    assert all(p.device.type == "meta" for p in model.parameters())


@pytest.mark.parametrize("value", ["cpuu", -1, 9 if NO_GPU else "nope"])
def test_bad_single_device_map(tmp_path, value):
    with pytest.raises(DeviceMapError, match=rf"^device_map must be a device .*got {value!r}"):
        load_checkpoint_and_dispatch(_empty_net(), _checkpoint_without(tmp_path), value)


def test_valid_devices_are_accepted(tmp_path):
    path = _checkpoint_without(tmp_path)
    for value in ("cpu", "cpu:0", torch.device("cpu")):
        model = load_checkpoint_and_dispatch(_empty_net(), path, {"body": value, "head": "cpu"})
        assert model.body.weight.device.type == "cpu"
    check_device_map(Net(), {"": "meta"})
    check_device_map(Net(), {"": 3}, check_devices=False)  # planned for another machine


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda m, p, dm: load_checkpoint_and_dispatch(m, p, device_map=dm), "offload_folder"),
        (lambda m, p, dm: load_checkpoint_in_model(m, p, device_map=dm), "offload_folder"),
        (lambda m, p, dm: dispatch_model(Net(), dm), "offload_dir"),
    ],
)
def test_disk_without_offload_folder(tmp_path, call, argument):
    model = _empty_net()
    with pytest.raises(DeviceMapError) as info:
        call(model, _checkpoint_without(tmp_path), {"body": "cpu", "head": "disk"})
    assert str(info.value) == (
        f"Modules mapped to 'disk' need an offload folder; device_map sends ['head'] to disk "
        f"but {argument} is None. Pass {argument}='some/folder', or raise max_memory so "
        "nothing goes to disk."
    )


def test_unknown_module_name_is_named(tmp_path):
    model = _empty_net()
    with pytest.raises(DeviceMapError) as info:
        load_checkpoint_and_dispatch(
            model, _checkpoint_without(tmp_path), {"body": "cpu", "heads": "cpu"}
        )
    message = str(info.value)
    assert message.startswith("A device_map must give a device to every parameter and buffer")
    assert "do not match any submodules or tensors of the model: ['heads']" in message
    assert "(some modules are: body, head" in message
    assert "fix their names. Add their modules to the device_map" in message


def test_a_key_naming_nothing_warns_when_every_tensor_is_covered():
    # The reference warns and goes on; the map is usable, the extra key places nothing.
    model = Net()
    device_map = {"body": "cpu", "head": "cpu", "heads": 1}
    with pytest.warns(UserWarning) as record:
        check_device_map(model, device_map)
    (message,) = [str(w.message) for w in record]
    assert message == (
        "device_map keys do not match any submodules or tensors of the model: ['heads'] "
        "(some modules are: body, head); they place nothing, as every parameter and buffer "
        "has a device from the other keys. Fix or remove those keys."
    )
    dispatch_model(model, {"body": "cpu", "head": "cpu", "heads": "cpu"})
    assert model(torch.ones(1, 4)).shape == (1, 2)


def test_bad_main_device_is_named():
    with pytest.raises(DeviceMapError, match=r"^main_device runs the offloaded layers.*got 'disk'"):
        dispatch_model(Net(), {"": "cpu"}, main_device="disk")
    with pytest.raises(DeviceMapError, match=r"^main_device must be a device .*got 'cpuu'"):
        dispatch_model(Net(), {"": "cpu"}, main_device="cpuu")


def test_device_map_of_wrong_type():
    with pytest.raises(DeviceMapError, match="device_map must be a dict of module name -> device"):
        dispatch_model(Net(), ["cpu"])  # type: ignore[arg-type]


# ---------------------------------------------------------------- max_memory entries


@pytest.mark.skipif(not NO_GPU, reason="checks the message of a machine without GPU")
@pytest.mark.parametrize(
    "call",
    [
        lambda mm: get_max_memory(mm, check_devices=True),
        lambda mm: get_balanced_memory(Net(), mm, check_devices=True),
        lambda mm: infer_auto_device_map(_empty_net(), mm, check_devices=True),
        lambda mm: load_checkpoint_and_dispatch(_empty_net(), "unused", "auto", max_memory=mm),
    ],
)
def test_max_memory_gpu_absent_here(call):
    """Refused where weights move, and where the caller asks for the check."""
    with pytest.raises(DeviceMapError) as info:
        call({0: "1GB", "cpu": "1GB"})
    message = str(info.value)
    assert message.startswith("The max_memory key 0 must be a device of this machine; got 0")
    assert "the GPU index 0 needs a GPU, and this machine has none" in message
    assert HERE in message
    assert "Remove that key; to plan a map for a machine that has it, leave " in message
    assert "check_devices=False (the default of the planning functions)." in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10XB", "max_memory['cpu'] is not a usable size: A size must be digits followed by"),
        ("-1GB", "max_memory['cpu'] is not a usable size: A size must be non-negative; got '-1GB'"),
        ("infGB", "got 'infGB'"),
        ("nanGB", "got 'nanGB'"),
        (float("nan"), "got float nan"),
        (object, "got type <class 'object'>"),
    ],
)
def test_max_memory_bad_size_names_the_entry(value, expected):
    with pytest.raises(DeviceMapError) as info:
        infer_auto_device_map(_empty_net(), {"cpu": value})
    assert expected in str(info.value)
    assert "'5GB'" in str(info.value)  # the fix shows the expected form


def test_max_memory_unknown_key_duplicate_key_and_wrong_type():
    with pytest.raises(DeviceMapError, match=r"got 'tpu'\. Devices here: 'cpu'"):
        get_max_memory({"tpu": "1GB"})
    with pytest.raises(DeviceMapError, match=r"'0' and 0 both mean device 0\. Keep one"):
        get_max_memory({"0": "1GB", 0: "2GB"}, check_devices=False)
    with pytest.raises(DeviceMapError, match="max_memory must be a dict of device -> size"):
        get_max_memory("10GB")  # type: ignore[arg-type]


def test_size_strings_that_overflow_are_refused():
    for text in ("infGB", "1e400GB", "nanMB"):
        with pytest.raises(ValueError, match="A size must be digits followed by a unit"):
            convert_file_size_to_int(text)


@pytest.mark.parametrize("call", ["infer_auto_device_map", "get_balanced_memory"])
def test_no_split_module_classes_that_is_not_a_list_of_names_is_refused_with_the_rule(call):
    model = TinyLM()
    rule = r"no_split_module_classes is a list of module class names .* got int 5\. Pass a list"
    function = infer_auto_device_map if call == "infer_auto_device_map" else get_balanced_memory
    with pytest.raises(TypeError, match=rule):
        function(model, max_memory={0: 10**6, 1: 10**6, "cpu": 10**9}, no_split_module_classes=5)
    # A single name, a tuple or None still work as before.
    assert infer_auto_device_map(model, no_split_module_classes="Block")
    assert infer_auto_device_map(model, no_split_module_classes=("Block",))
