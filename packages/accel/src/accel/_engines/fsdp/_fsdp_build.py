"""Turning a ``FullyShardedDataParallelPlugin`` (and a ``ParallelismConfig``) into sharded
modules: the device mesh, the units to shard, FSDP1 arguments, FSDP2 ``fully_shard`` calls,
tensor parallelism, activation checkpointing and loading weights from process 0 only."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from accel_state import FullyShardedDataParallelPlugin, ParallelismConfig

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


# ----------------------------------------------------------------------------- the mesh
def build_mesh(
    plugin: FullyShardedDataParallelPlugin | None,
    config: ParallelismConfig | None,
    device_type: str,
    world_size: int,
    local_world_size: int,
) -> DeviceMesh:
    """The device mesh of the run.

    An explicit ``ParallelismConfig`` decides; otherwise the sharding strategy does:
    ``HYBRID_SHARD*`` replicates across machines and shards within one, ``NO_SHARD`` replicates
    everywhere, and the others shard over every process.
    """
    if config is None:
        strategy = strategy_name(plugin)
        if strategy.startswith("HYBRID_SHARD"):
            shard = local_world_size if world_size % local_world_size == 0 else world_size
            config = ParallelismConfig(dp_replicate_size=world_size // shard, dp_shard_size=shard)
        elif strategy == "NO_SHARD":
            config = ParallelismConfig(dp_replicate_size=world_size, dp_shard_size=1)
        else:
            config = ParallelismConfig(dp_shard_size=world_size)
    config.validate(world_size)
    if config.dp_replicate_enabled and not config.fsdp_enabled:
        return _replicate_mesh(config, device_type)
    mesh = config.build_device_mesh(device_type, world_size)
    if mesh is None:
        raise ValueError(
            f"FSDP needs a device mesh of {world_size} processes; the layout {config.sizes} "
            "builds none. Give ParallelismConfig sizes whose product is the number of processes."
        )
    return mesh


def _replicate_mesh(config: ParallelismConfig, device_type: str) -> DeviceMesh:
    """The layout's mesh with a ``dp_shard`` dimension of size 1 kept after ``dp_replicate``.

    ``fully_shard`` over a 1-D mesh shards; it replicates over the ``dp_replicate`` dimension
    of a 2-D one, and FSDP1's hybrid strategies need both dimensions too. The joint
    dimensions are the ones ``ParallelismConfig.build_device_mesh`` flattens.
    """
    from torch.distributed.device_mesh import init_device_mesh

    rest = tuple(n for n in config.mesh_dim_names if n != "dp_replicate")
    names = ("dp_replicate", "dp_shard", *rest)
    mesh = init_device_mesh(
        device_type, tuple(config.sizes[n] for n in names), mesh_dim_names=names
    )
    cp = ("cp",) if "cp" in names else ()
    mesh[("dp_replicate", "dp_shard")]._flatten("dp")
    mesh[("dp_shard",) + cp]._flatten("dp_shard_cp")
    mesh[("dp_replicate", "dp_shard") + cp]._flatten("dp_cp")
    return mesh


def shard_mesh(mesh: DeviceMesh) -> DeviceMesh | None:
    """The mesh ``fully_shard`` shards over: the data-parallel dimensions, with ``cp`` joined
    to ``dp_shard`` (context-parallel processes hold shards of the model, and their gradients
    are averaged with the data-parallel ones); None without such dimensions."""
    names = mesh.mesh_dim_names or ()
    if "cp" not in names:
        return dp_mesh(mesh)
    joint = tuple(n for n in ("dp_shard", "cp") if n in names)
    shard_name = "cp"
    if len(joint) > 1:
        mesh[joint]._flatten("dp_shard_cp")
        shard_name = "dp_shard_cp"
    return mesh[("dp_replicate", shard_name)] if "dp_replicate" in names else mesh[shard_name]


def dp_mesh(mesh: DeviceMesh) -> DeviceMesh | None:
    """The data-parallel part of ``mesh``: 1-D ``dp_shard`` (FSDP) or 2-D ``dp_replicate`` x
    ``dp_shard`` (HSDP; a shard size of 1 is plain replication); None when no dimension of
    the mesh splits data (tensor parallelism only)."""
    names = mesh.mesh_dim_names or ()
    dims = tuple(n for n in ("dp_replicate", "dp_shard") if n in names)
    if not dims:
        return None
    if len(dims) == len(names):
        return mesh
    return mesh[dims]


def strategy_name(plugin: FullyShardedDataParallelPlugin | None) -> str:
    """The sharding strategy's name (``FULL_SHARD`` when none is set)."""
    value = plugin.sharding_strategy if plugin is not None else None
    if value is None:
        return "FULL_SHARD"
    return str(getattr(value, "name", value)).upper().lstrip("_")


def state_dict_type_name(plugin: FullyShardedDataParallelPlugin) -> str:
    """``FULL_STATE_DICT``, ``SHARDED_STATE_DICT`` or ``LOCAL_STATE_DICT``."""
    value = plugin.state_dict_type
    return str(getattr(value, "name", value)).upper()


# ---------------------------------------------------------------------- which units
def wrap_kind(plugin: FullyShardedDataParallelPlugin) -> Any:
    """``"NO_WRAP"``, ``"TRANSFORMER_BASED_WRAP"``, ``"SIZE_BASED_WRAP"`` (the plugin's names
    or torch's unbound policy functions), or the plugin's own callable."""
    from torch.distributed.fsdp.wrap import (
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )

    policy = plugin.auto_wrap_policy
    if isinstance(policy, str):
        return policy.upper()
    kinds = (
        (None, "NO_WRAP"),
        (transformer_auto_wrap_policy, "TRANSFORMER_BASED_WRAP"),
        (size_based_auto_wrap_policy, "SIZE_BASED_WRAP"),
    )
    return next((kind for function, kind in kinds if policy is function), policy)


def _wrap_classes(
    plugin: FullyShardedDataParallelPlugin, model: torch.nn.Module
) -> set[type[torch.nn.Module]]:
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    names = plugin.transformer_cls_names_to_wrap or list(
        getattr(model, "_no_split_modules", None) or []
    )
    if not names:
        raise ValueError(
            "auto_wrap_policy TRANSFORMER_BASED_WRAP wraps the classes named in "
            "transformer_cls_names_to_wrap; got none (and the model has no _no_split_modules). "
            "Set transformer_cls_names_to_wrap=['YourBlock'] (or the variable "
            "ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP) or use SIZE_BASED_WRAP."
        )
    # The plugin's own binding finds the classes (and names the ones present when one is
    # missing); a copy keeps the user's plugin unbound for the next model.
    bound = copy.copy(plugin)
    bound.auto_wrap_policy, bound.transformer_cls_names_to_wrap = (
        transformer_auto_wrap_policy,
        names,
    )
    bound.set_auto_wrap_policy(model)
    policy: Any = bound.auto_wrap_policy
    return set(policy.keywords["transformer_layer_cls"])


def _own_numel(module: torch.nn.Module, taken: set[int]) -> int:
    return sum(p.numel() for p in module.parameters() if id(p) not in taken)


def select_units(
    plugin: FullyShardedDataParallelPlugin, model: torch.nn.Module
) -> list[torch.nn.Module]:
    """Submodules (not the root) that become their own FSDP unit, innermost first."""
    policy = wrap_kind(plugin)
    if policy == "NO_WRAP":
        return []
    if policy == "TRANSFORMER_BASED_WRAP":
        classes = tuple(_wrap_classes(plugin, model))
        matched = [m for m in model.modules() if m is not model and isinstance(m, classes)]
        return list(reversed(matched))
    assert callable(policy) or policy == "SIZE_BASED_WRAP"
    units: list[torch.nn.Module] = []
    taken: set[int] = set()
    # Children before parents, so a parent counts only what no child unit took.
    for module in reversed(list(model.modules())):
        if module is model:
            continue
        numel = _own_numel(module, taken)
        if policy == "SIZE_BASED_WRAP":
            chosen = numel >= (plugin.min_num_params or 0)
        else:
            chosen = bool(policy(module=module, recurse=False, nonwrapped_numel=numel))
        if chosen and numel > 0:
            units.append(module)
            taken.update(id(p) for p in module.parameters())
    return units


def ignored_modules(
    plugin: FullyShardedDataParallelPlugin, model: torch.nn.Module
) -> list[torch.nn.Module]:
    """The modules named by ``plugin.ignored_modules`` (modules, or a regex over names)."""
    spec = plugin.ignored_modules
    if spec is None:
        return []
    if isinstance(spec, str):
        pattern = re.compile(spec)
        return [m for name, m in model.named_modules() if name and pattern.fullmatch(name)]
    return list(spec)


# -------------------------------------------------------------- precision and offload
def _mp_policy(plugin: FullyShardedDataParallelPlugin, cls: type) -> Any:
    """The plugin's policy as ``cls``; a value assigned after construction (a name, a dict)
    goes through the plugin's own conversion (which refuses the other version's class)."""
    policy = plugin.mixed_precision_policy
    if policy is None or isinstance(policy, cls):
        return policy
    plugin.set_mixed_precision(policy, override=not isinstance(policy, dict))
    return plugin.mixed_precision_policy


def fsdp2_mp_policy(plugin: FullyShardedDataParallelPlugin) -> Any:
    """The ``MixedPrecisionPolicy`` of ``fully_shard`` (default: full precision)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return _mp_policy(plugin, MixedPrecisionPolicy) or MixedPrecisionPolicy()


def fsdp1_mp_policy(plugin: FullyShardedDataParallelPlugin) -> Any:
    """The ``MixedPrecision`` of ``FullyShardedDataParallel`` (None: full precision)."""
    from torch.distributed.fsdp import MixedPrecision

    return _mp_policy(plugin, MixedPrecision)


def offload_enabled(plugin: FullyShardedDataParallelPlugin) -> bool:
    """Whether parameters are kept on the CPU."""
    value = plugin.cpu_offload
    if value is None or isinstance(value, bool):
        return bool(value)
    if type(value).__name__ == "CPUOffloadPolicy":
        return True
    return bool(getattr(value, "offload_params", False))


# --------------------------------------------------------------- activation checkpointing
def checkpoint_forward(module: torch.nn.Module, offload: bool = False) -> None:
    """Make ``module`` recompute its activations in the backward pass (non-reentrant
    ``torch.utils.checkpoint``); the module keeps its class, names and state-dict keys.

    With ``offload``, the tensors the checkpoint saves (the unit's inputs) are kept in CPU
    memory (pinned when CUDA is present) until the backward pass needs them.
    """
    if getattr(module, "_accel_checkpointed", False):
        return
    inner = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if offload:
            with torch.autograd.graph.save_on_cpu(pin_memory=torch.cuda.is_available()):
                return torch.utils.checkpoint.checkpoint(
                    inner, *args, use_reentrant=False, **kwargs
                )
        return torch.utils.checkpoint.checkpoint(inner, *args, use_reentrant=False, **kwargs)

    module.forward = forward
    module._accel_checkpointed = True  # type: ignore[assignment]


# ----------------------------------------------------------------------- tensor parallel
def apply_tensor_parallel(model: torch.nn.Module, tp_mesh: DeviceMesh, plan: Any) -> None:
    """Split the layers of ``model`` over ``tp_mesh`` following ``plan`` (or the model's
    ``_tp_plan``)."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        ParallelStyle,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    styles: dict[str, Callable[[], ParallelStyle]] = {
        "colwise": ColwiseParallel,
        "rowwise": RowwiseParallel,
        "sequence": SequenceParallel,
        "sequence_parallel": SequenceParallel,
    }
    plan = plan if plan is not None else getattr(model, "_tp_plan", None)
    if not plan:
        raise ValueError(
            "tensor parallelism needs a plan saying how each layer is split; got none "
            "(TorchTensorParallelPlugin.tp_plan is None and the model has no _tp_plan). Pass "
            "TorchTensorParallelPlugin(tp_size=..., tp_plan={'layers.*.up': 'colwise', "
            "'layers.*.down': 'rowwise'})."
        )
    resolved: dict[str, ParallelStyle] = {}
    for name, style in plan.items():
        if isinstance(style, str):
            if style not in styles:
                raise ValueError(
                    f"tp_plan[{name!r}] must be a ParallelStyle or one of {sorted(styles)}; got "
                    f"{style!r}. Use 'colwise' or 'rowwise'."
                )
            style = styles[style]()
        resolved[name] = style
    parallelize_module(model, tp_mesh, resolved)


# ------------------------------------------------------------ loading from process 0 only
def any_rank_has_meta(model: torch.nn.Module, group: Any = None) -> bool:
    """Whether the model has meta tensors on at least one process (a collective)."""
    local = any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    flag = torch.tensor([int(local)])
    dist.all_reduce(flag, group=group)
    if local and dist.get_rank() == 0:
        raise ValueError(
            "loading weights from process 0 only needs real weights on process 0; got meta "
            "tensors there. Build the model normally on the main process and under "
            "init_empty_weights() (or torch.device('meta')) on the others."
        )
    return bool(flag.item())


def non_persistent_buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Buffers that ``state_dict`` leaves out, by full name."""
    out = {}
    for prefix, module in model.named_modules():
        for name in getattr(module, "_non_persistent_buffers_set", ()):
            buf = module._buffers.get(name)
            if buf is not None:
                out[f"{prefix}.{name}" if prefix else name] = buf
    return out


def broadcast_module_states(model: torch.nn.Module, device: torch.device) -> None:
    """Overwrite parameters and buffers with process 0's values (in place, tensor by tensor)."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_meta:
                continue
            dist.broadcast(tensor.data, src=0)


def load_from_rank0(
    model: torch.nn.Module,
    full_state: dict[str, torch.Tensor],
    extra_buffers: dict[str, torch.Tensor],
    device: torch.device,
    materialize: bool = True,
) -> None:
    """Give the sharded ``model`` (on meta, unless ``materialize`` is False) real storage and
    process 0's weights.

    Process 0 passes the full state dict; the others pass ``{}`` and receive their shards one
    tensor at a time, so no process other than 0 ever holds the whole model.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if materialize:
        model.to_empty(device=device)
    set_model_state_dict(
        model,
        full_state,  # type: ignore[arg-type]
        options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True),
    )
    names = sorted(non_persistent_buffers(model))
    buffers = dict(model.named_buffers())
    with torch.no_grad():
        for name in names:
            if dist.get_rank() == 0:
                buffers[name].copy_(extra_buffers[name])
            dist.broadcast(buffers[name], src=0)


def default_param_init(device: torch.device) -> Callable[[torch.nn.Module], None]:
    """FSDP1 ``param_init_fn``: give a meta module empty storage on ``device``."""
    return functools.partial(_to_empty, device=device)


def _to_empty(module: torch.nn.Module, device: torch.device) -> None:
    module.to_empty(device=device, recurse=False)
