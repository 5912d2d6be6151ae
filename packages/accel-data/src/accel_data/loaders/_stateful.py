"""Loaders built on torchdata's ``StatefulDataLoader`` (``use_stateful_dataloader``).

A plain prepared loader resumes by position: it replays the sampler's order and drops the
batches already seen. That is exact for the order, but the workers start afresh: a dataset
whose workers hold state (an augmentation drawing from a worker generator, a stream's read
offset) continues differently from an uninterrupted run. A stateful loader also saves what
torchdata's ``StatefulDataLoader`` saves: the workers' base seed, the number of batches each
worker produced and the state of each worker's dataset copy (when the dataset has
``state_dict`` / ``load_state_dict``), captured with every batch the loader yields. Resuming
restarts the workers from that state, so the rest of the epoch is the one of the run that saved.

``DataLoaderShard``, ``DataLoaderDispatcher`` and ``SkipDataLoader`` built with
``use_stateful_dataloader=True`` are instances of a subclass that also derives from
``StatefulDataLoader`` (``stateful_class``). Built directly, their ``state_dict`` is torchdata's
own, taken after the batches yielded so far; built by ``prepare_data_loader``, it is the
loader's position with torchdata's state under ``STATE_KEY``. Both load either form.

torchdata is optional (``pip install "accel-data[stateful]"``) and imported only here, when a
stateful loader is built.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Mapping
from typing import Any

STATE_KEY = "dataloader_state"
"""Key of the ``StatefulDataLoader`` state inside a prepared loader's ``state_dict``."""

_INSTALL = 'pip install "accel-data[stateful]"'
_FINISHED = "_iterator_finished"


def stateful_loader_base() -> type:
    """torchdata's ``StatefulDataLoader`` class, or an ``ImportError`` naming the extra."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as exc:
        raise ImportError(
            "use_stateful_dataloader=True builds loaders on torchdata's "
            f"StatefulDataLoader (torchdata >= 0.11), which cannot be imported ({exc}). "
            f"Install it with: {_INSTALL}, or pass use_stateful_dataloader=False."
        ) from exc
    return StatefulDataLoader


class BaseLoaderView:
    """``base_dataloader``: the loader that loads the batches, which here is the loader itself
    (the classes are ``DataLoader`` subclasses, not wrappers). Read on the class, it raises
    ``AttributeError``, as an attribute that only instances have."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            name = owner.__name__ if owner is not None else "the class"
            raise AttributeError(
                f"base_dataloader is an attribute of a built loader; got the class {name}. "
                f"Build the loader ({name}(dataset, ...)) and read it there."
            )
        return obj


@functools.cache
def _flag_position(cls: type) -> int | None:
    # Index of use_stateful_dataloader among the positional arguments of cls.__init__.
    names = [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ][1:]
    return names.index("use_stateful_dataloader") if "use_stateful_dataloader" in names else None


def loader_class(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> type:
    """The class to build for ``cls(*args, **kwargs)``: its stateful variant when the call
    asks for ``use_stateful_dataloader=True`` (by keyword or by position), else ``cls``."""
    if "_stateful_base" in cls.__dict__:  # already the stateful variant
        return cls
    if "use_stateful_dataloader" in kwargs:
        wanted = bool(kwargs["use_stateful_dataloader"])
    else:
        index = _flag_position(cls)
        wanted = index is not None and len(args) > index and bool(args[index])
    return stateful_class(cls) if wanted else cls


def _yielded(state: Mapping[str, Any]) -> int:
    """Batches a ``StatefulDataLoader`` state has yielded in its epoch (0 once finished)."""
    try:
        if state[_FINISHED]:
            return 0
        if "_num_yielded" in state:  # no workers
            count = state["_num_yielded"]
        else:
            count = state["_snapshot"]["_snapshot_step"] + state["_steps_since_snapshot"]
    except (KeyError, TypeError) as exc:
        raise ValueError(
            "a StatefulDataLoader state holds '_iterator_finished' and '_num_yielded' (or, "
            "with workers, '_snapshot' with its '_snapshot_step' and '_steps_since_snapshot'); "
            f"this one lacks {exc}. "
            "Pass the dict that state_dict() returned."
        ) from None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(
            "a StatefulDataLoader state's count of batches yielded ('_num_yielded') must be an "
            f"int >= 0; got {count!r}. "
            "Pass the dict that state_dict() returned."
        )
    return count


def is_torchdata_state(state: Any) -> bool:
    """True for a state in torchdata's own form (``StatefulDataLoader.state_dict()``)."""
    return isinstance(state, Mapping) and _FINISHED in state and "batches_yielded" not in state


class _StatefulBase:
    """What every stateful loader shares: torchdata's ``state_dict`` taken after each batch
    handed out (the loaders look one batch ahead), and torchdata's construction warning."""

    _stateful_base: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            # StatefulDataLoader 0.11 calls a deprecated torch function on construction.
            warnings.filterwarnings("ignore", message=".*set_vital.*", category=UserWarning)
            super().__init__(*args, **kwargs)

    def _loader_state(self, captured: dict[str, Any] | None) -> dict[str, Any]:
        """torchdata's state after the batches handed out: the one captured mid-pass (marked
        finished at the last batch, so that it resumes with a new epoch), else the live one."""
        if captured is None:
            state: dict[str, Any] = self._stateful_base.state_dict(self)
            return state
        if getattr(self, "end_of_dataloader", False):
            return {**captured, _FINISHED: True}
        return captured


class _StatefulLoaderMixin(_StatefulBase):
    """What a stateful loader adds to ``DataLoaderShard`` / ``DataLoaderDispatcher``.

    It comes first in the class's bases, so its ``state_dict`` / ``load_state_dict`` wrap the
    position bookkeeping of the loader; ``_stateful_base`` (``StatefulDataLoader``) is called
    explicitly for the workers' state.
    """

    _position: Any  # shared with the loaders skip_first_batches derives, like the worker state
    _position_format: bool  # see _PreparedLoaderMixin
    # Skipped batches go through the workers (read and dropped), so that the saved worker state
    # counts them: a later resume fast-forwards the same sampler iterator.
    _skip_by_index = False

    def _capture_state(self) -> None:
        # Called after a batch is fetched and before the next one is: the state resumes after
        # the batches handed out so far (the loader looks one batch ahead).
        self._position.worker_state = self._stateful_base.state_dict(self)

    def _start_pass(self) -> int:
        skip = super()._start_pass()  # type: ignore[misc]
        position = self._position
        if position.resumed_count:
            position.batches_yielded, position.resumed_count = position.resumed_count, 0
        return int(skip)

    def _finish_pass(self, advance: bool = True) -> None:
        super()._finish_pass(advance)  # type: ignore[misc]
        self._position.worker_state = None

    def state_dict(self) -> dict[str, Any]:
        """torchdata's state after the batches yielded (a loader built directly), or the
        loader's position plus that state under ``dataloader_state`` (a prepared loader; None
        between passes: the next pass starts new workers)."""
        position = self._position
        if not self._position_format:
            return self._loader_state(position.worker_state)
        state: dict[str, Any] = super().state_dict()  # type: ignore[misc]
        if position.resumed_count:  # loaded, not iterated yet: the loaded position
            state["batches_yielded"] = position.resumed_count
        mid_epoch = state["batches_yielded"] > 0
        state[STATE_KEY] = position.worker_state if mid_epoch else None
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue from ``state_dict``: a position (with or without worker state) or
        torchdata's own state.

        A position without worker state (saved between passes, or by a loader prepared without
        ``use_stateful_dataloader``) resumes by position: the batches already seen are read
        through the workers and dropped. torchdata's state resumes the epoch it was saved in
        after the batches it counts (the loader's epoch number stays).
        """
        if is_torchdata_state(state_dict):
            count = _yielded(state_dict)
            self._stateful_base.load_state_dict(self, state_dict)
            position = self._position
            position.pending_skip, position.batches_yielded = 0, 0
            position.resumed_count = count
            position.worker_state = None
            position.resumed = True
            self._first_iter_skip = None
            return
        inner = state_dict.get(STATE_KEY)
        super().load_state_dict(state_dict)  # type: ignore[misc]
        position = self._position
        position.resumed_count = 0
        position.worker_state = None
        if inner is None:
            return
        position.resumed_count, position.pending_skip = position.pending_skip, 0
        self._stateful_base.load_state_dict(self, inner)
        position.worker_state = inner


class _StatefulSkipMixin(_StatefulBase):
    """What a stateful ``SkipDataLoader`` adds: torchdata's ``state_dict`` / ``load_state_dict``
    describing the batches handed out (the skipped ones count, as torchdata read them)."""

    _captured: dict[str, Any] | None = None

    def _capture_state(self) -> None:
        self._captured = self._stateful_base.state_dict(self)

    def _finish_pass(self) -> None:
        self._captured = None

    def state_dict(self) -> dict[str, Any]:
        """torchdata's state after the batches yielded so far."""
        return self._loader_state(self._captured)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the next pass after the batches ``state_dict`` counts."""
        _yielded(state_dict)
        self._stateful_base.load_state_dict(self, state_dict)
        self._captured = None


@functools.cache
def stateful_class(base: type) -> type:
    """The stateful variant of a loader class (``DataLoaderShard`` ...), built once.

    The new class is a subclass of ``base`` and of ``StatefulDataLoader``; ``base`` names the
    mixin it needs in ``_stateful_mixin`` (``"loader"`` or ``"skip"``).
    """
    loader_base = stateful_loader_base()
    skip = getattr(base, "_stateful_mixin", "loader") == "skip"
    mixin = _StatefulSkipMixin if skip else _StatefulLoaderMixin
    return type(
        f"Stateful{base.__name__}",
        (mixin, base, loader_base),
        {
            "__module__": base.__module__,
            "__doc__": f"A ``{base.__name__}`` built on torchdata's ``StatefulDataLoader``: its "
            "``state_dict`` holds the workers' state, so a resumed epoch continues exactly.",
            "_stateful_base": loader_base,
        },
    )
