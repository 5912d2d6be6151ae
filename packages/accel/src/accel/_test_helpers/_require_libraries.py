"""``require_*`` decorators on installed libraries: each skips a test, with a reason naming
the missing library and the command that installs it."""

from __future__ import annotations

from accel_state import (
    is_aim_available,
    is_bnb_available,
    is_clearml_available,
    is_comet_ml_available,
    is_datasets_available,
    is_deepspeed_available,
    is_dvclive_available,
    is_import_timer_available,
    is_matplotlib_available,
    is_mlflow_available,
    is_pandas_available,
    is_peft_available,
    is_schedulefree_available,
    is_swanlab_available,
    is_tensorboard_available,
    is_timm_available,
    is_torchao_available,
    is_torchdata_stateful_dataloader_available,
    is_torchvision_available,
    is_trackio_available,
    is_transformer_engine_available,
    is_transformer_engine_mxfp8_available,
    is_transformers_available,
    is_triton_available,
    is_wandb_available,
)

from ._markers import requirement


def _library(name: str, check: object, needs: str, package: str) -> object:
    """``requirement`` for one library: the reason names the pip command."""
    return requirement(name, check, needs, f"not installed here: pip install {package}")  # type: ignore[arg-type]


def _some_tracker() -> bool:
    """One of wandb, tensorboard, trackio, swanlab is installed, and comet_ml is not (comet_ml
    patches the other trackers' libraries on import)."""
    found = (is_wandb_available(), is_tensorboard_available(), is_trackio_available())
    return (any(found) or is_swanlab_available()) and not is_comet_ml_available()


require_peft = _library("require_peft", is_peft_available, "PEFT", "peft")
require_datasets = _library(
    "require_datasets", is_datasets_available, "the datasets library", "datasets"
)
require_transformers = _library(
    "require_transformers", is_transformers_available, "the transformers library", "transformers"
)
require_huggingface_suite = requirement(
    "require_huggingface_suite",
    lambda: is_transformers_available() and is_datasets_available(),
    "the Hugging Face suite (transformers and datasets)",
    "one or both are not installed here: pip install transformers datasets",
)
require_timm = _library("require_timm", is_timm_available, "the timm library", "timm")
require_torchvision = _library(
    "require_torchvision", is_torchvision_available, "the torchvision library", "torchvision"
)
require_triton = _library("require_triton", is_triton_available, "the triton library", "triton")
require_schedulefree = _library(
    "require_schedulefree", is_schedulefree_available, "the schedulefree library", "schedulefree"
)
require_bnb = _library("require_bnb", is_bnb_available, "the bitsandbytes library", "bitsandbytes")
require_deepspeed = _library(
    "require_deepspeed", is_deepspeed_available, "DeepSpeed", "'accel-torch[deepspeed]'"
)
require_tensorboard = _library(
    "require_tensorboard", is_tensorboard_available, "Tensorboard", "tensorboard"
)
require_wandb = _library("require_wandb", is_wandb_available, "wandb", "wandb")
require_trackio = _library("require_trackio", is_trackio_available, "trackio", "trackio")
require_comet_ml = _library("require_comet_ml", is_comet_ml_available, "comet_ml", "comet-ml")
require_aim = _library("require_aim", is_aim_available, "aim", "aim")
require_clearml = _library("require_clearml", is_clearml_available, "clearml", "clearml")
require_dvclive = _library("require_dvclive", is_dvclive_available, "dvclive", "dvclive")
require_swanlab = _library("require_swanlab", is_swanlab_available, "swanlab", "swanlab")
require_pandas = _library("require_pandas", is_pandas_available, "pandas", "pandas")
require_mlflow = _library("require_mlflow", is_mlflow_available, "mlflow", "mlflow")
require_matplotlib = _library(
    "require_matplotlib", is_matplotlib_available, "matplotlib", "matplotlib"
)
require_import_timer = _library(
    "require_import_timer", is_import_timer_available, "tuna interpreter", "tuna"
)
require_torchao = _library("require_torchao", is_torchao_available, "torchao", "torchao")
require_transformer_engine = _library(
    "require_transformer_engine",
    is_transformer_engine_available,
    "transformers engine",
    "'transformer-engine[pytorch]'",
)
require_transformer_engine_mxfp8 = requirement(
    "require_transformer_engine_mxfp8",
    is_transformer_engine_mxfp8_available,
    "transformers engine MXFP8 block scaling",
    "needs transformer-engine with MXFP8 recipes and a Blackwell-class GPU",
)
require_torchdata_stateful_dataloader = _library(
    "require_torchdata_stateful_dataloader",
    is_torchdata_stateful_dataloader_available,
    "torchdata.stateful_dataloader",
    "'torchdata>=0.8'",
)
require_trackers = requirement(
    "require_trackers",
    _some_tracker,
    "at least one tracker (wandb, tensorboard, trackio or swanlab) and no comet_ml",
    "pip install tensorboard, and uninstall comet-ml if it is installed",
)

__all__ = [
    "require_aim",
    "require_bnb",
    "require_clearml",
    "require_comet_ml",
    "require_datasets",
    "require_deepspeed",
    "require_dvclive",
    "require_huggingface_suite",
    "require_import_timer",
    "require_matplotlib",
    "require_mlflow",
    "require_pandas",
    "require_peft",
    "require_schedulefree",
    "require_swanlab",
    "require_tensorboard",
    "require_timm",
    "require_torchao",
    "require_torchdata_stateful_dataloader",
    "require_torchvision",
    "require_trackers",
    "require_trackio",
    "require_transformer_engine",
    "require_transformer_engine_mxfp8",
    "require_transformers",
    "require_triton",
    "require_wandb",
]
