"""Cases of the big-model names: hooks, offload, device maps, module sizes (``cases.py``)."""

from __future__ import annotations

from typing import Any

from cases import case, outcome, small_model


@case("accelerate.hooks")
def hook_classes_by_name(hooks: Any) -> Any:
    # transformers, PEFT and diffusers look a hook's class up by name in accelerate.hooks
    import accelerate

    model = small_model()
    accelerate.cpu_offload(model, execution_device="cpu")
    names = sorted({type(m._hf_hook).__name__ for m in model.modules() if hasattr(m, "_hf_hook")})
    return {name: getattr(hooks, name) is type(model[0]._hf_hook) for name in names}


@case("accelerate.hooks:AlignDevicesHook")
def align_devices_hook_io_same_device(cls: Any) -> Any:
    # transformers generation/utils.py, peft_model.py: AlignDevicesHook(io_same_device=True)
    import accelerate.hooks

    model = small_model()
    accelerate.hooks.add_hook_to_module(model, cls(io_same_device=True))
    return outcome(model), isinstance(model._hf_hook, cls)


@case("accelerate.hooks:AlignDevicesHook")
def align_devices_hook_execution_device(cls: Any) -> Any:
    # transformers integrations/peft.py: AlignDevicesHook(execution_device=int|str, ...)
    hook = cls(execution_device="cpu", io_same_device=True, offload=False)
    return str(hook.execution_device), hook.io_same_device, hook.offload


@case("accelerate.hooks:CpuOffload")
def cpu_offload_hook(cls: Any) -> Any:
    import accelerate.hooks
    import torch

    model = small_model()
    accelerate.hooks.add_hook_to_module(model, cls(execution_device=torch.device("cpu")))
    return outcome(model), isinstance(model._hf_hook, cls)


@case("accelerate.hooks:add_hook_to_module", "accelerate.hooks:remove_hook_from_module")
def add_then_remove_hook(function: Any) -> Any:
    import accelerate.hooks

    model = small_model()
    accelerate.hooks.add_hook_to_module(model[0], accelerate.hooks.AlignDevicesHook(), append=True)
    accelerate.hooks.remove_hook_from_module(model, recurse=True)
    return outcome(model), [hasattr(m, "_hf_hook") for m in model.modules()]


@case("accelerate.hooks:remove_hook_from_submodules")
def remove_hooks_below(function: Any) -> Any:
    import accelerate

    model = small_model()
    accelerate.cpu_offload(model, execution_device="cpu")
    function(model)
    return outcome(model), [hasattr(m, "_hf_hook") for m in model.modules()]


@case("accelerate:cpu_offload")
def cpu_offload_str_device(function: Any) -> Any:
    model = function(small_model(), execution_device="cpu", offload_buffers=True)
    return outcome(model)


@case("accelerate:cpu_offload_with_hook")
def cpu_offload_with_hook_chained(function: Any) -> Any:
    # transformers bark, diffusers pipelines: (model, device) then prev_module_hook=hook
    import torch

    first, hook = function(small_model(), torch.device("cpu"))
    second, hook2 = function(small_model(), "cpu", prev_module_hook=hook)
    hook2.offload()
    return outcome(first), outcome(second), type(hook).__name__


@case("accelerate:init_empty_weights")
def init_empty_weights_context(function: Any) -> Any:
    with function():
        model = small_model()
    with function(include_buffers=True):
        buffered = small_model()
    devices = [p.device.type for p in model.parameters()]
    return devices, buffered.scale.device.type, model.scale.device.type


@case("accelerate.utils:compute_module_sizes")
def module_sizes(function: Any) -> Any:
    # diffusers pipeline_loading_utils: sizes[""] with a dtype; clients index the result by
    # module name, and a name without tensors (the ReLU "1", a missing one) reads 0 on both
    import torch

    sizes = function(small_model())
    half = function(small_model(), dtype=torch.float16)
    nonzero = {name: size for name, size in sizes.items() if size}
    return nonzero, half[""], sizes["1"], sizes["no.such.module"]


@case("accelerate.utils.modeling:get_max_layer_size")
def max_layer_size(function: Any) -> Any:
    # transformers integrations/accelerate.py: named children, module sizes, class names
    from accelerate.utils import compute_module_sizes

    model = small_model()
    sizes = compute_module_sizes(model)
    return function(list(model.named_children()), sizes, ["Linear"]), function(
        list(model.named_children()), sizes, []
    )


@case("accelerate.utils.modeling:clean_device_map")
def clean_map(function: Any) -> Any:
    import torch

    return (
        function({"0": 0, "1": 0, "2": "cpu"}),
        function({"a.0": "cpu", "a.1": "cpu", "b": torch.device("cpu")}),
        function({"0": "disk", "1": "disk", "2": "disk"}),
    )


@case("accelerate.utils.modeling:convert_file_size_to_int")
def file_sizes(function: Any) -> Any:
    # diffusers components_manager: strings such as "3GB"; ints pass through
    return [function(v) for v in ("10GiB", "3GB", "500MB", "1KiB", 1024)]


@case("accelerate.utils:named_module_tensors")
def named_tensors(function: Any) -> Any:
    model = small_model()
    return (
        dict(function(model, recurse=True)),
        dict(function(model[0])),
        dict(function(model, include_buffers=False, recurse=True)),
    )


@case("accelerate.utils:set_module_tensor_to_device")
def set_tensor(function: Any) -> Any:
    # diffusers quantizers: (model, name, device, value, dtype); convert_from_ckpt: value= only
    import torch

    model = small_model()
    function(model, "0.weight", "cpu", torch.ones(8, 4), torch.float16)
    function(model, "2.bias", "cpu", value=torch.zeros(2))
    function(model, "scale", torch.device("cpu"), value=torch.full((2,), 3.0))
    return model.state_dict()


@case("accelerate.utils:set_module_tensor_to_device")
def set_tensor_from_meta(function: Any) -> Any:
    import accelerate
    import torch

    with accelerate.init_empty_weights():
        model = small_model()
    function(model, "0.weight", 0 if torch.cuda.is_available() else "cpu", torch.ones(8, 4))
    return model[0].weight.device.type, model[0].weight.sum()


@case("accelerate.utils:offload_weight", "accelerate.utils:save_offload_index")
def offload_and_index(function: Any) -> Any:
    import tempfile
    from pathlib import Path

    import torch
    from accelerate.utils import load_offloaded_weights, offload_weight, save_offload_index

    with tempfile.TemporaryDirectory() as folder:
        index = offload_weight(torch.arange(6.0).reshape(2, 3), "0.weight", folder, {})
        index = offload_weight(torch.ones(2, dtype=torch.bfloat16), "0.bias", folder, index)
        save_offload_index(index, folder)
        model = torch.nn.Sequential(torch.nn.Linear(3, 2))
        model[0].bias.data = model[0].bias.data.to(torch.bfloat16)
        load_offloaded_weights(model, index, folder)
        files = sorted(p.name for p in Path(folder).iterdir())
        return _without_checksums(index), files, model.state_dict()


def _without_checksums(index: dict[str, Any]) -> dict[str, Any]:
    """accel's index entries add a "crc32" (docs/migration.md, offload index entries)."""
    return {name: {k: v for k, v in entry.items() if k != "crc32"} for name, entry in index.items()}


@case("accelerate.utils:load_offloaded_weights")
def load_an_index_without_checksums(function: Any) -> Any:
    # diffusers and transformers build indexes of "dtype" and "shape" only
    import tempfile

    import numpy as np
    import torch

    with tempfile.TemporaryDirectory() as folder:
        array = np.memmap(f"{folder}/0.weight.dat", dtype="float32", shape=(2, 3), mode="w+")
        array[:] = np.arange(6, dtype="float32").reshape(2, 3)
        array.flush()
        del array
        model = torch.nn.Sequential(torch.nn.Linear(3, 2))
        function(model, {"0.weight": {"dtype": "float32", "shape": [2, 3]}}, folder)
        return model[0].weight


@case("accelerate.utils:load_offloaded_weights")
def load_nothing(function: Any) -> Any:
    model = small_model()
    function(model, None, "unused")
    function(model, {}, "unused")
    return model.state_dict()


@case("accelerate.utils:offload_state_dict")
def offload_a_state_dict(function: Any) -> Any:
    # peft tuners_utils: a hook's weights_map (a mapping of tensors)
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        function(folder, small_model().state_dict())
        index = json.loads((Path(folder) / "index.json").read_text())
        return _without_checksums(index), sorted(p.name for p in Path(folder).iterdir())


@case("accelerate:dispatch_model")
def dispatch_on_cpu(function: Any) -> Any:
    model = function(small_model(), device_map={"": "cpu"})
    return outcome(model), model.hf_device_map


@case("accelerate.big_modeling:check_device_map")
def check_device_map_patched(function: Any) -> Any:
    # transformers integrations/accelerate.py replaces the module attribute for models whose
    # placement is not checked; dispatch_model must call the replacement
    import accelerate
    import accelerate.big_modeling

    calls = []
    original = accelerate.big_modeling.check_device_map
    accelerate.big_modeling.check_device_map = lambda model, device_map: calls.append(1)
    try:
        model = accelerate.dispatch_model(small_model(), device_map={"0": "cpu", "2": "cpu"})
    finally:
        accelerate.big_modeling.check_device_map = original
    return len(calls), outcome(model)


@case("accelerate:infer_auto_device_map", "accelerate.utils:infer_auto_device_map")
def auto_map_float_budget(function: Any) -> Any:
    # transformers multiplies measured free memory by 0.9: a float
    return function(small_model(), max_memory={"cpu": 1000.5})


@case("accelerate:infer_auto_device_map", "accelerate.utils:infer_auto_device_map")
def auto_map_int_and_str_budgets(function: Any) -> Any:
    return function(small_model(), max_memory={"cpu": 10_000}), function(
        small_model(), max_memory={"cpu": "1GiB"}, no_split_module_classes=["Linear"]
    )


@case("accelerate.utils:get_max_memory")
def max_memory_given(function: Any) -> Any:
    import numpy as np

    return (
        function({"cpu": "10GiB"}),
        function({"cpu": 2e9}),
        function({"cpu": 1.5e9 * 0.9}),
        function({"cpu": np.int64(10)}),
    )


@case("accelerate.utils:get_balanced_memory")
def balanced_memory_cpu(function: Any) -> Any:
    return function(small_model(), max_memory={"cpu": 21861303091.2})


@case("accelerate.utils.modeling:convert_file_size_to_int")
def file_sizes_other_kinds(function: Any) -> Any:
    return [function(v) for v in ("1.5GB", "7kb", "10GB", "2GIB")]


@case("accelerate.utils.modeling:convert_file_size_to_int")
def file_size_float(function: Any) -> Any:
    # the reference takes ints and strings only (a float fails in str methods)
    return function(1024.0)


@case("accelerate.utils.modeling:convert_file_size_to_int")
def file_size_numpy(function: Any) -> Any:
    import numpy as np

    return function(np.int64(4096))


@case("accelerate.utils.modeling:clean_device_map")
def clean_map_with_module_name(function: Any) -> Any:
    return function({"a.0": 0, "a.1": 0, "b": 1}, "a"), function({"": "cpu"})


@case("accelerate.hooks:AlignDevicesHook")
def align_devices_hook_device_object(cls: Any) -> Any:
    import torch

    hook = cls(execution_device=torch.device("cpu"), io_same_device=True, place_submodules=True)
    return str(hook.execution_device), hook.place_submodules


@case("accelerate:cpu_offload_with_hook")
def cpu_offload_with_hook_no_device(function: Any) -> Any:
    # diffusers pipelines call it with execution_device None when no accelerator is set
    model, hook = function(small_model())
    return outcome(model), type(hook).__name__
