"""Prepared loaders built on torchdata's ``StatefulDataLoader`` (``use_stateful_dataloader``).

A plain prepared loader resumes by position: it replays the sampler's order and drops the
batches already seen. That is exact for the order, but the workers start afresh: a dataset
whose workers hold state (an augmentation drawing from a worker generator, a stream's read
offset) continues differently from an uninterrupted run. A stateful prepared loader also
saves what torchdata's ``StatefulDataLoader`` saves: the workers' base seed, the number of
batches each worker produced and the state of each worker's dataset copy (when the dataset has
``state_dict`` / ``load_state_dict``), captured with every batch the loader yields. Resuming
restarts the workers from that state, so the rest of the epoch is the one of the run that saved.

torchdata is optional (``pip install "accel-data[stateful]"``) and imported only here, when a
stateful loader is built.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

STATE_KEY = "dataloader_state"
"""Key of the ``StatefulDataLoader`` state inside a prepared loader's ``state_dict``."""

_INSTALL = 'pip install "accel-data[stateful]"'


def stateful_loader_base() -> type:
    """torchdata's ``StatefulDataLoader`` class, or an ``ImportError`` naming the extra."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as exc:
        raise ImportError(
            "use_stateful_dataloader=True builds prepared loaders on torchdata's "
            f"StatefulDataLoader (torchdata >= 0.11), which cannot be imported ({exc}). "
            f"Install it with: {_INSTALL}, or pass use_stateful_dataloader=False."
        ) from exc
    return StatefulDataLoader


class _StatefulLoaderMixin:
    """What a stateful prepared loader adds to ``DataLoaderShard`` / ``DataLoaderDispatcher``.

    It comes first in the class's bases, so its ``state_dict`` / ``load_state_dict`` wrap the
    position bookkeeping of the prepared loader; ``_stateful_base`` is ``StatefulDataLoader``,
    called explicitly for the workers' state.
    """

    _stateful_base: Any
    _position: Any  # shared with the loaders skip_first_batches derives, like the worker state
    # Skipped batches go through the workers (read and dropped), so that the saved worker state
    # counts them: a later resume fast-forwards the same sampler iterator.
    _skip_by_index = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            # StatefulDataLoader 0.11 calls a deprecated torch function on construction.
            warnings.filterwarnings("ignore", message=".*set_vital.*", category=UserWarning)
            super().__init__(*args, **kwargs)

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
        """The loader's position plus ``StatefulDataLoader``'s state (workers included).

        Between passes the worker state is None: the next pass starts new workers.
        """
        state: dict[str, Any] = super().state_dict()  # type: ignore[misc]
        position = self._position
        if position.resumed_count:  # loaded, not iterated yet: the loaded position
            state["batches_yielded"] = position.resumed_count
        mid_epoch = state["batches_yielded"] > 0
        state[STATE_KEY] = position.worker_state if mid_epoch else None
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue from ``state_dict``: the saved position, and the saved worker state.

        A state without worker state (saved between passes, or by a loader prepared without
        ``use_stateful_dataloader``) resumes by position: the batches already seen are read
        through the workers and dropped.
        """
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


@functools.cache
def stateful_class(base: type) -> type:
    """The stateful variant of a prepared loader class (``DataLoaderShard`` ...), built once.

    The new class is a subclass of ``base`` and of ``StatefulDataLoader``.
    """
    loader_base = stateful_loader_base()
    return type(
        f"Stateful{base.__name__}",
        (_StatefulLoaderMixin, base, loader_base),
        {
            "__module__": base.__module__,
            "__doc__": f"A ``{base.__name__}`` built on torchdata's ``StatefulDataLoader``: its "
            "``state_dict`` holds the workers' state, so a resumed epoch continues exactly.",
            "_stateful_base": loader_base,
        },
    )
