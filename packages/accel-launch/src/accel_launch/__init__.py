"""The ``accel`` and ``accel-launch`` commands: config, launch, test, env, estimate-memory,
merge-weights."""

from importlib.metadata import version as _version

from ._config import (
    ConfigError,
    LaunchConfig,
    config_from_dict,
    default_config_file,
    load_config_file,
    write_basic_config,
)
from ._engines import DeepSpeedConfig, DynamoConfig, FSDPConfig, MegatronLMConfig
from ._merge import merge_fsdp_weights, merge_weights
from ._notebook import notebook_launcher
from ._resolve import LaunchPlan, child_environment, resolve
from ._sagemaker import (
    SAGEMAKER_PARALLEL_EC2_INSTANCES,
    SAGEMAKER_PYTHON_VERSION,
    SAGEMAKER_PYTORCH_VERSION,
    SAGEMAKER_TRANSFORMERS_VERSION,
    SageMakerConfig,
    build_estimator,
    prepare_sagemager_args_inputs,
)
from ._to_fsdp2 import convert_to_fsdp2

__version__ = _version("accel-launch")

__all__ = [
    "SAGEMAKER_PARALLEL_EC2_INSTANCES",
    "SAGEMAKER_PYTHON_VERSION",
    "SAGEMAKER_PYTORCH_VERSION",
    "SAGEMAKER_TRANSFORMERS_VERSION",
    "SageMakerConfig",
    "build_estimator",
    "prepare_sagemager_args_inputs",
    "ConfigError",
    "DeepSpeedConfig",
    "DynamoConfig",
    "FSDPConfig",
    "LaunchConfig",
    "MegatronLMConfig",
    "LaunchPlan",
    "__version__",
    "child_environment",
    "config_from_dict",
    "convert_to_fsdp2",
    "default_config_file",
    "load_config_file",
    "merge_fsdp_weights",
    "merge_weights",
    "notebook_launcher",
    "resolve",
    "write_basic_config",
]
