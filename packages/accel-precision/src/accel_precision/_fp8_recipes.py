"""FP8 recipes: which FP8 engine trains the model, and how it scales its FP8 tensors."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Union

import torch
from accel_state import KwargsHandler, PrecisionType

from ._imports import importable, require_msamp, require_torchao, require_transformer_engine

logger = logging.getLogger("accel_precision")

_FORMATS = ("E4M3", "HYBRID")
_AMAX_ALGOS = ("max", "most_recent")
_OPT_LEVELS = ("O1", "O2")


class FP8BackendType(str, enum.Enum):
    """The engine that runs FP8 matrix multiplications."""

    NO = "NO"
    """No FP8 engine."""
    AO = "AO"
    """torchao's ``Float8Linear`` (dynamic scaling; runs on CPU and GPU)."""
    TE = "TE"
    """NVIDIA Transformer Engine (delayed scaling; CUDA only)."""
    MSAMP = "MSAMP"
    """Microsoft MS-AMP (FP8 weights, gradients and optimizer states; CUDA only)."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Union[str, FP8BackendType]) -> FP8BackendType:
        """``"msamp"``, ``"te"``, ``"ao"``/``"torchao"`` ... in any case."""
        if isinstance(value, FP8BackendType):
            return value
        text = str(value).strip().upper()
        if text == "TORCHAO":
            text = "AO"
        try:
            return cls(text)
        except ValueError:
            raise ValueError(
                f"An FP8 backend must be one of 'AO' (torchao), 'TE' (Transformer Engine) or "
                f"'MSAMP'; got {value!r}. Pick one of those (case does not matter)."
            ) from None


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(
            f"{name} must be one of {list(choices)}; got {value!r}. Use one of those values."
        )


def _check_override(value: Any) -> tuple[bool, bool, bool]:
    items = tuple(value)
    if len(items) != 3 or not all(isinstance(v, bool) for v in items):
        raise ValueError(
            "override_linear_precision must be three booleans (fprop, dgrad, wgrad run in higher "
            f"precision); got {value!r}. Pass e.g. (False, False, True)."
        )
    return items  # type: ignore[return-value]


@dataclass
class AORecipeKwargs(KwargsHandler):
    """FP8 training with torchao: ``nn.Linear`` layers become ``Float8Linear``.

    By default every ``nn.Linear`` whose two dimensions are multiples of 16 is converted, except
    the first and the last linear layers of the model, which stay in high precision (converting
    them tends to hurt convergence).
    """

    config: Any = None
    """A ``torchao.float8.Float8LinearConfig``; when None one is built from the fields below."""
    module_filter_func: Callable[[torch.nn.Module, str], bool] | None = None
    """``(module, fully_qualified_name) -> bool``: whether to convert that linear layer. When
    set, it replaces the default choice (``skip_first_last`` and ``skip_modules`` are ignored)."""
    pad_inner_dim: bool | None = None
    """Pad inner dimensions to multiples of 16 for ``torch._scaled_mm`` (default: True)."""
    enable_fsdp_float8_all_gather: bool | None = None
    """Cast weights to FP8 before FSDP2 all-gathers (default: False; only useful with FSDP2)."""
    recipe_name: str | None = None
    """A torchao recipe (``"tensorwise"``, ``"rowwise"``, ``"rowwise_with_gw_hp"``) used to build
    the config instead of the default tensor-wise scaling."""
    skip_first_last: bool = True
    """Keep the first and last ``nn.Linear`` of the model in high precision."""
    skip_modules: list[str] | None = None
    """Names (or name prefixes) of further linear layers to keep in high precision."""

    def __post_init__(self) -> None:
        if self.config is not None and self.recipe_name is not None:
            raise ValueError(
                "AORecipeKwargs takes either config or recipe_name, not both; got "
                f"recipe_name={self.recipe_name!r} and a config. Drop one of them."
            )
        if self.skip_modules is not None and not isinstance(self.skip_modules, list):
            raise ValueError(
                f"skip_modules must be a list of module names; got {self.skip_modules!r}. "
                "Pass e.g. ['lm_head']."
            )

    def build_config(self) -> Any:
        """The ``Float8LinearConfig`` to convert with (imports torchao)."""
        if self.config is not None:
            return self.config
        float8 = require_torchao()
        if self.recipe_name is not None:
            config = float8.Float8LinearConfig.from_recipe_name(self.recipe_name)
        else:
            config = float8.Float8LinearConfig()
        import dataclasses

        changes = {}
        pad = True if self.pad_inner_dim is None else self.pad_inner_dim
        if config.pad_inner_dim != pad:
            changes["pad_inner_dim"] = pad
        gather = bool(self.enable_fsdp_float8_all_gather)
        if config.enable_fsdp_float8_all_gather != gather:
            changes["enable_fsdp_float8_all_gather"] = gather
        return dataclasses.replace(config, **changes) if changes else config


@dataclass
class TERecipeKwargs(KwargsHandler):
    """FP8 training with NVIDIA Transformer Engine and its ``DelayedScaling`` recipe."""

    use_autocast_during_eval: bool = False
    """Run FP8 in evaluation mode too (by default evaluation runs in high precision)."""
    margin: int = 0
    """Margin of the scaling factor: ``scale = 2 ** -margin * fp8_max / amax``."""
    interval: int = 1
    """Steps between recomputations of the scaling factor (ignored by releases that dropped it)."""
    fp8_format: Literal["E4M3", "HYBRID"] = "HYBRID"
    """``"E4M3"`` everywhere, or ``"HYBRID"`` (E4M3 forward, E5M2 gradients)."""
    amax_history_len: int = 1024
    """Number of past amax values kept to compute the scale."""
    amax_compute_algo: Literal["max", "most_recent"] = "most_recent"
    """How the amax history becomes one amax: its maximum or its latest value."""
    override_linear_precision: tuple[bool, bool, bool] = (False, False, False)
    """Run the fprop, dgrad and wgrad GEMMs in higher precision."""

    def __post_init__(self) -> None:
        self.fp8_format = self.fp8_format.upper()  # type: ignore[assignment]
        _check_choice("fp8_format", self.fp8_format, _FORMATS)
        _check_choice("amax_compute_algo", self.amax_compute_algo, _AMAX_ALGOS)
        self.override_linear_precision = _check_override(self.override_linear_precision)
        if self.amax_history_len < 1 or self.interval < 1:
            raise ValueError(
                "amax_history_len and interval must be at least 1; got amax_history_len="
                f"{self.amax_history_len}, interval={self.interval}. Use positive values."
            )


@dataclass
class MSAMPRecipeKwargs(KwargsHandler):
    """FP8 training with MS-AMP (``msamp.initialize(model, optimizer, opt_level)``)."""

    opt_level: Literal["O1", "O2"] = "O2"
    """``"O1"``: FP8 weight gradients and all-reduce; ``"O2"``: also 8-bit first-order and
    16-bit second-order optimizer states (Adam / AdamW only)."""

    def __post_init__(self) -> None:
        _check_choice("opt_level", self.opt_level, _OPT_LEVELS)


@dataclass
class FP8RecipeKwargs(KwargsHandler):
    """The FP8 recipe of ``mixed_precision="fp8"``, for Transformer Engine or MS-AMP.

    It holds the settings of both engines; :meth:`to_backend_recipe` keeps those of ``backend``.
    For torchao, pass :class:`AORecipeKwargs` (or ``backend="AO"`` for its defaults).
    """

    backend: Literal["MSAMP", "TE", "AO"] = "MSAMP"
    """``"MSAMP"`` or ``"TE"`` (any case); ``"AO"`` selects torchao with its defaults."""
    opt_level: Literal["O1", "O2"] = "O2"
    """MS-AMP optimisation level (see :class:`MSAMPRecipeKwargs`)."""
    margin: int = 0
    """Transformer Engine: margin of the scaling factor."""
    interval: int = 1
    """Transformer Engine: steps between recomputations of the scaling factor."""
    fp8_format: Literal["E4M3", "HYBRID"] = "E4M3"
    """Transformer Engine: ``"E4M3"`` or ``"HYBRID"``."""
    amax_history_len: int = 1
    """Transformer Engine: length of the amax history."""
    amax_compute_algo: Literal["max", "most_recent"] = "most_recent"
    """Transformer Engine: ``"max"`` or ``"most_recent"``."""
    override_linear_precision: tuple[bool, bool, bool] = (False, False, False)
    """Transformer Engine: run fprop, dgrad, wgrad GEMMs in higher precision."""

    def __post_init__(self) -> None:
        self.backend = FP8BackendType.parse(self.backend).value  # type: ignore[assignment]
        if self.backend == "NO":
            raise ValueError(
                "FP8RecipeKwargs.backend must name an FP8 engine; got 'NO'. Use 'TE', 'MSAMP' "
                "or 'AO', or drop the handler to train without FP8."
            )
        self.to_backend_recipe()  # validates the fields of the chosen engine

    def to_backend_recipe(self) -> AORecipeKwargs | TERecipeKwargs | MSAMPRecipeKwargs:
        """The recipe of the chosen engine, with this object's settings."""
        if self.backend == "MSAMP":
            return MSAMPRecipeKwargs(opt_level=self.opt_level)
        if self.backend == "TE":
            return TERecipeKwargs(
                margin=self.margin,
                interval=self.interval,
                fp8_format=self.fp8_format,
                amax_history_len=self.amax_history_len,
                amax_compute_algo=self.amax_compute_algo,
                override_linear_precision=self.override_linear_precision,
            )
        return AORecipeKwargs()


FP8Recipe = Union[AORecipeKwargs, TERecipeKwargs, MSAMPRecipeKwargs]
_RECIPES = (AORecipeKwargs, TERecipeKwargs, MSAMPRecipeKwargs, FP8RecipeKwargs)


def recipe_backend(recipe: FP8Recipe) -> FP8BackendType:
    """The engine a recipe selects."""
    if isinstance(recipe, AORecipeKwargs):
        return FP8BackendType.AO
    if isinstance(recipe, TERecipeKwargs):
        return FP8BackendType.TE
    return FP8BackendType.MSAMP


def _check_backend_usable(backend: FP8BackendType) -> None:
    if backend is FP8BackendType.AO:
        require_torchao()
    elif backend is FP8BackendType.TE:
        require_transformer_engine()
    elif backend is FP8BackendType.MSAMP:
        require_msamp()


def default_fp8_backend() -> FP8BackendType:
    """The installed FP8 engine, tried in this order: torchao, Transformer Engine, MS-AMP.

    Raises:
        ImportError: None of them is importable; the message says how to install torchao.
    """
    for module, backend in (
        ("torchao.float8", FP8BackendType.AO),
        ("transformer_engine.pytorch", FP8BackendType.TE),
        ("msamp", FP8BackendType.MSAMP),
    ):
        if importable(module):
            return backend
    require_torchao('mixed_precision="fp8" (no FP8 engine is installed)')
    raise AssertionError("unreachable")


def resolve_fp8_recipe(
    mixed_precision: Union[str, PrecisionType, None], handlers: Iterable[Any]
) -> FP8Recipe | None:
    """The FP8 recipe a run uses, given its precision and its kwargs handlers.

    With ``mixed_precision="fp8"``: the one recipe handler passed (``AORecipeKwargs``,
    ``TERecipeKwargs``, ``MSAMPRecipeKwargs`` or ``FP8RecipeKwargs``), else the defaults of the
    installed engine (torchao first). Its engine must be importable.

    Args:
        mixed_precision: The run's precision.
        handlers: The kwargs handlers given to the Accelerator.

    Returns:
        The recipe, or None when the run is not in FP8.

    Raises:
        ValueError: Several recipes, or a recipe without ``mixed_precision="fp8"``.
        ImportError: The engine of the recipe is not installed (the message has the command).
    """
    precision = PrecisionType.parse(mixed_precision or "no", "mixed_precision")
    recipes = [h for h in handlers if isinstance(h, _RECIPES)]
    if len(recipes) > 1:
        names = [type(r).__name__ for r in recipes]
        raise ValueError(
            f"kwargs_handlers may hold one FP8 recipe; got {names}. Keep the one of the engine "
            "you want."
        )
    if precision is not PrecisionType.FP8:
        if recipes:
            raise ValueError(
                f"An FP8 recipe ({type(recipes[0]).__name__}) needs mixed_precision='fp8'; got "
                f"mixed_precision={precision.value!r}. Set mixed_precision='fp8' or drop the recipe."
            )
        return None
    if recipes:
        recipe = recipes[0]
        if isinstance(recipe, FP8RecipeKwargs):
            recipe = recipe.to_backend_recipe()
    else:
        backend = default_fp8_backend()
        recipe = {
            FP8BackendType.AO: AORecipeKwargs,
            FP8BackendType.TE: TERecipeKwargs,
            FP8BackendType.MSAMP: MSAMPRecipeKwargs,
        }[backend]()
        logger.info("mixed_precision='fp8': using the %s backend", backend.value)
    _check_backend_usable(recipe_backend(recipe))
    return recipe
