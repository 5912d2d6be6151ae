import dataclasses
import importlib.util

import pytest

from accel_precision import (
    AORecipeKwargs,
    FP8BackendType,
    FP8RecipeKwargs,
    MSAMPRecipeKwargs,
    TERecipeKwargs,
    resolve_fp8_recipe,
    te_recipe_kwargs,
)

HAS_TORCHAO = importlib.util.find_spec("torchao") is not None
HAS_TE = importlib.util.find_spec("transformer_engine") is not None
HAS_MSAMP = importlib.util.find_spec("msamp") is not None


def test_fp8_recipe_kwargs_defaults_are_none_and_filled_after_construction():
    defaults = {f.name: f.default for f in dataclasses.fields(FP8RecipeKwargs)}
    assert set(defaults.values()) == {None}
    recipe = FP8RecipeKwargs(backend="TE")
    filled = {name: getattr(recipe, name) for name in defaults}
    assert filled == {
        "backend": "TE",
        "opt_level": "O2",
        "use_autocast_during_eval": False,
        "margin": 0,
        "interval": 1,
        "fp8_format": "HYBRID",
        "amax_history_len": 1024,
        "amax_compute_algo": "most_recent",
        "override_linear_precision": (False, False, False),
        "use_mxfp8_block_scaling": False,
    }
    assert FP8RecipeKwargs().backend == ("MSAMP" if HAS_MSAMP else "TE")


def test_engine_recipes_fill_their_none_fields():
    te = TERecipeKwargs()
    assert (te.fp8_format, te.amax_history_len, te.use_mxfp8_block_scaling) == (
        "HYBRID",
        1024,
        False,
    )
    assert TERecipeKwargs(use_mxfp8_block_scaling=True).use_mxfp8_block_scaling is True
    assert MSAMPRecipeKwargs().opt_level == "O2"
    ao = AORecipeKwargs()
    assert (ao.pad_inner_dim, ao.enable_fsdp_float8_all_gather) == (True, False)
    converted = FP8RecipeKwargs(backend="TE", use_mxfp8_block_scaling=True, margin=3)
    te_recipe = converted.to_backend_recipe()
    assert isinstance(te_recipe, TERecipeKwargs)
    assert (te_recipe.use_mxfp8_block_scaling, te_recipe.margin) == (True, 3)
    with pytest.raises(TypeError):
        AORecipeKwargs(None, None, None, None, "rowwise")  # the extras are keyword-only


@pytest.mark.parametrize(
    ("given", "expected"),
    [("msamp", "MSAMP"), ("te", "TE"), ("TE", "TE"), ("torchao", "AO"), ("ao", "AO")],
)
def test_backend_names_in_any_case(given, expected):
    assert FP8RecipeKwargs(backend=given).backend == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "cuda"}, "FP8 backend must be one of"),
        ({"backend": "TE", "fp8_format": "E5M3"}, "fp8_format must be one of"),
        ({"backend": "TE", "amax_compute_algo": "mean"}, "amax_compute_algo must be one of"),
        ({"backend": "TE", "override_linear_precision": (True,)}, "three booleans"),
        ({"backend": "MSAMP", "opt_level": "O3"}, "opt_level must be one of"),
        ({"backend": "TE", "amax_history_len": 0}, "at least 1"),
    ],
)
def test_invalid_recipes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FP8RecipeKwargs(**kwargs)


def test_fp8_recipe_kwargs_maps_to_the_engine_recipe():
    te = FP8RecipeKwargs(backend="te", margin=2, fp8_format="HYBRID", amax_history_len=16)
    recipe = te.to_backend_recipe()
    assert isinstance(recipe, TERecipeKwargs)
    assert (recipe.margin, recipe.fp8_format, recipe.amax_history_len) == (2, "HYBRID", 16)
    ms = FP8RecipeKwargs(backend="msamp", opt_level="O1").to_backend_recipe()
    assert ms == MSAMPRecipeKwargs(opt_level="O1")
    assert isinstance(FP8RecipeKwargs(backend="AO").to_backend_recipe(), AORecipeKwargs)


def test_te_recipe_arguments_follow_delayed_scaling():
    recipe = TERecipeKwargs(margin=1, interval=2, fp8_format="e4m3", amax_compute_algo="max")
    assert te_recipe_kwargs(recipe) == {
        "margin": 1,
        "interval": 2,
        "fp8_format": "E4M3",
        "amax_history_len": 1024,
        "amax_compute_algo": "max",
        "override_linear_precision": (False, False, False),
    }


def test_no_recipe_outside_fp8():
    assert resolve_fp8_recipe("bf16", []) is None
    assert resolve_fp8_recipe(None, []) is None


def test_recipe_without_fp8_is_an_error():
    with pytest.raises(ValueError, match="needs mixed_precision='fp8'; got mixed_precision='bf16'"):
        resolve_fp8_recipe("bf16", [AORecipeKwargs()])


def test_two_recipes_are_an_error():
    with pytest.raises(ValueError, match="one FP8 recipe"):
        resolve_fp8_recipe("fp8", [AORecipeKwargs(), TERecipeKwargs()])


@pytest.mark.skipif(not HAS_TORCHAO, reason="torchao is not installed")
def test_torchao_is_the_default_backend_when_installed():
    recipe = resolve_fp8_recipe("fp8", [])
    assert isinstance(recipe, AORecipeKwargs)
    config = recipe.build_config()
    assert config.pad_inner_dim is True
    assert config.enable_fsdp_float8_all_gather is False


@pytest.mark.skipif(not HAS_TORCHAO, reason="torchao is not installed")
def test_ao_recipe_name_builds_that_recipe():
    config = AORecipeKwargs(recipe_name="rowwise").build_config()
    assert config.round_scales_to_power_of_2 is True
    with pytest.raises(ValueError, match="either config or recipe_name"):
        AORecipeKwargs(config=config, recipe_name="rowwise")


@pytest.mark.skipif(
    HAS_TE, reason="Transformer Engine is installed: the missing-engine error cannot happen"
)
def test_te_recipe_without_transformer_engine_names_the_install():
    with pytest.raises(ImportError, match=r'pip install "transformer-engine\[pytorch\]"'):
        resolve_fp8_recipe("fp8", [FP8RecipeKwargs(backend="TE")])


@pytest.mark.skipif(HAS_MSAMP, reason="MS-AMP is installed: the missing-engine error cannot happen")
def test_msamp_recipe_without_msamp_says_how_to_install():
    with pytest.raises(ImportError, match="install MS-AMP from source"):
        resolve_fp8_recipe("fp8", [FP8RecipeKwargs(backend="MSAMP")])


def test_backend_enum_parses_and_prints():
    assert FP8BackendType.parse("torchao") is FP8BackendType.AO
    assert str(FP8BackendType.TE) == "TE"
