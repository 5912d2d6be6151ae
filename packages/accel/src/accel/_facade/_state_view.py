"""The few state views of an ``Accelerator`` that compute more than a field read: the
parallel ranks, the FP8 recipe and handlers, the device kind and LOMO optimizers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accel_state import DistributedType

if TYPE_CHECKING:
    from ._accelerator import Accelerator

_FP8_RECIPES = ("AORecipeKwargs", "TERecipeKwargs", "MSAMPRecipeKwargs", "FP8RecipeKwargs")
_MULTI_DEVICE = tuple(
    t for t in DistributedType if t.value.startswith("MULTI_") and t.value != "MULTI_CPU"
)


def fp8_backend_of(recipe: Any) -> str:
    """FP8 engine of a recipe: ``"AO"`` (torchao), ``"TE"``, ``"MSAMP"``, or ``"NO"`` for None."""
    if recipe is None:
        return "NO"
    from accel_precision import recipe_backend

    return str(recipe_backend(recipe).value)


def recipe_of(acc: Accelerator, kind: str) -> Any:
    """The FP8 recipe the run uses when it is of class ``kind``, else None."""
    recipe = acc.fp8_recipe_handler
    return recipe if type(recipe).__name__ == kind else None


def has_fp8_handler(acc: Accelerator) -> bool:
    """Whether an FP8 recipe was passed in ``kwargs_handlers``."""
    return any(type(h).__name__ in _FP8_RECIPES for h in acc._handlers.values())


def is_multi_device(acc: Accelerator) -> bool:
    """Whether several accelerator devices train together (never on CPU)."""
    return acc.use_distributed and acc.distributed_type in _MULTI_DEVICE


def has_lomo_optimizer(acc: Accelerator) -> bool:
    """Whether a LOMO optimizer (``lomo_optim.Lomo`` / ``AdaLomo``) was prepared."""
    inner = (getattr(opt, "optimizer", opt) for opt in acc._prepared.optimizers)
    return any(type(opt).__name__ in ("Lomo", "AdaLomo") for opt in inner)


def mesh_rank(acc: Accelerator, dim: str, what: str) -> int:
    """This process's coordinate along ``dim`` of the parallelism mesh (``what`` names the
    property asked, for the error without a ``ParallelismConfig``)."""
    config = acc.parallelism_config
    if config is None:
        raise RuntimeError(
            f"{what} needs a ParallelismConfig; got parallelism_config=None. Pass "
            "Accelerator(parallelism_config=ParallelismConfig(...))."
        )
    config.validate(acc.num_processes)
    return config.local_rank(dim, acc.process_index)
