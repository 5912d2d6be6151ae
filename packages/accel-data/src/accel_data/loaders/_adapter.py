"""``DataLoaderAdapter``: a DataLoader (or torchdata ``StatefulDataLoader``) that passes
itself off as the loader it wraps, and ``get_sampler``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import BatchSampler, DataLoader, Sampler

from ._stateful import stateful_loader_base


class DataLoaderAdapter:
    """Build a ``DataLoader`` (or, with ``use_stateful_dataloader``, torchdata's
    ``StatefulDataLoader``) and stand in for it.

    Attributes and methods the adapter does not define come from the wrapped loader
    (``base_dataloader``), and ``isinstance(adapter, DataLoader)`` holds. With a stateful loader,
    ``state_dict()`` describes the batches the adapter has yielded so far, and
    ``load_state_dict`` makes the next iteration continue from there.

    Args:
        dataset: The dataset to load from.
        use_stateful_dataloader: Build a ``StatefulDataLoader`` (needs
            ``pip install "accel-data[stateful]"``).
        batch_sampler: Passed to the loader.
        **kwargs: Every other argument of ``DataLoader`` / ``StatefulDataLoader``.
    """

    def __init__(
        self,
        dataset: Any,
        use_stateful_dataloader: bool = False,
        batch_sampler: Any = None,
        **kwargs: Any,
    ) -> None:
        self.use_stateful_dataloader = use_stateful_dataloader
        loader_class = stateful_loader_base() if use_stateful_dataloader else DataLoader
        self.base_dataloader = loader_class(dataset, batch_sampler=batch_sampler, **kwargs)
        self.dl_state_dict: dict[str, Any] | None = (
            self.base_dataloader.state_dict() if use_stateful_dataloader else None
        )

    def __getattr__(self, name: str) -> Any:
        if name == "base_dataloader":  # not built yet: no recursion
            raise AttributeError(name)
        return getattr(self.base_dataloader, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        """The wrapped loader's class, so code checking ``isinstance(x, DataLoader)`` accepts
        the adapter (``isinstance(x, DataLoaderAdapter)`` still holds)."""
        return type(self.base_dataloader)

    def __iter__(self) -> Iterator[Any]:
        for batch in self.base_dataloader:
            # The loader's state now counts this batch: snapshot it before handing it out, so
            # a state saved while the batch is in use resumes with the next one.
            self._update_state_dict()
            yield batch

    def __len__(self) -> int:
        return len(self.base_dataloader)

    def _update_state_dict(self) -> None:
        if self.use_stateful_dataloader:
            self.dl_state_dict = self.base_dataloader.state_dict()

    def state_dict(self) -> dict[str, Any]:
        """The wrapped ``StatefulDataLoader``'s state after the last batch yielded.

        Raises:
            TypeError: for a plain ``DataLoader``, which has no state to save.
        """
        if self.dl_state_dict is None:
            raise TypeError(
                "DataLoaderAdapter.state_dict needs a loader that saves its position; got a "
                "plain DataLoader (use_stateful_dataloader=False). Build the adapter with "
                "use_stateful_dataloader=True."
            )
        return self.dl_state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the next iteration where ``state_dict`` (from ``state_dict()``) stopped.

        Raises:
            TypeError: for a plain ``DataLoader``.
        """
        if not self.use_stateful_dataloader:
            raise TypeError(
                "DataLoaderAdapter.load_state_dict needs a loader that resumes; got a plain "
                "DataLoader (use_stateful_dataloader=False). Build the adapter with "
                "use_stateful_dataloader=True."
            )
        self.base_dataloader.load_state_dict(state_dict)
        self.dl_state_dict = state_dict


def get_sampler(dataloader: DataLoader) -> Sampler | None:
    """The sampler that orders ``dataloader``'s samples (the one inside its batch sampler), or
    None when there is none (an iterable dataset).

    Args:
        dataloader: A ``DataLoader`` (or a prepared loader).
    """
    if isinstance(dataloader.sampler, BatchSampler):
        # A batch sampler passed as ``sampler`` (with ``batch_size=None``).
        return getattr(dataloader.sampler, "sampler", None)
    return getattr(dataloader.batch_sampler, "sampler", None)
