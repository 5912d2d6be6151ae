"""FP8 recipes: which FP8 engine trains the model, and how it scales its FP8 tensors."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import torch
from accel_state import KwargsHandler, PrecisionType

from ._optional_backends import (
    importable,
    require_msamp,
    require_torchao,
    require_transformer_engine,
)

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
    return items


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
    """Pad inner dimensions to multiples of 16 for ``torch._scaled_mm`` (True when None)."""
    enable_fsdp_float8_all_gather: bool | None = None
    """Cast weights to FP8 before FSDP2 all-gathers (False when None; only useful with FSDP2)."""
    recipe_name: str | None = field(default=None, kw_only=True)
    """A torchao recipe (``"tensorwise"``, ``"rowwise"``, ``"rowwise_with_gw_hp"``) used to build
    the config instead of the default tensor-wise scaling."""
    skip_first_last: bool = field(default=True, kw_only=True)
    """Keep the first and last ``nn.Linear`` of the model in high precision."""
    skip_modules: list[str] | None = field(default=None, kw_only=True)
    """Names (or name prefixes) of further linear layers to keep in high precision."""

    def __post_init__(self) -> None:
        if self.config is None:
            if self.pad_inner_dim is None:
                self.pad_inner_dim = True
            if self.enable_fsdp_float8_all_gather is None:
                self.enable_fsdp_float8_all_gather = False
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


_TE_DEFAULTS: dict[str, Any] = {
    "use_autocast_during_eval": False,
    "margin": 0,
    "interval": 1,
    "fp8_format": "HYBRID",
    "amax_history_len": 1024,
    "amax_compute_algo": "most_recent",
    "override_linear_precision": (False, False, False),
    "use_mxfp8_block_scaling": False,
}


@dataclass
class TERecipeKwargs(KwargsHandler):
    """FP8 training with NVIDIA Transformer Engine: its ``DelayedScaling`` recipe, or
    ``MXFP8BlockScaling`` with ``use_mxfp8_block_scaling``.

    Fields left at None take Transformer Engine's usual values (shown below) after construction.
    """

    use_autocast_during_eval: bool | None = None
    """Run FP8 in evaluation mode too (default False: evaluation runs in high precision)."""
    margin: int | None = None
    """Margin of the scaling factor: ``scale = 2 ** -margin * fp8_max / amax`` (default 0)."""
    interval: int | None = None
    """Steps between recomputations of the scaling factor (default 1; ignored by releases that
    dropped it)."""
    fp8_format: Literal["E4M3", "HYBRID"] | None = None
    """``"E4M3"`` everywhere, or ``"HYBRID"`` (E4M3 forward, E5M2 gradients; the default)."""
    amax_history_len: int | None = None
    """Number of past amax values kept to compute the scale (default 1024)."""
    amax_compute_algo: Literal["max", "most_recent"] | None = None
    """How the amax history becomes one amax: its maximum or its latest value (the default)."""
    override_linear_precision: tuple[bool, bool, bool] | None = None
    """Run the fprop, dgrad and wgrad GEMMs in higher precision (default all False)."""
    use_mxfp8_block_scaling: bool | None = None
    """Use Transformer Engine's ``MXFP8BlockScaling`` recipe (Blackwell GPUs) instead of
    ``DelayedScaling`` (default False)."""

    def __post_init__(self) -> None:
        for name, default in _TE_DEFAULTS.items():
            if getattr(self, name) is None:
                setattr(self, name, default)
        self.fp8_format = str(self.fp8_format).upper()  # type: ignore[assignment]
        self.amax_compute_algo = str(self.amax_compute_algo).lower()  # type: ignore[assignment]
        _check_choice("fp8_format", str(self.fp8_format), _FORMATS)
        _check_choice("amax_compute_algo", str(self.amax_compute_algo), _AMAX_ALGOS)
        self.override_linear_precision = _check_override(self.override_linear_precision)
        if self.amax_history_len < 1 or self.interval < 1:  # type: ignore[operator]
            raise ValueError(
                "amax_history_len and interval must be at least 1; got amax_history_len="
                f"{self.amax_history_len}, interval={self.interval}. Use positive values."
            )


@dataclass
class MSAMPRecipeKwargs(KwargsHandler):
    """FP8 training with MS-AMP (``msamp.initialize(model, optimizer, opt_level)``)."""

    opt_level: Literal["O1", "O2"] | None = None
    """``"O1"``: FP8 weight gradients and all-reduce; ``"O2"`` (the default when None): also
    8-bit first-order and 16-bit second-order optimizer states (Adam / AdamW only)."""

    def __post_init__(self) -> None:
        if self.opt_level is None:
            self.opt_level = "O2"
        _check_choice("opt_level", self.opt_level, _OPT_LEVELS)


@dataclass
class FP8RecipeKwargs(KwargsHandler):
    """The FP8 recipe of ``mixed_precision="fp8"``, for Transformer Engine or MS-AMP.

    It holds the settings of both engines; [`to_backend_recipe`][accel_precision.FP8RecipeKwargs.to_backend_recipe] keeps those of ``backend``.
    Fields left at None take the defaults of [`TERecipeKwargs`][accel_precision.TERecipeKwargs] and
    [`MSAMPRecipeKwargs`][accel_precision.MSAMPRecipeKwargs]. For torchao, pass [`AORecipeKwargs`][accel_precision.AORecipeKwargs] (or ``backend="AO"``
    for its defaults).
    """

    opt_level: Literal["O1", "O2"] | None = None
    """MS-AMP optimisation level (see [`MSAMPRecipeKwargs`][accel_precision.MSAMPRecipeKwargs]; default ``"O2"``)."""
    use_autocast_during_eval: bool | None = None
    """Transformer Engine: run FP8 in evaluation mode too (default False)."""
    margin: int | None = None
    """Transformer Engine: margin of the scaling factor (default 0)."""
    interval: int | None = None
    """Transformer Engine: steps between recomputations of the scaling factor (default 1)."""
    fp8_format: Literal["E4M3", "HYBRID"] | None = None
    """Transformer Engine: ``"E4M3"`` or ``"HYBRID"`` (the default)."""
    amax_history_len: int | None = None
    """Transformer Engine: length of the amax history (default 1024)."""
    amax_compute_algo: Literal["max", "most_recent"] | None = None
    """Transformer Engine: ``"max"`` or ``"most_recent"`` (the default)."""
    override_linear_precision: tuple[bool, bool, bool] | None = None
    """Transformer Engine: run fprop, dgrad, wgrad GEMMs in higher precision."""
    use_mxfp8_block_scaling: bool | None = None
    """Transformer Engine: use the ``MXFP8BlockScaling`` recipe (default False)."""
    backend: Literal["MSAMP", "TE", "AO"] | None = None
    """``"MSAMP"`` or ``"TE"`` (any case); ``"AO"`` selects torchao with its defaults. Default:
    MS-AMP when it is installed, else Transformer Engine."""

    def __post_init__(self) -> None:
        if self.backend is None:
            self.backend = "MSAMP" if importable("msamp") else "TE"
        self.backend = FP8BackendType.parse(self.backend).value  # type: ignore[assignment]
        if self.backend == "NO":
            raise ValueError(
                "FP8RecipeKwargs.backend must name an FP8 engine; got 'NO'. Use 'TE', 'MSAMP' "
                "or 'AO', or drop the handler to train without FP8."
            )
        # The engine recipes validate the fields and fill the ones left at None.
        te = TERecipeKwargs(**{name: getattr(self, name) for name in _TE_DEFAULTS})
        for name in _TE_DEFAULTS:
            setattr(self, name, getattr(te, name))
        self.opt_level = MSAMPRecipeKwargs(opt_level=self.opt_level).opt_level

    def to_backend_recipe(self) -> AORecipeKwargs | TERecipeKwargs | MSAMPRecipeKwargs:
        """The recipe of the chosen engine, with this object's settings."""
        if self.backend == "MSAMP":
            return MSAMPRecipeKwargs(opt_level=self.opt_level)
        if self.backend == "TE":
            return TERecipeKwargs(**{name: getattr(self, name) for name in _TE_DEFAULTS})
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
