"""The engine interface, and the single-process engine that implements it plainly."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

if TYPE_CHECKING:
    from ._context import EngineContext

_State = TypeVar("_State")


class StateCopy(Protocol):
    """Copies a state (a state dict, nested containers of tensors) to host memory, tied
    tensors kept tied, and returns the copy: what asynchronous saves write."""

    def __call__(self, state: _State, /) -> _State: ...


@dataclass
class CheckpointStates:
    """What an engine gives ``save_state`` for the models and optimizers of a run."""

    weights: list[Any] = field(default_factory=list)
    """Whole model state dicts, for the main process to write as model files (empty when the
    engine wrote or snapshotted its own layout); the save hooks see them."""
    optimizers: list[Callable[[], Any]] = field(default_factory=list)
    """One function per optimizer returning its whole state, called by the process that
    writes (empty when the engine saves its own layout)."""
    jobs: list[Callable[[], None]] = field(default_factory=list)
    """Background writes of shards already copied to host memory (asynchronous saves)."""
    models: int = 0
    """How many models the checkpoint holds (for its manifest)."""


class CheckpointFiles(Protocol):
    """The files of a checkpoint that ``load_state`` is reading, each checked as it is asked
    for (nothing is restored while they are read)."""

    input_dir: str

    def weights(self, index: int, state_dict: Mapping[str, torch.Tensor]) -> str:
        """The path of model ``index``'s weights file, its keys and shapes checked against
        ``state_dict``."""
        ...

    def optimizer(
        self, index: int, optimizer: torch.optim.Optimizer
    ) -> tuple[dict[str, object], str]:
        """Optimizer ``index``'s saved state, checked against ``optimizer``, and its file's
        name."""
        ...


@dataclass
class LoadedStates:
    """What an engine read for the models and optimizers in ``load_state``'s first phase."""

    weights: list[str] = field(default_factory=list)
    """Checked weights files, one per model (empty when the engine loads its own layout)."""
    optimizers: list[tuple[str, Any, Any, str]] = field(default_factory=list)
    """``(what, optimizer, state, file name)``, restored with the schedulers and the other
    objects before any weights (empty when the engine loads its own layout)."""


class Engine:
    """Single process: the model only moves to the device. Subclasses wrap it."""

    handles_mixed_precision: bool = False
    """Whether the engine casts weights and scales losses itself (no autocast, no grad scaler
    from the Accelerator)."""
    replicated_states: bool = True
    """Whether every process holds whole model and optimizer states (False: each holds shards,
    saved and loaded by `save_model_state` / `load_model_state` and the optimizer
    counterparts)."""

    def __init__(self, context: EngineContext) -> None:
        self.context = context

    def data_parallel_rank(self) -> tuple[int, int]:
        """How many data-parallel replicas read different batches, and which one this process
        is (processes that split one model, e.g. with tensor parallelism, read the same)."""
        return self.context.num_processes, self.context.process_index

    def place_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Move ``model`` to the device of this process before it is wrapped."""
        return model.to(self.context.device)

    def prepare_all(self, objects: Sequence[object]) -> dict[int, object]:
        """Prepare objects that the engine needs together (model, optimizer, scheduler).

        Called by ``prepare`` after the dataloaders are prepared, with every object passed.

        Returns:
            The prepared objects by position; the facade prepares the others one by one.
        """
        return {}

    def wrap_model(self, model: torch.nn.Module, evaluation_mode: bool) -> torch.nn.Module:
        """Wrap ``model`` for training (or only place it when ``evaluation_mode``)."""
        return model

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """Return the user's module inside the engine's wrapper."""
        return model

    def is_wrapped(self, model: torch.nn.Module) -> bool:
        """Whether ``model`` is this engine's wrapper."""
        return False

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[object]:
        """Context in which backward passes do not synchronise gradients."""
        return contextlib.nullcontext()

    def context_parallel(
        self,
        buffers: list[torch.Tensor],
        buffer_seq_dims: list[int],
        no_restore_buffers: set[torch.Tensor] | None,
    ) -> contextlib.AbstractContextManager[object]:
        """Context that splits ``buffers`` along their sequence dimension between the
        context-parallel processes; nothing to split here (no ``cp`` mesh dimension)."""
        return contextlib.nullcontext()

    def sequence_parallel_loader(self, loader: Any) -> Any:
        """``loader`` adapted to sequence parallelism; nothing to adapt here (only the
        DeepSpeed engine splits sequences with Ulysses)."""
        return loader

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Run the backward pass of ``loss`` (already scaled for accumulation)."""
        scaler = self.context.scaler
        if scaler is not None:
            scaler.scale(loss).backward(**kwargs)
        else:
            loss.backward(**kwargs)

    def release(self) -> None:
        """Drop what the engine holds on prepared objects (``free_memory``)."""

    def clip_grad_norm_(
        self, parameters: Iterable[torch.nn.Parameter], max_norm: float, norm_type: float = 2
    ) -> torch.Tensor:
        """Clip the global gradient norm; return the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

    # ------------------------------------------------------------------ hooks of prepare
    def adapt_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Point an optimizer built on the user's parameters at the engine's parameters (an
        engine that replaces parameters when wrapping, e.g. by shards, overrides it)."""
        return optimizer

    # ------------------------------------------------------------------ checkpoint states
    def model_state_dict(self, model: torch.nn.Module) -> dict[str, Any]:
        """The full state dict of a prepared model, keyed as in the user's module.

        Weights offloaded to the CPU or disk by ``dispatch_model`` are read back from their
        offload storage, one module at a time.
        """
        from accel_bigmodel import get_state_dict_offloaded_model, has_offloaded_params

        inner = _inner(self, model)
        if any(has_offloaded_params(module) for module in inner.modules()):
            return get_state_dict_offloaded_model(inner)
        return inner.state_dict()

    def load_model_state_dict(
        self,
        model: torch.nn.Module,
        path: str,
        strict: bool = True,
        *,
        trust_pickles: bool = False,
        **kwargs: Any,
    ) -> tuple[list[str], list[str]]:
        """Load a weights file written by ``save_state`` into a prepared model.

        A torch pickle runs no code unless ``trust_pickles`` (the user opted in by name).

        Returns:
            ``(missing_keys, unexpected_keys)``.
        """
        from .._core._state_files import load_weights

        model = _inner(self, model)
        return load_weights(model, path, strict=strict, trust_pickles=trust_pickles, **kwargs)

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, object]:
        """The full state dict of a prepared optimizer."""
        return optimizer.state_dict()

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state_dict: dict[str, object]
    ) -> None:
        """Restore a prepared optimizer from `optimizer_state_dict` output."""
        optimizer.load_state_dict(state_dict)

    # --------------------------------------------------- checkpoint layouts of sharding engines
    # ``save_state`` / ``load_state`` call these on every process when ``replicated_states`` is
    # False, instead of writing the state dicts above from the main process.
    def save_model_state(self, model: torch.nn.Module, output_dir: str, index: int) -> bool:
        """Write the state of a prepared model in the engine's own layout.

        Returns:
            False when the engine has no layout of its own (the caller writes the state dict).
        """
        return False

    def validate_model_state(
        self, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> None:
        """Check, before anything is loaded, that the files of model ``index`` (and of its
        optimizer) in the engine's own layout run no code when read.

        The plain layout has no files of its own (``save_state`` reads its files through the
        restricted reader), so there is nothing to check here; sharding engines override it.

        Raises:
            accel_bigmodel.UntrustedPickleError: naming the refused file, unless
                ``trust_pickles``.
        """

    def load_model_state(
        self, model: torch.nn.Module, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> bool:
        """Load a model written by `save_model_state`; False when the engine has no
        layout of its own or ``input_dir`` holds none. Its files run no code unless
        ``trust_pickles``."""
        return False

    def save_optimizer_state(
        self, optimizer: torch.optim.Optimizer, output_dir: str, index: int
    ) -> bool:
        """Write the state of a prepared optimizer in the engine's own layout; False when the
        engine has none (the caller writes ``optimizer.state_dict()``)."""
        return False

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        input_dir: str,
        index: int,
        *,
        trust_pickles: bool = False,
    ) -> bool:
        """Load an optimizer written by `save_optimizer_state`; False when the engine
        has no layout of its own or ``input_dir`` holds none. Its files run no code unless
        ``trust_pickles``."""
        return False

    def checkpoint_states(
        self,
        models: list[torch.nn.Module],
        optimizers: list[torch.optim.Optimizer],
        output_dir: str,
        copy: StateCopy | None = None,
    ) -> CheckpointStates:
        """The states of ``models`` and ``optimizers`` for a checkpoint, called on every
        process: whole state dicts where every process holds them (`replicated_states`),
        else this engine's own layout, written into ``output_dir`` now (``copy`` None) or
        copied with ``copy`` and returned as background jobs.
        """
        if self.replicated_states:
            return CheckpointStates(
                weights=[self.model_state_dict(model) for model in models],
                optimizers=[partial(self.optimizer_state_dict, opt) for opt in optimizers],
                models=len(models),
            )
        if copy is not None:
            job = self.snapshot_sharded_states(models, optimizers, output_dir, copy)
            return CheckpointStates(jobs=[job], models=len(models))
        for i, model in enumerate(models):
            self.save_model_state(model, output_dir, i)
        for i, opt in enumerate(optimizers):
            self.save_optimizer_state(opt, output_dir, i)
        return CheckpointStates(models=len(models))

    def read_checkpoint_states(
        self,
        models: list[torch.nn.Module],
        optimizers: list[torch.optim.Optimizer],
        files: CheckpointFiles,
        *,
        trust_pickles: bool = False,
    ) -> LoadedStates:
        """The first phase of ``load_state`` for ``models`` and ``optimizers``: check their
        files and change nothing. Whole state dicts are read from ``files`` where every
        process holds them (`replicated_states`); else this engine's own layout is
        checked (`validate_model_state`) and read in `apply_checkpoint_states`.
        """
        if self.replicated_states:
            return LoadedStates(
                weights=[files.weights(i, self.model_state_dict(m)) for i, m in enumerate(models)],
                optimizers=[
                    (f"optimizer {i}", opt, *files.optimizer(i, opt))
                    for i, opt in enumerate(optimizers)
                ],
            )
        for i in range(len(models)):
            self.validate_model_state(files.input_dir, i, trust_pickles=trust_pickles)
        return LoadedStates()

    def apply_checkpoint_states(
        self,
        models: list[torch.nn.Module],
        optimizers: list[torch.optim.Optimizer],
        loaded: LoadedStates,
        input_dir: str,
        *,
        trust_pickles: bool = False,
        **model_kwargs: Any,
    ) -> None:
        """The last step of ``load_state``, once every other object took its state: stream in
        the weights that `read_checkpoint_states` checked, or load the models and
        optimizers from this engine's own layout.

        Raises:
            FileNotFoundError: when ``input_dir`` holds no layout of this engine's for one of
                them.
        """
        if self.replicated_states:
            for model, path in zip(models, loaded.weights):
                self.load_model_state_dict(model, path, trust_pickles=trust_pickles, **model_kwargs)
            return
        for i, model in enumerate(models):
            if not self.load_model_state(model, input_dir, i, trust_pickles=trust_pickles):
                raise _no_layout("model", i, input_dir)
        for i, opt in enumerate(optimizers):
            if not self.load_optimizer_state(opt, input_dir, i, trust_pickles=trust_pickles):
                raise _no_layout("optimizer", i, input_dir)

    # ------------------------------------------------------- asynchronous saves (sharding engines)
    def check_async_save(self) -> None:
        """Refuse, before anything is written, an asynchronous ``save_state`` this engine
        cannot do (engines with replicated states are saved by the caller and never refuse).

        Raises:
            NotImplementedError: naming the engine and the fix.
        """
        if not self.replicated_states:
            raise NotImplementedError(
                "save_state(async_save=True) needs an engine that can copy its shards to host "
                f"memory; {type(self).__name__} cannot. Call save_state(async_save=False)."
            )

    def snapshot_sharded_states(
        self,
        models: list[torch.nn.Module],
        optimizers: list[torch.optim.Optimizer],
        output_dir: str,
        copy: StateCopy,
    ) -> Callable[[], None]:
        """Copy this process's shards of ``models`` and ``optimizers`` to host memory now and
        return the job that writes them into ``output_dir`` in the layout of
        `save_model_state` / `save_optimizer_state`.

        Called on every process on the calling thread; the job runs on a background thread
        while training goes on, so it must not run collectives on the default process group.

        Args:
            models: The prepared models.
            optimizers: The prepared optimizers.
            output_dir: The staging folder.
            copy: Copies a state dict to host memory (tied tensors kept tied).
        """
        self.check_async_save()
        raise NotImplementedError(f"{type(self).__name__} does not snapshot its shards")


def _inner(engine: Engine, model: torch.nn.Module) -> torch.nn.Module:
    """The user's module inside compile and engine wrappers."""
    original = model.__dict__.get("_orig_mod")  # where compile_regions keeps the model
    if isinstance(original, torch.nn.Module):
        model = original
    elif hasattr(model, "_orig_mod") and type(model).__name__ == "OptimizedModule":
        model = model._orig_mod  # type: ignore[assignment]
    return engine.unwrap(model)


def _no_layout(what: str, index: int, input_dir: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"a sharded run loads each {what} from the layout its engine saved; {input_dir!r} "
        f"holds none for {what} {index}. Load a checkpoint saved by a run with the same "
        "engine (FSDP or DeepSpeed), or prepare the same objects as the saving run."
    )
