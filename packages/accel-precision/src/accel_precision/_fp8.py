"""``mixed_precision="fp8"``: convert a model for its engine, and the forward context it needs."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from ._fp8_ao import ao_module_filter, convert_model_to_fp8_ao
from ._fp8_recipes import AORecipeKwargs, FP8Recipe, MSAMPRecipeKwargs, TERecipeKwargs
from ._optional_backends import require_msamp


def convert_model_to_fp8(
    model: torch.nn.Module, recipe: FP8Recipe
) -> dict[torch.nn.Parameter, torch.nn.Parameter]:
    """Convert ``model`` in place for the recipe's FP8 engine.

    torchao swaps the chosen ``nn.Linear`` layers for ``Float8Linear``; Transformer Engine swaps
    linear and layer-norm layers for its own. MS-AMP converts model and optimizer together
    ([`prepare_msamp`][accel_precision.prepare_msamp]), so here it changes nothing.

    Args:
        model: The model (unwrapped, on its training device).
        recipe: An ``AORecipeKwargs``, ``TERecipeKwargs`` or ``MSAMPRecipeKwargs``.

    Returns:
        Old parameter -> new parameter for every parameter the conversion replaced (empty when
        the layers kept their parameters); pass it to [`switch_optimizer_parameters`][accel_precision.switch_optimizer_parameters].
    """
    before = dict(model.named_parameters())
    if isinstance(recipe, AORecipeKwargs):
        module_filter = recipe.module_filter_func or ao_module_filter(
            model, recipe.skip_first_last, recipe.skip_modules
        )
        convert_model_to_fp8_ao(model, recipe.build_config(), module_filter)
    elif isinstance(recipe, TERecipeKwargs):
        from ._fp8_te import convert_model_to_te

        convert_model_to_te(model)
    elif not isinstance(recipe, MSAMPRecipeKwargs):
        raise TypeError(
            "convert_model_to_fp8 takes AORecipeKwargs, TERecipeKwargs or MSAMPRecipeKwargs; got "
            f"{type(recipe).__name__}. Convert an FP8RecipeKwargs with .to_backend_recipe()."
        )
    after = dict(model.named_parameters())
    return {old: after[name] for name, old in before.items() if after.get(name) is not old}


def switch_optimizer_parameters(
    optimizer: torch.optim.Optimizer, mapping: dict[torch.nn.Parameter, torch.nn.Parameter]
) -> None:
    """Point ``optimizer``'s parameter groups (and any state) at replaced parameters.

    Args:
        optimizer: An optimizer built on the model before its conversion.
        mapping: Old parameter -> new parameter, as returned by [`convert_model_to_fp8`][accel_precision.convert_model_to_fp8].
    """
    if not mapping:
        return
    for group in optimizer.param_groups:
        group["params"] = [mapping.get(p, p) for p in group["params"]]
    for old, new in mapping.items():
        if old in optimizer.state:
            optimizer.state[new] = optimizer.state.pop(old)


def fp8_forward_context(
    recipe: FP8Recipe | None, training: bool = True
) -> contextlib.AbstractContextManager[Any]:
    """What a forward pass runs inside besides bf16 autocast: ``te.fp8_autocast`` for
    Transformer Engine, nothing for torchao (its layers cast themselves) or MS-AMP."""
    if isinstance(recipe, TERecipeKwargs):
        from ._fp8_te import te_autocast

        return te_autocast(recipe, training)
    return contextlib.nullcontext()


def prepare_msamp(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, recipe: MSAMPRecipeKwargs
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """``msamp.initialize(model, optimizer, opt_level=...)``: FP8 weights and gradients, and
    (``O2``) low-precision optimizer states.

    Args:
        model: The model.
        optimizer: Its optimizer (Adam or AdamW for ``O2``).
        recipe: The MS-AMP recipe.

    Returns:
        The model and optimizer that MS-AMP returns (use them instead of the originals).
    """
    msamp = require_msamp()
    return msamp.initialize(model, optimizer, opt_level=recipe.opt_level)


def prepare_msamp_objects(objects: list[Any], recipe: MSAMPRecipeKwargs) -> list[Any]:
    """Apply [`prepare_msamp`][accel_precision.prepare_msamp] to the one model and one optimizer among ``objects``.

    Args:
        objects: What was passed to ``prepare`` (dataloaders and schedulers pass through).
        recipe: The MS-AMP recipe.

    Returns:
        ``objects`` with the model and optimizer replaced by MS-AMP's.

    Raises:
        ValueError: A model without an optimizer (or the reverse), or several of either.
    """
    models = [i for i, obj in enumerate(objects) if isinstance(obj, torch.nn.Module)]
    optimizers = [i for i, obj in enumerate(objects) if isinstance(obj, torch.optim.Optimizer)]
    if not models and not optimizers:
        return list(objects)
    if len(models) != 1 or len(optimizers) != 1:
        raise ValueError(
            "MS-AMP converts one model and its optimizer together, so prepare must get exactly "
            f"one of each; got {len(models)} model(s) and {len(optimizers)} optimizer(s). Pass "
            "them in one call: accelerator.prepare(model, optimizer, ...)."
        )
    result = list(objects)
    model, optimizer = prepare_msamp(result[models[0]], result[optimizers[0]], recipe)
    result[models[0]], result[optimizers[0]] = model, optimizer
    return result
