"""``DataLoaderStateMixin``: the end-of-data flags a loader shares with ``GradientState``.

Every loader of this package (``DataLoaderShard``, ``DataLoaderDispatcher``, ``SkipDataLoader``)
is one; a user's own DataLoader subclass can be one too: call ``begin()`` before yielding its
first batch, set ``end_of_dataloader`` before yielding its last one, and call ``end()`` after it.
"""

from __future__ import annotations

from typing import Any

from accel_state import GradientState


class DataLoaderStateMixin:
    """End-of-data state of a loader, registered with ``GradientState`` while it iterates.

    Attributes:
        end_of_dataloader: True while the loader yields its last batch of the pass.
        remainder: ``len(dataset) % total_batch_size`` for a loader that keeps its last
            incomplete step (set by ``begin()``; -1 when the loader drops it, when the dataset
            has no length, or before a pass). A dispatching loader sets it to the number of real
            samples of its last step when it reaches it.
        gradient_state: The process's ``GradientState`` (created on first use; a subclass may
            assign its own).
    """

    end_of_dataloader: bool = False
    remainder: int = -1

    @property
    def gradient_state(self) -> GradientState:
        """The ``GradientState`` this loader registers with while it iterates."""
        state = self.__dict__.get("_gradient_state")
        if state is None:
            state = GradientState()
            self.__dict__["_gradient_state"] = state
        return state

    @gradient_state.setter
    def gradient_state(self, value: GradientState) -> None:
        self.__dict__["_gradient_state"] = value

    def reset(self) -> None:
        """Clear ``end_of_dataloader`` and ``remainder``."""
        self.end_of_dataloader = False
        self.remainder = -1

    def begin(self) -> None:
        """Start a pass: reset the flags, compute ``remainder`` and become the active loader."""
        self.reset()
        self.remainder = self._dataset_remainder()
        self.gradient_state._add_dataloader(self)

    def end(self) -> None:
        """Finish a pass: stop being the active loader of ``GradientState``."""
        self.gradient_state._remove_dataloader(self)

    def _dataset_remainder(self) -> int:
        # Samples of the last, incomplete step over all processes; -1 when it is dropped or
        # cannot be known (no dataset length, no fixed batch size).
        if getattr(self, "_drop_last", True):
            return -1
        try:
            return self._remainder_length() % int(self.total_batch_size)  # type: ignore[attr-defined]
        except (AttributeError, TypeError, ValueError, ZeroDivisionError):
            return -1

    def _remainder_length(self) -> int:
        # Samples of one pass over all processes.
        dataset: Any = self.dataset  # type: ignore[attr-defined]
        length = getattr(dataset, "total_dataset_length", None)
        return int(len(dataset) if length is None else length)
