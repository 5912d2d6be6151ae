"""Cases of the training names: state, plugins, operations, logging, helpers (``cases.py``)."""

from __future__ import annotations

from typing import Any

from cases import case, small_model


@case("accelerate")
def the_package(module: Any) -> Any:
    return module.__name__, isinstance(module.__path__, object)


@case("accelerate:__version__")
def the_version(version: Any) -> Any:
    # PEFT, TRL and diffusers gate features on it (>= 1.11, >= 1.12)
    return version


@case("accelerate.big_modeling")
def big_modeling_module(module: Any) -> Any:
    return module.__name__.rsplit(".", 1)[-1], callable(module.check_device_map)


def _state_summary(state: Any) -> Any:
    return (
        state.num_processes,
        state.process_index,
        state.local_process_index,
        str(state.device),
        state.distributed_type.value,
        state.distributed_type == "NO",
        state.is_main_process,
        state.is_local_main_process,
    )


@case("accelerate:PartialState", "accelerate.state:PartialState")
def partial_state(cls: Any) -> Any:
    return _state_summary(cls()), _state_summary(cls(cpu=True))


@case("accelerate.state:AcceleratorState")
def accelerator_state(cls: Any) -> Any:
    import accelerate

    accelerate.Accelerator(cpu=True)
    state = cls()
    return _state_summary(state), str(state.mixed_precision)


@case("accelerate:Accelerator")
def accelerator_like_the_trainer(cls: Any) -> Any:
    # transformers trainer.py: plugins, a DataLoaderConfiguration, kwargs handlers
    from accelerate.utils import (
        DataLoaderConfiguration,
        DistributedDataParallelKwargs,
        GradientAccumulationPlugin,
    )

    accelerator = cls(
        gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1, sync_each_batch=False),
        dataloader_config=DataLoaderConfiguration(split_batches=False, even_batches=True),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        cpu=True,
        mixed_precision="no",
    )
    return (
        str(accelerator.device),
        accelerator.num_processes,
        str(accelerator.mixed_precision),
        accelerator.gradient_accumulation_steps,
    )


@case("accelerate.utils:DistributedType")
def distributed_types(cls: Any) -> Any:
    wanted = ("NO", "MULTI_CPU", "MULTI_GPU", "DEEPSPEED", "FSDP", "XLA", "MULTI_XPU")
    return {name: getattr(cls, name).value for name in wanted}, cls("NO") == "NO"


@case("accelerate.utils:DistributedType")
def distributed_type_as_text(cls: Any) -> Any:
    # transformers formats it into messages; accel's str() is the value (docs/migration.md)
    return str(cls.MULTI_GPU), f"{cls.NO}"


@case("accelerate.utils:CustomDtype")
def custom_dtypes(cls: Any) -> Any:
    return {name: str(getattr(cls, name).value) for name in ("FP8", "INT4", "INT2")}


@case("accelerate.utils:GradientAccumulationPlugin")
def gradient_accumulation_plugin(cls: Any) -> Any:
    plugin = cls(num_steps=1)
    return plugin.num_steps, plugin.adjust_scheduler, plugin.sync_with_dataloader


@case("accelerate.utils:DataLoaderConfiguration")
def dataloader_configuration(cls: Any) -> Any:
    config = cls(split_batches=False, dispatch_batches=None, even_batches=True)
    config.data_seed = 42
    config.non_blocking = False
    return config.split_batches, config.dispatch_batches, config.even_batches, config.data_seed


@case("accelerate.utils:DistributedDataParallelKwargs")
def ddp_kwargs(cls: Any) -> Any:
    handler = cls(find_unused_parameters=False, bucket_cap_mb=25, broadcast_buffers=True)
    return handler.to_kwargs()


@case("accelerate.utils:TorchDynamoPlugin")
def dynamo_plugin(cls: Any) -> Any:
    # transformers trainer.py: backend and mode may be None, dynamic False or None
    plugin = cls(backend=None, mode=None, dynamic=None)
    plugin2 = cls(backend="inductor", mode="default", dynamic=False)
    return str(plugin.backend), plugin.mode, str(plugin2.backend), plugin2.mode, plugin2.dynamic


@case("accelerate:ParallelismConfig", "accelerate.parallelism_config:ParallelismConfig")
def parallelism_config(cls: Any) -> Any:
    config = cls(tp_size=1, dp_shard_size=1)
    return config.tp_size, config.dp_shard_size, config.total_size


@case(
    "accelerate:FullyShardedDataParallelPlugin", "accelerate.utils:FullyShardedDataParallelPlugin"
)
def fsdp_plugin(cls: Any) -> Any:
    plugin = cls(fsdp_version=2, reshard_after_forward=True, cpu_ram_efficient_loading=False)
    return plugin.fsdp_version, plugin.reshard_after_forward, plugin.cpu_ram_efficient_loading


@case("accelerate.utils:DeepSpeedPlugin")
def deepspeed_plugin(cls: Any) -> Any:
    config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
    plugin = cls(hf_ds_config=config)
    return plugin.zero_stage, plugin.deepspeed_config["zero_optimization"]["stage"]


@case("accelerate.utils:DummyOptim", "accelerate.utils:DummyScheduler")
def dummy_optim_and_scheduler(cls: Any) -> Any:
    # transformers integrations/deepspeed.py: DummyOptim(params=...), DummyScheduler(optimizer)
    from accelerate.utils import DummyOptim, DummyScheduler

    optim = DummyOptim(params=list(small_model().parameters()))
    scheduler = DummyScheduler(optim, total_num_steps=10, warmup_num_steps=2)
    return optim.lr, optim.weight_decay, scheduler.total_num_steps, scheduler.warmup_num_steps


@case("accelerate.utils.constants:FSDP_AUTO_WRAP_POLICY")
@case("accelerate.utils.constants:FSDP_SHARDING_STRATEGY")
def constant(value: Any) -> Any:
    return value


@case("accelerate.utils:broadcast_object_list")
def broadcast_one_process(function: Any) -> Any:
    import accelerate

    accelerate.PartialState(cpu=True)
    return function(["a", 1, None], from_process=0)


@case("accelerate.utils:gather_object")
def gather_object_one_process(function: Any) -> Any:
    import accelerate

    accelerate.PartialState(cpu=True)
    return function(["prompt", "other"]), function([None, None])


@case("accelerate.utils:gather")
def gather_one_process(function: Any) -> Any:
    import accelerate
    import torch

    accelerate.PartialState(cpu=True)
    return function(torch.arange(4)), function({"a": torch.ones(2), "b": [torch.zeros(1)]})


@case("accelerate.utils:reduce")
def reduce_one_process(function: Any) -> Any:
    import accelerate
    import torch

    accelerate.PartialState(cpu=True)
    return function(torch.tensor([1.0, 3.0])), function(torch.tensor([2.0]), reduction="mean")


@case("accelerate.utils:send_to_device")
def send_structures(function: Any) -> Any:
    # diffusers hooks: args tuples and kwargs dicts, non_blocking, skip_keys
    import torch

    args = (torch.ones(2), [torch.zeros(1), "text", 3], None)
    kwargs = {"x": torch.ones(1), "mask": torch.zeros(1), "n": 2}
    return (
        function(args, "cpu", non_blocking=False),
        function(kwargs, torch.device("cpu"), skip_keys=["mask"]),
        function(torch.ones(1), "cpu", non_blocking=True),
    )


@case("accelerate:skip_first_batches")
def skip_batches(function: Any) -> Any:
    import torch

    loader = torch.utils.data.DataLoader(list(range(10)), batch_size=3)
    return [list(function(loader, n)) for n in (0, 2, 4)]


@case("accelerate:skip_first_batches")
def skip_past_the_end(function: Any) -> Any:
    import torch

    loader = torch.utils.data.DataLoader(list(range(10)), batch_size=3)
    return list(function(loader, 5))


@case("accelerate.utils:extract_model_from_parallel")
def unwrap(function: Any) -> Any:
    import torch

    model = small_model()
    compiled_like = torch.nn.DataParallel(model)
    return function(model) is model, function(compiled_like) is model


@case("accelerate.utils:is_peft_model")
def peft_or_not(function: Any) -> Any:
    return function(small_model())


@case("accelerate.utils:find_executable_batch_size")
def halving_batch_size(function: Any) -> Any:
    # transformers trainer.py: function=..., starting_batch_size=int
    seen = []

    def loop(batch_size: int) -> int:
        seen.append(batch_size)
        if batch_size > 16:
            raise RuntimeError("CUDA out of memory.")
        return batch_size

    return function(function=loop, starting_batch_size=20)(), seen


@case("accelerate.utils:release_memory", "accelerate.utils.memory:release_memory")
def release(function: Any) -> Any:
    return function(small_model(), small_model()), function()


@case("accelerate.utils.memory:should_reduce_batch_size")
def reduce_batch_size_or_not(function: Any) -> Any:
    return [
        function(RuntimeError("CUDA out of memory. Tried to allocate")),
        function(RuntimeError("something else")),
        function(ValueError("CUDA out of memory.")),
        function(RuntimeError("DefaultCPUAllocator: can't allocate memory")),
    ]


@case("accelerate.utils.memory:clear_device_cache")
def clear_cache(function: Any) -> Any:
    return function(), function(garbage_collection=True)


@case("accelerate.utils:set_seed")
def seeds(function: Any) -> Any:
    # transformers: set_seed(int), device_specific, deterministic
    import numpy as np
    import torch

    function(42)
    first = torch.rand(2), np.random.rand(1)
    function(7, device_specific=True)
    second = torch.rand(2)
    function(3, deterministic=False)
    return first, second, torch.rand(1)


@case("accelerate.utils:set_seed")
def seed_numpy(function: Any) -> Any:
    # a numpy integer (a seed drawn with numpy): Python's random.seed refuses it on both
    import numpy as np

    function(np.int64(3))
    return np.random.rand(1)


@case("accelerate.logging:get_logger")
def loggers(function: Any) -> Any:
    import logging

    logger = function("client.module")
    leveled = function("client.other", log_level="INFO")
    return (
        logger.logger.name,
        isinstance(logger, logging.LoggerAdapter),
        leveled.logger.level,
    )


@case("accelerate.utils:tqdm")
def progress(function: Any) -> Any:
    import accelerate

    accelerate.PartialState(cpu=True)
    bar = function(range(3), desc="Loading weights", disable=True)
    return list(bar), list(function(range(2), main_process_only=False, disable=True))


@case("accelerate.commands.config:default_config_file")
def default_config(path: Any) -> Any:
    return type(path).__name__, str(path).endswith(("default_config.yaml", "default_config.json"))


@case("accelerate.commands.config:load_config_from_file")
def load_config(function: Any) -> Any:
    # transformers cli/system.py, trl scripts/env.py: a YAML file, then .to_dict()
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.yaml"
        path.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n")
        config = function(str(path)).to_dict()
    return config["compute_environment"], str(config["distributed_type"])


@case("accelerate.commands.launch:launch_command_parser")
def launch_parser(function: Any) -> Any:
    args = function().parse_args(["--num_processes", "2", "--cpu", "train.py", "--lr", "1"])
    return args.num_processes, args.cpu, args.training_script, args.training_script_args


@case("accelerate.utils.dataclasses:get_module_class_from_name")
def module_class(function: Any) -> Any:
    model = small_model()
    return (
        function(model, "Linear").__name__,
        function(model, "ReLU").__name__,
        function(model, "Conv2d"),
    )


@case("accelerate.utils.fsdp_utils:get_parameters_from_modules")
def parameters_from_modules(function: Any) -> Any:
    # trl models/utils.py: fsdp_plugin.ignored_modules (a list or a regex), model, device
    import torch

    model = small_model()
    by_list = function([model[0]], model, torch.device("cpu"))
    by_regex = function("2", model, "cpu")
    return len(by_list), len(by_regex), function(None, model, "cpu")


@case("accelerate.utils.versions:is_torch_version")
def torch_version(function: Any) -> Any:
    return function(">=", "2.4.0"), function("<", "2.2.0"), function("==", "1.0")


@case("accelerate.utils:is_mlu_available", "accelerate.utils:is_npu_available")
@case("accelerate.utils:is_xpu_available", "accelerate.utils.imports:is_xpu_available")
@case("accelerate.utils:is_wandb_available", "accelerate.utils.imports:is_bf16_available")
@case("accelerate.utils.imports:is_fp8_available")
def availability(function: Any) -> Any:
    return function()


@case("accelerate.utils:extract_model_from_parallel")
def unwrap_recursively(function: Any) -> Any:
    # transformers modeling_utils.py: recursive=True unwraps wrapped children too
    import torch

    model = small_model()
    outer = torch.nn.Sequential(torch.nn.DataParallel(model))
    unwrapped = function(outer, recursive=True)
    return type(unwrapped[0]).__name__, function(model, keep_fp32_wrapper=False) is model


@case("accelerate.utils:DataLoaderConfiguration")
def dataloader_configuration_from_the_trainer(cls: Any) -> Any:
    # transformers trainer.py pops these four from its AcceleratorConfig
    config = cls(
        split_batches=False, dispatch_batches=None, even_batches=True, use_seedable_sampler=True
    )
    return config.use_seedable_sampler, config.dispatch_batches


@case("accelerate.utils:GradientAccumulationPlugin")
def gradient_accumulation_from_the_trainer(cls: Any) -> Any:
    # transformers: the user's gradient_accumulation_kwargs with num_steps forced to 1
    plugin = cls(
        num_steps=1, adjust_scheduler=False, sync_with_dataloader=False, sync_each_batch=True
    )
    return plugin.adjust_scheduler, plugin.sync_with_dataloader, plugin.sync_each_batch


@case("accelerate:Accelerator")
def accelerator_with_empty_plugins(cls: Any) -> Any:
    # transformers trainer.py: a dynamo plugin with backend None, no DeepSpeed/FSDP plugin
    from accelerate.utils import TorchDynamoPlugin

    accelerator = cls(
        cpu=True,
        deepspeed_plugin=None,
        fsdp_plugin=None,
        dynamo_plugin=TorchDynamoPlugin(backend=None, mode=None, dynamic=None),
    )
    model = accelerator.prepare(small_model())
    return str(accelerator.state.dynamo_plugin.backend), type(model).__name__


@case("accelerate.logging:get_logger")
def logger_levels(function: Any) -> Any:
    return function("client.third", log_level=None).logger.level, function(
        "client.fourth", log_level="DEBUG"
    ).logger.level


@case("accelerate.utils:release_memory", "accelerate.utils.memory:release_memory")
def release_tensors(function: Any) -> Any:
    import torch

    return function(torch.ones(2), None, [1])


@case("accelerate.utils:named_module_tensors")
def named_tensors_persistent_only(function: Any) -> Any:
    import torch

    model = small_model()
    model.register_buffer("scratch", torch.zeros(1), persistent=False)
    return sorted(dict(function(model, recurse=True, remove_non_persistent=True))), sorted(
        dict(function(model, recurse=True))
    )
