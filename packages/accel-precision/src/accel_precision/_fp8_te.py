"""FP8 training with NVIDIA Transformer Engine: module conversion and ``te.fp8_autocast``.

Transformer Engine builds only against CUDA; everything here imports it on demand.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import torch

from ._fp8_recipes import TERecipeKwargs
from ._optional_backends import require_transformer_engine


def te_recipe_kwargs(recipe: TERecipeKwargs) -> dict[str, Any]:
    """Arguments of ``transformer_engine.common.recipe.DelayedScaling`` for ``recipe``.

    ``fp8_format`` stays a name here (``"E4M3"`` / ``"HYBRID"``); [`make_te_recipe`][accel_precision.make_te_recipe] turns it
    into ``Format.E4M3`` / ``Format.HYBRID``.
    """
    return {
        "margin": recipe.margin,
        "interval": recipe.interval,
        "fp8_format": recipe.fp8_format,
        "amax_history_len": recipe.amax_history_len,
        "amax_compute_algo": recipe.amax_compute_algo,
        "override_linear_precision": tuple(
            recipe.override_linear_precision or (False, False, False)
        ),
    }


def make_te_recipe(recipe: TERecipeKwargs) -> Any:
    """A ``DelayedScaling`` recipe built from ``recipe`` (``MXFP8BlockScaling`` with
    ``use_mxfp8_block_scaling``, which takes only the format).

    Arguments that the installed release no longer accepts (``interval`` was dropped in recent
    releases) are left out.
    """
    require_transformer_engine()
    from transformer_engine.common import recipe as te_recipe

    kwargs = te_recipe_kwargs(recipe)
    kwargs["fp8_format"] = getattr(te_recipe.Format, kwargs["fp8_format"])
    if recipe.use_mxfp8_block_scaling:
        from accel_state import is_transformer_engine_mxfp8_available

        if not is_transformer_engine_mxfp8_available():
            raise ValueError(
                "TERecipeKwargs.use_mxfp8_block_scaling=True needs a GPU and Transformer Engine "
                "release with MXFP8 support (Blackwell and later); this one has none. Set "
                "use_mxfp8_block_scaling=False to use DelayedScaling."
            )
        return te_recipe.MXFP8BlockScaling(fp8_format=kwargs["fp8_format"])
    accepted = inspect.signature(te_recipe.DelayedScaling).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    return te_recipe.DelayedScaling(**kwargs)


def has_transformer_engine_layers(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds Transformer Engine layers (``LayerNorm``, ``Linear`` or
    ``TransformerLayer`` of ``transformer_engine.pytorch``), as a model prepared for FP8 with
    the Transformer Engine backend does.

    Raises:
        ImportError: when Transformer Engine is not installed, naming the install command.
    """
    te = require_transformer_engine("has_transformer_engine_layers")
    layer_types = (te.LayerNorm, te.Linear, te.TransformerLayer)
    return any(isinstance(m, layer_types) for m in model.modules())


def convert_model_to_te(
    model: torch.nn.Module, convert_linear: bool = True, convert_layernorm: bool = True
) -> torch.nn.Module:
    """Replace ``nn.Linear`` and ``nn.LayerNorm`` layers by Transformer Engine ones in place.

    Weights are copied into the new layers, which therefore own new parameters (an optimizer
    built before must be pointed at them: see [`switch_optimizer_parameters`][accel_precision.switch_optimizer_parameters]). Linear
    layers with a dimension that is not a multiple of 16 stay as they are (FP8 GEMMs need it).

    Args:
        model: The model.
        convert_linear: Convert linear layers.
        convert_layernorm: Convert layer norms with a 1-D normalised shape.

    Returns:
        ``model``.
    """
    te = require_transformer_engine()
    with torch.no_grad():
        _convert(model, te, convert_linear, convert_layernorm)
    return model


def _convert(module: torch.nn.Module, te: Any, linear: bool, layernorm: bool) -> None:
    for name, child in module.named_children():
        if linear and type(child) is torch.nn.Linear:
            if child.in_features % 16 or child.out_features % 16:
                continue
            new = te.Linear(
                child.in_features,
                child.out_features,
                bias=child.bias is not None,
                params_dtype=child.weight.dtype,
                device=child.weight.device,
            )
            new.weight.copy_(child.weight)
            if child.bias is not None:
                new.bias.copy_(child.bias)
            setattr(module, name, new)
        elif (
            layernorm
            and type(child) is torch.nn.LayerNorm
            and len(child.normalized_shape) == 1
            and child.elementwise_affine
        ):
            new = te.LayerNorm(
                child.normalized_shape[0],
                eps=child.eps,
                params_dtype=child.weight.dtype,
                device=child.weight.device,
            )
            new.weight.copy_(child.weight)
            if child.bias is not None:
                new.bias.copy_(child.bias)
            setattr(module, name, new)
        else:
            _convert(child, te, linear, layernorm)


def te_autocast(
    recipe: TERecipeKwargs, training: bool = True
) -> contextlib.AbstractContextManager[Any]:
    """``te.fp8_autocast`` with the recipe; FP8 is off in evaluation mode unless the recipe's
    ``use_autocast_during_eval`` is set."""
    te = require_transformer_engine()
    enabled = training or recipe.use_autocast_during_eval
    return te.fp8_autocast(enabled=enabled, fp8_recipe=make_te_recipe(recipe))
