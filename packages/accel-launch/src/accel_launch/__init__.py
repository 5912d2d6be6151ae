"""The ``accel`` and ``accel-launch`` commands: config, launch, test, env, estimate-memory,
merge-weights.

Importing this package imports neither torch nor yaml: each name loads its module on first use,
so ``accel --version``, ``accel --help`` and ``accel env`` answer without paying for torch.
"""

from accel_state.lazy import lazy_module as _lazy_module

# Public name -> private module, loaded on first use.
_EXPORTS = {
    "SAGEMAKER_PARALLEL_EC2_INSTANCES": ".commands._sagemaker",
    "SAGEMAKER_PYTHON_VERSION": ".commands._sagemaker",
    "SAGEMAKER_PYTORCH_VERSION": ".commands._sagemaker",
    "SAGEMAKER_TRANSFORMERS_VERSION": ".commands._sagemaker",
    "SageMakerConfig": ".commands._sagemaker",
    "build_estimator": ".commands._sagemaker",
    "hyperparameters": ".commands._sagemaker",
    "prepare_sagemager_args_inputs": ".commands._sagemaker",
    "prepare_multi_gpu_env": ".launchers._torchrun_env",
    "ConfigError": ".configs._config_file",
    "DeepSpeedConfig": ".configs._engine_configs",
    "DynamoConfig": ".configs._engine_configs",
    "FSDPConfig": ".configs._engine_configs",
    "LaunchConfig": ".configs._config_file",
    "MegatronLMConfig": ".configs._engine_configs",
    "LaunchPlan": "._resolve",
    "child_environment": "._resolve",
    "config_from_dict": ".configs._config_file",
    "convert_to_fsdp2": ".commands._to_fsdp2",
    "default_config_file": ".configs._config_file",
    "load_config_file": ".configs._config_file",
    "merge_fsdp_weights": ".commands._merge",
    "merge_weights": ".commands._merge",
    "notebook_launcher": ".commands._notebook",
    "PrepareForLaunch": ".commands._notebook",
    "resolve": "._resolve",
    "install_xla": ".commands._tpu",
    "launch_command": ".commands._reference_commands",
    "launch_command_parser": ".commands._reference_commands",
    "BaseConfig": ".configs._config_classes",
    "ClusterConfig": ".configs._config_classes",
    "add_timm_hub_prefix": ".commands._estimate_cmd",
    "convert_config_to_fsdp2": ".commands._reference_cli",
    "env_command": ".commands._reference_cli",
    "env_command_parser": ".commands._reference_cli",
    "env_info": ".commands._env_cmd",
    "estimate_command": ".commands._reference_cli",
    "estimate_command_parser": ".commands._reference_cli",
    "gather_data": ".commands._reference_cli",
    "prepare_simple_launcher_cmd_env": "._simple_launch",
    "test_command": ".commands._reference_cli",
    "test_command_parser": ".commands._reference_cli",
    "to_fsdp2_command": ".commands._reference_cli",
    "to_fsdp2_command_parser": ".commands._reference_cli",
    "tpu_command_launcher": ".commands._reference_cli",
    "tpu_command_parser": ".commands._reference_cli",
    "validate_launch_command": "._simple_launch",
    "write_basic_config": ".configs._config_file",
    "ConfigField": ".launchers._config_field",
    "LaunchCommand": ".launchers._launcher_base",
    "LaunchTarget": ".launchers._launcher_base",
    "Launcher": ".launchers._launcher_base",
    "register_launcher": ".launchers._launcher_registry",
}

# Read from the installed metadata on first access (see lazy_module).
__version__: str

__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = _lazy_module(globals(), _EXPORTS, distribution="accel-launch")
