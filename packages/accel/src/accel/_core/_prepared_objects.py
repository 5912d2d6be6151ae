"""The registry of what an ``Accelerator`` prepared or registered for checkpointing.

One object holds the prepared models, optimizers, schedulers and dataloaders and the objects
of ``register_for_checkpointing``, each kind in registration order. The facade owns it; the
engines register what they prepare through it, and the checkpoint code reads it. Nothing else
keeps a list of prepared objects.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

Kind = Literal["model", "optimizer", "scheduler", "loader"]
"""The kinds of prepared objects (registered objects are kept apart)."""


class PreparedObjects:
    """Prepared objects by kind, each list in registration order.

    The lists are the registry's own: ``save_state`` saves them in this order and
    ``load_state`` restores into the same slots.
    """

    def __init__(self) -> None:
        self.models: list[torch.nn.Module] = []
        """Prepared models (the engine's wrappers, as ``prepare`` returned them)."""
        self.optimizers: list[Any] = []
        """Prepared optimizers (``AcceleratedOptimizer`` or an engine's wrapper)."""
        self.schedulers: list[Any] = []
        """Prepared learning-rate schedulers."""
        self.dataloaders: list[Any] = []
        """Prepared dataloaders."""
        self.custom_objects: list[Any] = []
        """Objects of ``register_for_checkpointing`` (they have ``state_dict`` and
        ``load_state_dict``)."""

    def of_kind(self, kind: Kind) -> list[Any]:
        """The list of prepared objects of ``kind``.

        Raises:
            ValueError: ``kind`` is not one of the four kinds.
        """
        lists = {
            "model": self.models,
            "optimizer": self.optimizers,
            "scheduler": self.schedulers,
            "loader": self.dataloaders,
        }
        if kind not in lists:
            raise ValueError(
                f"a prepared object is a 'model', 'optimizer', 'scheduler' or 'loader'; got "
                f"kind={kind!r}. Pass one of the four."
            )
        return lists[kind]

    def add_model(self, model: torch.nn.Module) -> None:
        """Register a prepared model."""
        self.models.append(model)

    def replace_model(self, old: torch.nn.Module, new: torch.nn.Module) -> None:
        """Put ``new`` (the wrapped model) in the slot of ``old``, keeping its position.

        Raises:
            ValueError: ``old`` is not registered.
        """
        self.replace("model", old, new)

    def replace(self, kind: Kind, old: Any, new: Any) -> None:
        """Put ``new`` in the slot of ``old`` among the objects of ``kind``, keeping its
        position (an engine's wrapper or adapter takes the place of what it wraps, so that
        checkpoints keep their file names).

        Raises:
            ValueError: ``old`` is not registered under ``kind``.
        """
        registered = self.of_kind(kind)
        for i, item in enumerate(registered):
            if item is old:
                registered[i] = new
                return
        raise ValueError(
            f"replace swaps a registered {kind} for its wrapper; got a {type(old).__name__} "
            f"that is not registered as a {kind}. Prepare it (or register it) first."
        )

    def add_optimizer(self, optimizer: Any) -> None:
        """Register a prepared optimizer."""
        self.optimizers.append(optimizer)

    def add_scheduler(self, scheduler: Any) -> None:
        """Register a prepared scheduler."""
        self.schedulers.append(scheduler)

    def add_dataloader(self, loader: Any) -> None:
        """Register a prepared dataloader."""
        self.dataloaders.append(loader)

    def add_custom_objects(self, *objects: Any) -> None:
        """Register objects for checkpointing, after the ones already registered."""
        self.custom_objects.extend(objects)

    def add_once(self, kind: Kind, obj: Any) -> None:
        """Register ``obj`` under ``kind`` unless that very object is there already (an object
        passed to ``prepare`` again keeps its one slot)."""
        registered = self.of_kind(kind)
        if not any(item is obj for item in registered):
            registered.append(obj)

    def clear(self) -> None:
        """Forget every prepared and registered object (``free_memory``)."""
        for objects in (
            self.models,
            self.optimizers,
            self.schedulers,
            self.dataloaders,
            self.custom_objects,
        ):
            objects.clear()

    def __repr__(self) -> str:
        return (
            f"PreparedObjects(models={len(self.models)}, optimizers={len(self.optimizers)}, "
            f"schedulers={len(self.schedulers)}, dataloaders={len(self.dataloaders)}, "
            f"custom_objects={len(self.custom_objects)})"
        )
