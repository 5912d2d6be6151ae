"""Fully sharded data parallelism (FSDP2 ``fully_shard`` by default, FSDP1
``FullyShardedDataParallel``), hybrid sharding and tensor parallelism on a ``DeviceMesh``.

One engine serves every layout a ``ParallelismConfig`` describes: tensor-parallel layers are
split first (``parallelize_module``), then the data-parallel dimensions shard (``dp_shard``) or
replicate (``dp_replicate``) the result with ``fully_shard``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from accel_state import FullyShardedDataParallelPlugin, ParallelismConfig
from accel_state import environment_variables as env

from .._base import Engine, StateCopy
from . import _context_parallel as cp
from . import _fsdp_build as build
from . import _fsdp_comm as comm
from . import _fsdp_io as io

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from .._context import EngineContext

_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


class FSDPEngine(Engine):
    """Shards models over the data-parallel processes, optionally after splitting layers with
    tensor parallelism. See ``FullyShardedDataParallelPlugin`` and ``ParallelismConfig``."""

    replicated_states = False

    def __init__(self, context: EngineContext) -> None:
        super().__init__(context)
        state = context.state
        # A parallelism layout without a plugin shards with fully_shard (FSDP2), the only
        # version that composes with a device mesh of several dimensions.
        self.plugin: FullyShardedDataParallelPlugin = (
            state.fsdp_plugin or FullyShardedDataParallelPlugin(fsdp_version=2)
        )
        self.config: ParallelismConfig | None = getattr(state, "parallelism_config", None)
        self.version = self.plugin.fsdp_version
        if self.version == 1 and self.config is not None and self.config.cp_enabled:
            raise ValueError(
                "context parallelism composes with FSDP2 (fully_shard) only; got cp_size="
                f"{self.config.cp_size} with fsdp_version=1. Use fsdp_version=2."
            )
        if self.version == 1 and self.config is not None and self.config.tp_enabled:
            raise ValueError(
                "tensor parallelism composes with FSDP2 (fully_shard) only; got tp_size="
                f"{self.config.tp_size} with fsdp_version=1. Use fsdp_version=2."
            )
        self._mesh: DeviceMesh | None = None
        self._param_map: dict[int, torch.nn.Parameter] = {}
        self._models: list[torch.nn.Module] = []
        self._save_groups: list[dist.ProcessGroup] = []
        """Gloo groups of ``torch.distributed.checkpoint.async_save``, one per state."""

    # ------------------------------------------------------------------------ the mesh
    @property
    def mesh(self) -> DeviceMesh:
        """The device mesh of the run (built on first use)."""
        if self._mesh is None:
            state = self.context.state
            local = max(1, getattr(state, "local_num_processes", 0) or state.num_processes)
            self._mesh = build.build_mesh(
                self.plugin, self.config, state.device.type, state.num_processes, local
            )
            state.device_mesh = self._mesh
        return self._mesh

    def data_parallel_rank(self) -> tuple[int, int]:
        """Processes of one tensor-parallel group read the same batches."""
        if self.config is None or not (self.config.tp_enabled or self.config.cp_enabled):
            return super().data_parallel_rank()
        data_mesh = build.dp_mesh(self.mesh)
        if data_mesh is None:
            return 1, 0
        return data_mesh.size(), _flat_rank(data_mesh)

    def context_parallel(
        self,
        buffers: list[torch.Tensor],
        buffer_seq_dims: list[int],
        no_restore_buffers: set[torch.Tensor] | None,
    ) -> contextlib.AbstractContextManager[object]:
        """Ring attention over the ``cp`` mesh dimension (see ``_context_parallel``)."""
        if self.config is None or not self.config.cp_enabled:
            return super().context_parallel(buffers, buffer_seq_dims, no_restore_buffers)
        strategy = str(getattr(self.config.cp_handler, "cp_comm_strategy", "allgather"))
        return cp.context_parallel_scope(
            self.mesh["cp"], strategy, buffers, buffer_seq_dims, no_restore_buffers
        )

    # ----------------------------------------------------------------------- wrapping
    def place_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Models with meta tensors stay where they are (they get storage when sharded);
        with CPU offload the model stays on the CPU."""
        if build.offload_enabled(self.plugin):
            return model
        if any(t.is_meta for t in [*model.parameters(), *model.buffers()]):
            return model
        return model.to(self.context.device)

    def wrap_model(self, model: torch.nn.Module, evaluation_mode: bool) -> torch.nn.Module:
        if evaluation_mode or self.is_wrapped(model):
            return model
        before = {_clean(n): p for n, p in model.named_parameters()}
        wrapped = self._wrap_fsdp1(model) if self.version == 1 else self._wrap_fsdp2(model)
        after = {_clean(n): p for n, p in wrapped.named_parameters()}
        for name, old in before.items():
            if name in after:
                self._param_map[id(old)] = after[name]
        self._models.append(wrapped)
        return wrapped

    def _wrap_fsdp2(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

        plugin, device = self.plugin, self.context.device
        offload = build.offload_enabled(plugin)
        mesh = self.mesh
        efficient = plugin.cpu_ram_efficient_loading or build.any_rank_has_meta(model)
        full: dict[str, torch.Tensor] = {}
        extra: dict[str, torch.Tensor] = {}
        if efficient:
            if dist.get_rank() == 0:
                full = {k: v.detach() for k, v in model.state_dict().items()}
                extra = {k: v.detach() for k, v in build.non_persistent_buffers(model).items()}
            # Every process shards an empty model; the weights arrive from process 0 below.
            model.to("meta")
        elif plugin.sync_module_states is not False and dist.get_world_size() > 1:
            # FSDP2 has no sync_module_states switch (the plugin holds None): every process
            # starts from process 0's weights.
            build.broadcast_module_states(model, device)
        if self.config is not None and self.config.tp_enabled:
            tp_handler = self.config.tp_handler
            build.apply_tensor_parallel(model, mesh["tp"], getattr(tp_handler, "tp_plan", None))
        ignored = {p for m in build.ignored_modules(plugin, model) for p in m.parameters()}
        units = [u for u in build.select_units(plugin, model) if not _all_in(u, ignored)]
        if plugin.activation_checkpointing:
            for unit in units or [model]:
                build.checkpoint_forward(
                    unit, offload=bool(plugin.activation_checkpointing_offload)
                )
        if self.config is not None and self.config.cp_enabled:
            cp.drop_attention_masks(model)
        data_mesh = build.shard_mesh(mesh)
        if data_mesh is not None:
            kwargs: dict[str, Any] = {
                "mesh": data_mesh,
                "reshard_after_forward": plugin.reshard_after_forward,
                "mp_policy": build.fsdp2_mp_policy(plugin),
                # On a CPU device the parameters already live in CPU memory.
                "offload_policy": CPUOffloadPolicy()
                if offload and device.type != "cpu"
                else OffloadPolicy(),
            }
            if ignored:
                kwargs["ignored_params"] = ignored
            for unit in units:
                fully_shard(unit, **kwargs)
            fully_shard(model, **kwargs)
            # gloo's reduce_scatter_tensor all-reduces the whole gradient: send each process
            # only its chunk instead (see _fsdp_comm).
            if env.read_env(env.ACCEL_FSDP_GLOO_ALL_TO_ALL_REDUCE_SCATTER, True):
                comm.install_gloo_reduce_scatter(
                    [*units, model], data_mesh.get_group(data_mesh.ndim - 1)
                )
        if efficient:
            build.load_from_rank0(model, full, extra, torch.device("cpu") if offload else device)
            del full, extra
        return model

    def _wrap_fsdp1(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, ShardingStrategy
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        plugin, device = self.plugin, self.context.device
        has_meta = build.any_rank_has_meta(model)
        # FSDP1 broadcasts module states itself only from GPU memory; on CPU process 0's
        # weights are sent here instead (after wrapping when other processes are on meta).
        own_sync = device.type == "cpu"
        efficient = own_sync and (has_meta or plugin.cpu_ram_efficient_loading)
        full: dict[str, torch.Tensor] = {}
        extra: dict[str, torch.Tensor] = {}
        if efficient and dist.get_rank() == 0:
            full = {k: v.detach().clone() for k, v in model.state_dict().items()}
            extra = {k: v.detach() for k, v in build.non_persistent_buffers(model).items()}
        elif own_sync and plugin.sync_module_states and not has_meta:
            build.broadcast_module_states(model, device)
        # On a CPU device the parameters already live in CPU memory.
        offload = CPUOffload(offload_params=build.offload_enabled(plugin) and device.type != "cpu")
        strategy = build.strategy_name(plugin)
        prefetch = plugin.backward_prefetch
        if isinstance(prefetch, str):
            prefetch = None if prefetch.upper() == "NO_PREFETCH" else BackwardPrefetch[prefetch]
        kwargs: dict[str, Any] = {
            "sharding_strategy": ShardingStrategy[
                "_HYBRID_SHARD_ZERO2" if strategy == "HYBRID_SHARD_ZERO2" else strategy
            ],
            "cpu_offload": offload,
            "auto_wrap_policy": self._fsdp1_policy(model),
            "backward_prefetch": prefetch,
            "mixed_precision": build.fsdp1_mp_policy(plugin),
            "ignored_modules": build.ignored_modules(plugin, model) or None,
            "param_init_fn": plugin.param_init_fn
            or (build.default_param_init(device) if has_meta else None),
            "device_id": device,
            "sync_module_states": not own_sync and (plugin.sync_module_states or has_meta),
            "forward_prefetch": plugin.forward_prefetch,
            "limit_all_gathers": plugin.limit_all_gathers,
            "use_orig_params": plugin.use_orig_params,
        }
        if strategy.startswith("HYBRID_SHARD"):
            kwargs["device_mesh"] = self.mesh
        wrapped = FSDP(model, **kwargs)
        if efficient:
            build.load_from_rank0(wrapped, full, extra, device, materialize=False)
            del full, extra
        if plugin.activation_checkpointing:
            units = [m.module for m in FSDP.fsdp_modules(wrapped) if m is not wrapped]
            for unit in units or [wrapped.module]:
                build.checkpoint_forward(unit)
        return wrapped

    def _fsdp1_policy(self, model: torch.nn.Module) -> Any:
        import functools

        from torch.distributed.fsdp.wrap import ModuleWrapPolicy, size_based_auto_wrap_policy

        policy = build.wrap_kind(self.plugin)
        if policy == "NO_WRAP":
            return None
        if policy == "TRANSFORMER_BASED_WRAP":
            return ModuleWrapPolicy(build._wrap_classes(self.plugin, model))
        if policy == "SIZE_BASED_WRAP":
            return functools.partial(
                size_based_auto_wrap_policy, min_num_params=self.plugin.min_num_params or 0
            )
        return policy

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        return model.module if isinstance(model, FSDP) else model

    def is_wrapped(self, model: torch.nn.Module) -> bool:
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        return isinstance(model, (FSDP, FSDPModule)) or any(model is m for m in self._models)

    # ----------------------------------------------------------------------- training
    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[object]:
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        if isinstance(model, FSDP):
            return model.no_sync()
        if isinstance(model, FSDPModule):
            return _fsdp2_no_sync(model)
        return contextlib.nullcontext()

    def clip_grad_norm_(
        self, parameters: Iterable[torch.nn.Parameter], max_norm: float, norm_type: float = 2
    ) -> torch.Tensor:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        params = list(parameters)
        ids = {id(p) for p in params}
        for model in self._models:
            if isinstance(model, FSDP) and ids <= {id(p) for p in model.parameters()}:
                return model.clip_grad_norm_(max_norm, norm_type)
        return _clip_sharded(params, max_norm, float(norm_type))

    def adapt_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Replace the user's parameters in ``optimizer`` by the sharded ones (the optimizer
        may be built before ``prepare``)."""
        new_ids = {id(p) for p in self._param_map.values()}
        missing = 0
        remapped: dict[int, torch.nn.Parameter] = {}
        for group in optimizer.param_groups:
            params = []
            for p in group["params"]:
                if id(p) in self._param_map and id(p) not in new_ids:
                    remapped[id(p)] = self._param_map[id(p)]
                    params.append(self._param_map[id(p)])
                else:
                    missing += id(p) not in new_ids
                    params.append(p)
            group["params"] = params
        if missing and self.version == 1 and not self.plugin.use_orig_params:
            raise ValueError(
                "with FSDP1 and use_orig_params=False the parameters are flattened, so an "
                f"optimizer built before prepare cannot follow them; got {missing} parameters "
                "unknown to the prepared models. Build the optimizer from the prepared model's "
                "parameters, or set use_orig_params=True."
            )
        for old_id, new in remapped.items():
            for key in list(optimizer.state):
                if id(key) == old_id:
                    optimizer.state[new] = optimizer.state.pop(key)
        return optimizer

    # ------------------------------------------------------------------ checkpointing
    def model_state_dict(self, model: torch.nn.Module) -> dict[str, Any]:
        """The whole state dict, gathered on the main process (``{}`` on the others); a
        collective."""
        return io.full_model_state(model)

    def _sharded(self) -> bool:
        return build.state_dict_type_name(self.plugin) != "FULL_STATE_DICT"

    def save_model_state(self, model: torch.nn.Module, output_dir: str, index: int) -> bool:
        io.save_model(model, output_dir, index, sharded=self._sharded())
        return True

    def validate_model_state(
        self, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> None:
        io.validate(input_dir, index, trust_pickles=trust_pickles)

    def load_model_state(
        self, model: torch.nn.Module, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> bool:
        io.validate(input_dir, index, trust_pickles=trust_pickles)
        return io.load_model(model, input_dir, index, trust_pickles=trust_pickles)

    def save_optimizer_state(
        self, optimizer: torch.optim.Optimizer, output_dir: str, index: int
    ) -> bool:
        inner = getattr(optimizer, "optimizer", optimizer)
        io.save_optimizer(self._model_of(inner), inner, output_dir, index, self._sharded())
        return True

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        input_dir: str,
        index: int,
        *,
        trust_pickles: bool = False,
    ) -> bool:
        inner = getattr(optimizer, "optimizer", optimizer)
        model = self._model_of(inner)
        return io.load_optimizer(model, inner, input_dir, index, trust_pickles=trust_pickles)

    def check_async_save(self) -> None:
        """FSDP saves asynchronously in both layouts: nothing to refuse."""

    def snapshot_sharded_states(
        self,
        models: list[torch.nn.Module],
        optimizers: list[torch.optim.Optimizer],
        output_dir: str,
        copy: StateCopy,
    ) -> Callable[[], None]:
        """Stage the shards in host memory (``torch.distributed.checkpoint.async_save`` for
        sharded layouts, a gather on process 0 for full ones); see ``_fsdp_io.snapshot``."""
        inner = [getattr(opt, "optimizer", opt) for opt in optimizers]
        pairs = [(self._model_of(opt), opt) for opt in inner]
        if self._sharded():
            # Created here, on the calling thread of every process, in the same order.
            while len(self._save_groups) < len(models) + len(pairs):
                self._save_groups.append(dist.new_group(backend="gloo"))
        return io.snapshot(models, pairs, output_dir, self._sharded(), self._save_groups, copy)

    def _model_of(self, optimizer: torch.optim.Optimizer) -> torch.nn.Module:
        ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
        for model in self._models:
            if any(id(p) in ids for p in model.parameters()):
                return model
        raise ValueError(
            "saving or loading a sharded optimizer needs the model it optimizes; got an "
            "optimizer over none of the prepared models' parameters. Pass the model and the "
            "optimizer to accelerator.prepare."
        )


def _flat_rank(mesh: DeviceMesh) -> int:
    rank = 0
    for dim in range(mesh.ndim):
        rank = rank * mesh.size(dim) + mesh.get_local_rank(dim)
    return rank


def _clean(name: str) -> str:
    for prefix in _PREFIXES:
        name = name.replace(prefix, "")
    return name


def _all_in(module: torch.nn.Module, params: set[torch.nn.Parameter]) -> bool:
    own = list(module.parameters())
    return bool(own) and all(p in params for p in own)


@contextlib.contextmanager
def _fsdp2_no_sync(model: Any) -> Iterator[None]:
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def _clip_sharded(
    params: list[torch.nn.Parameter], max_norm: float, norm_type: float
) -> torch.Tensor:
    """Clip gradients that may be ``DTensor`` shards: each norm is reduced over its mesh."""
    from torch.distributed.tensor import DTensor

    norms = []
    for p in params:
        if p.grad is None:
            continue
        norm = torch.linalg.vector_norm(p.grad, norm_type)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        norms.append(norm)
    if not norms:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
    coef = min(1.0, max_norm / (float(total) + 1e-6))
    if coef < 1.0:
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(coef)
    return total
