"""DeepSpeed configuration: the plugin, the view over a DeepSpeed JSON config, and the filling of
its ``"auto"`` values with a check that explicit values agree.

Nothing here imports ``deepspeed``: the plugin is built (and validated) in any environment; the
engine in ``accel`` imports DeepSpeed when a model is prepared.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import environment_variables as env
from .._env._contract import OFFLOAD_DEVICES, ZERO_STAGES
from ._deepspeed_json import AUTO, HfDeepSpeedConfig, fill_match, raise_mismatches

_FIELD_VARIABLES = {
    "gradient_accumulation_steps": env.ACCEL_GRADIENT_ACCUMULATION_STEPS,
    "gradient_clipping": env.ACCEL_GRADIENT_CLIPPING,
    "zero_stage": env.ACCEL_DEEPSPEED_ZERO_STAGE,
    "offload_optimizer_device": env.ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE,
    "offload_param_device": env.ACCEL_DEEPSPEED_OFFLOAD_PARAM_DEVICE,
    "offload_optimizer_nvme_path": env.ACCEL_DEEPSPEED_OFFLOAD_OPTIMIZER_NVME_PATH,
    "offload_param_nvme_path": env.ACCEL_DEEPSPEED_OFFLOAD_PARAM_NVME_PATH,
    "zero3_init_flag": env.ACCEL_DEEPSPEED_ZERO3_INIT_FLAG,
    "zero3_save_16bit_model": env.ACCEL_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL,
}
"""Each field the launcher's environment fills, and its variable."""


def _dtype_of(precision: str) -> str:
    return {"fp16": "fp16", "bf16": "bf16"}.get(precision, "fp32")


@dataclass
class DeepSpeedPlugin:
    """How a model is trained with DeepSpeed (ZeRO stages, offload, precision, accumulation).

    Either point ``hf_ds_config`` at a DeepSpeed config (file or dict) whose ``"auto"`` values
    are filled from the Accelerator at ``prepare`` time, or leave it unset and describe the run
    with the fields below. Unset fields are read from the launcher's environment
    (``ACCEL_DEEPSPEED_*``, ``ACCEL_GRADIENT_*`` set by ``accel launch --use_deepspeed ...``, or
    the reference's ``ACCELERATE_*`` names). When both a config and a
    field give a value they must agree: every disagreement is listed in one error.
    """

    hf_ds_config: Any = None
    """A DeepSpeed config: path of a JSON file, a dict, or an [`HfDeepSpeedConfig`][accel_state.HfDeepSpeedConfig]
    (default: ``ACCEL_DEEPSPEED_CONFIG_FILE``, else built from the fields below)."""
    gradient_accumulation_steps: int | str | None = None
    """Batches accumulated per optimizer step; ``"auto"`` takes the Accelerator's
    (``ACCEL_GRADIENT_ACCUMULATION_STEPS``)."""
    gradient_clipping: float | str | None = None
    """Clip the global gradient norm to this value inside DeepSpeed's step
    (``ACCEL_GRADIENT_CLIPPING``)."""
    zero_stage: int | None = None
    """ZeRO stage 0, 1, 2 or 3 (``ACCEL_DEEPSPEED_ZERO_STAGE``; default 2 without a config)."""
    is_train_batch_min: bool = True
    """With several prepared dataloaders, take the smallest batch size (False: the largest)."""
    offload_optimizer_device: str | None = None
    """``"none"``, ``"cpu"`` or ``"nvme"``: where optimizer states live (ZeRO >= 1)."""
    offload_param_device: str | None = None
    """``"none"``, ``"cpu"`` or ``"nvme"``: where parameters live (ZeRO 3 only)."""
    offload_optimizer_nvme_path: str | None = None
    """Folder of optimizer states when they are offloaded to NVMe."""
    offload_param_nvme_path: str | None = None
    """Folder of parameters when they are offloaded to NVMe."""
    zero3_init_flag: bool | None = None
    """Build models directly partitioned with ``deepspeed.zero.Init`` (ZeRO 3 only; default
    True with ZeRO 3, False otherwise)."""
    zero3_save_16bit_model: bool | None = None
    """Gather a 16-bit copy of the weights when saving the model (ZeRO 3)."""
    transformer_moe_cls_names: str | None = None
    """Comma-separated class names of mixture-of-experts layers (leaf modules under ZeRO 3)."""
    enable_msamp: bool | None = None
    """Run DeepSpeed with MS-AMP's FP8 optimizer. Refused when True: accel's DeepSpeed engine
    does not drive MS-AMP (see the error). Default False."""
    msamp_opt_level: Literal["O1", "O2"] | None = None
    """MS-AMP optimisation level with ``enable_msamp`` (``"O1"`` or ``"O2"``; default
    ``"O1"``)."""
    deepspeed_config: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    """The config being completed (read it after ``prepare`` for the values DeepSpeed used)."""
    selected: bool = field(default=False, init=False, repr=False)
    """Whether this plugin is the active one (several plugins: see ``select``)."""

    def __post_init__(self) -> None:
        self._explicit: dict[str, Any] = {}
        for name, variable in _FIELD_VARIABLES.items():
            value = getattr(self, name)
            if value is None:
                value = env.read_env(variable)
            if value is not None:
                value = _coerce(name, value)
                self._explicit[name] = value
            setattr(self, name, value)
        if self.hf_ds_config is None:
            self.hf_ds_config = env.read_env(env.ACCEL_DEEPSPEED_CONFIG_FILE)
        if self.hf_ds_config is None:
            self._build_config()
        else:
            if not isinstance(self.hf_ds_config, HfDeepSpeedConfig):
                self.hf_ds_config = HfDeepSpeedConfig(self.hf_ds_config)
            self.deepspeed_config = self.hf_ds_config.config
            self._check_fields_against_config()
        if self.hf_ds_config is None:
            self.hf_ds_config = HfDeepSpeedConfig(self.deepspeed_config)
            self.deepspeed_config = self.hf_ds_config.config
        self._validate()
        self.zero_stage = self.hf_ds_config.get_zero_stage()
        # As in the reference: ZeRO 3 builds models partitioned unless told otherwise.
        if self.zero3_init_flag is None:
            self.zero3_init_flag = self.zero_stage == 3
        self.zero3_init_flag = bool(self.zero3_init_flag) and self.zero_stage == 3
        self._fill_reference_values()
        if self._explicit.get("zero3_init_flag") and self.zero_stage != 3:
            raise ValueError(
                "zero3_init_flag builds models partitioned, which needs ZeRO stage 3; got "
                f"zero_stage={self.zero_stage}. Use zero_stage=3 or drop zero3_init_flag."
            )

    def _fill_reference_values(self) -> None:
        """Give the fields left unset the values the reference library shows after
        construction (``"auto"``, ``"none"``, False); the config is already built."""
        if self.msamp_opt_level is None:
            self.msamp_opt_level = "O1"
        if self.msamp_opt_level not in ("O1", "O2"):
            raise ValueError(
                f"DeepSpeedPlugin.msamp_opt_level must be 'O1' or 'O2'; got "
                f"{self.msamp_opt_level!r}. Use 'O1' or 'O2'."
            )
        self.enable_msamp = bool(self.enable_msamp)
        if self.enable_msamp:
            raise ValueError(
                "DeepSpeedPlugin.enable_msamp=True asks DeepSpeed to run MS-AMP's FP8 optimizer; "
                "accel's DeepSpeed engine does not drive MS-AMP (MS-AMP builds only against CUDA "
                "and ships its own DeepSpeed integration). Set enable_msamp=False, or train in "
                "FP8 without DeepSpeed: Accelerator(mixed_precision='fp8', kwargs_handlers="
                "[MSAMPRecipeKwargs()])."
            )
        for name, unset in (
            ("gradient_accumulation_steps", AUTO),
            ("gradient_clipping", AUTO),
            ("offload_optimizer_device", "none"),
            ("offload_param_device", "none"),
            ("offload_optimizer_nvme_path", "none"),
            ("offload_param_nvme_path", "none"),
            ("zero3_save_16bit_model", False),
        ):
            if getattr(self, name) is None:
                setattr(self, name, unset)

    # ------------------------------------------------------------------ building the config
    def _build_config(self) -> None:
        stage = 2 if self.zero_stage is None else self.zero_stage
        gas = AUTO if self.gradient_accumulation_steps is None else self.gradient_accumulation_steps
        zero: dict[str, Any] = {"stage": stage}
        for part in ("optimizer", "param"):
            device = getattr(self, f"offload_{part}_device") or "none"
            entry: dict[str, Any] = {"device": device}
            path = getattr(self, f"offload_{part}_nvme_path")
            if path:
                entry["nvme_path"] = path
            zero[f"offload_{part}"] = entry
        zero["stage3_gather_16bit_weights_on_model_save"] = bool(self.zero3_save_16bit_model)
        config: dict[str, Any] = {
            "train_batch_size": AUTO,
            "train_micro_batch_size_per_gpu": AUTO,
            "gradient_accumulation_steps": gas,
            "zero_optimization": zero,
        }
        if self.gradient_clipping is not None:
            config["gradient_clipping"] = self.gradient_clipping
        self.deepspeed_config = config
        self.hf_ds_config = None

    def _check_fields_against_config(self) -> None:
        """Explicit fields fill the config's ``"auto"`` values and must agree with the rest."""
        config = self.hf_ds_config
        mismatches: list[str] = []
        keys = {
            "gradient_accumulation_steps": "gradient_accumulation_steps",
            "gradient_clipping": "gradient_clipping",
            "zero_stage": "zero_optimization.stage",
            "offload_optimizer_device": "zero_optimization.offload_optimizer.device",
            "offload_param_device": "zero_optimization.offload_param.device",
            "offload_optimizer_nvme_path": "zero_optimization.offload_optimizer.nvme_path",
            "offload_param_nvme_path": "zero_optimization.offload_param.nvme_path",
            "zero3_save_16bit_model": "zero_optimization.stage3_gather_16bit_weights_on_model_save",
        }
        for name, key in keys.items():
            value = self._explicit.get(name)
            if value is None:
                continue
            node, last = config.find_config_node(key)
            if node is None or last not in node:
                if value not in ("none", False):
                    _set(config.config, key, value)
                continue
            fill_match(config, key, value, mismatches)
        raise_mismatches(mismatches)
        if self.gradient_accumulation_steps is None:
            gas = config.get_value("gradient_accumulation_steps")
            self.gradient_accumulation_steps = None if gas in (None, AUTO) else int(gas)
        if self.gradient_clipping is None:
            clip = config.get_value("gradient_clipping")
            self.gradient_clipping = None if clip in (None, AUTO) else float(clip)
        if self.zero3_save_16bit_model is None:
            self.zero3_save_16bit_model = config.is_true(
                "zero_optimization.stage3_gather_16bit_weights_on_model_save"
            )

    def _validate(self) -> None:
        stage = self.hf_ds_config.get_value("zero_optimization.stage", 0)
        if stage != AUTO and int(stage) not in (0, 1, 2, 3):
            raise ValueError(
                f"zero_stage must be 0, 1, 2 or 3; got {stage!r}. Use 2 (sharded optimizer "
                "states and gradients) or 3 (also sharded parameters)."
            )
        clip = self.hf_ds_config.get_value("gradient_clipping")
        if clip not in (None, AUTO):
            check_gradient_clipping(clip, "the DeepSpeed config's gradient_clipping")
        param_device = self.hf_ds_config.get_value("zero_optimization.offload_param.device")
        if param_device in ("cpu", "nvme") and stage != 3:
            raise ValueError(
                "offload_param_device needs ZeRO stage 3 (only stage 3 partitions parameters); "
                f"got offload_param_device={param_device!r} with zero_stage={stage}. Use "
                "zero_stage=3 or offload_param_device='none'."
            )

    # ------------------------------------------------------------------ public helpers
    def deepspeed_config_process(
        self,
        prefix: str = "",
        mismatches: list[str] | None = None,
        config: dict[str, Any] | None = None,
        must_match: bool = True,
        **kwargs: Any,
    ) -> None:
        """Fill the config's ``"auto"`` values from ``kwargs`` and check the others agree.

        ``kwargs`` maps dotted keys (``"zero_optimization.stage"``, ``"bf16.enabled"``) to the
        values the Accelerator uses. Keys absent from the config are left alone.

        Args:
            prefix: Dotted path of ``config`` inside the whole config (recursion).
            mismatches: Collects disagreements (recursion); the outermost call raises.
            config: The (sub-)config to process (default: the whole config).
            must_match: Record disagreements between explicit values and ``kwargs``.
            **kwargs: The values to fill in / check.

        Raises:
            ValueError: listing every key where the config and ``kwargs`` disagree.
        """
        outermost = mismatches is None
        mismatches = [] if mismatches is None else mismatches
        if config is None:
            config = self.deepspeed_config
        view = HfDeepSpeedConfig.__new__(HfDeepSpeedConfig)
        view.config = config
        for key, value in list(config.items()):
            if isinstance(value, dict):
                self.deepspeed_config_process(
                    prefix=f"{prefix}{key}.",
                    mismatches=mismatches,
                    config=value,
                    must_match=must_match,
                    **kwargs,
                )
            elif f"{prefix}{key}" in kwargs:
                before = len(mismatches)
                fill_match(view, key, kwargs[f"{prefix}{key}"], mismatches, must_match)
                if len(mismatches) > before:
                    mismatches[-1] = mismatches[-1].replace(f"ds {key}=", f"ds {prefix}{key}=")
        if outermost:
            raise_mismatches(mismatches)

    def set_mixed_precision(self, mixed_precision: str) -> None:
        """Fill or check ``fp16.enabled`` / ``bf16.enabled`` against the Accelerator's precision.

        A section missing from the config is added; a config that enables a different precision
        than the Accelerator raises (DeepSpeed would otherwise switch precision silently).
        """
        config = self.deepspeed_config
        wanted = _dtype_of(mixed_precision)
        mismatches: list[str] = []
        for kind in ("fp16", "bf16"):
            section = config.get(kind)
            if section is None:
                if wanted == kind:
                    config[kind] = {"enabled": True}
                continue
            if not isinstance(section, dict):
                continue
            enabled = section.get("enabled", AUTO if kind == "fp16" else False)
            if enabled == AUTO:
                section["enabled"] = wanted == kind
            elif bool(enabled) != (wanted == kind):
                mismatches.append(
                    f"- ds {kind}.enabled={enabled!r} vs accel mixed_precision={mixed_precision!r}"
                )
        if config.get("amp", {}).get("enabled") is True:
            mismatches.append(
                f"- ds amp.enabled=True vs accel mixed_precision={mixed_precision!r} (apex AMP "
                "is not supported; use fp16 or bf16)"
            )
        raise_mismatches(mismatches)

    def select(self, _from_accelerator_state: bool = False) -> None:
        """Mark this plugin as the active one (use ``AcceleratorState().select_deepspeed_plugin``)."""
        if not _from_accelerator_state:
            raise ValueError(
                "a DeepSpeedPlugin is selected through the state so that only one is active; got "
                "a direct call to plugin.select(). Call "
                "accelerator.state.select_deepspeed_plugin(name)."
            )
        self.selected = True

    def _unselect(self) -> None:
        self.selected = False

    @property
    def is_zero3(self) -> bool:
        """Whether this plugin trains with ZeRO stage 3."""
        return self.hf_ds_config.is_zero3()

    def zero3_init_context_manager(
        self, enable: bool | None = None
    ) -> contextlib.AbstractContextManager[Any]:
        """Context in which models are built partitioned over the processes (ZeRO 3).

        Args:
            enable: Force on or off (default: ``zero3_init_flag``).

        Returns:
            ``deepspeed.zero.Init`` for ZeRO 3 when enabled, else a null context.
        """
        enabled = self.zero3_init_flag if enable is None else enable
        if not enabled or not self.is_zero3:
            return contextlib.nullcontext()
        return _zero3_init(self)


def init_config(plugin: DeepSpeedPlugin, mixed_precision: str) -> dict[str, Any]:
    """A copy of the plugin's config usable before ``prepare`` (``zero.Init``): batch values
    set to 1, precision filled in, other ``"auto"`` values dropped."""
    config = copy.deepcopy(plugin.deepspeed_config)
    config["train_micro_batch_size_per_gpu"] = 1
    config["gradient_accumulation_steps"] = 1
    config.pop("train_batch_size", None)
    wanted = _dtype_of(mixed_precision)
    for kind in ("fp16", "bf16"):
        section = config.setdefault(kind, {})
        if section.get("enabled", AUTO) == AUTO:
            section["enabled"] = wanted == kind
    _drop_auto(config)
    return config


def _drop_auto(config: dict[str, Any]) -> None:
    for key, value in list(config.items()):
        if value == AUTO:
            del config[key]
        elif isinstance(value, dict):
            _drop_auto(value)


@contextlib.contextmanager
def _zero3_init(plugin: DeepSpeedPlugin) -> Iterator[None]:
    try:
        import deepspeed
    except ImportError as err:
        raise ImportError(
            'zero3_init needs DeepSpeed, which is not installed; run pip install "accel-state[deepspeed]".'
        ) from err
    from .._process._accelerator_state import AcceleratorState

    state = AcceleratorState()
    with deepspeed.zero.Init(config_dict_or_path=init_config(plugin, state.mixed_precision)):
        yield


def check_gradient_clipping(value: Any, name: str) -> float:
    """Return ``value`` as a clipping norm: a finite number >= 0 (0 turns clipping off).

    Raises:
        ValueError: naming ``name``, the value and the fix.
    """
    try:
        norm = float(value)
    except (TypeError, ValueError):
        norm = math.nan
    if isinstance(value, bool) or not math.isfinite(norm) or norm < 0:
        raise ValueError(
            f"{name} is the largest gradient norm kept, a finite number >= 0 (0 turns clipping "
            f"off); got {value!r}. Pass e.g. 1.0, or 0 for no clipping."
        )
    return norm


def _set(config: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _coerce(name: str, value: Any) -> Any:
    if name == "gradient_clipping":
        return value if value == AUTO else check_gradient_clipping(value, "DeepSpeedPlugin." + name)
    try:
        if name == "gradient_accumulation_steps":
            if value == AUTO:
                return value
            steps = int(value)
            if steps < 1:
                raise ValueError
            return steps
        if name == "zero_stage":
            stage = int(value)
            if stage not in ZERO_STAGES:
                raise ValueError
            return stage
    except (TypeError, ValueError):
        rules = {
            "gradient_accumulation_steps": "an integer >= 1 or 'auto'",
            "zero_stage": "0, 1, 2 or 3",
        }
        raise ValueError(
            f"DeepSpeedPlugin.{name} must be {rules[name]}; got {value!r}. Pass {rules[name]}."
        ) from None
    if name in ("offload_optimizer_device", "offload_param_device"):
        text = str(value).lower()
        if text not in OFFLOAD_DEVICES:
            raise ValueError(
                f"DeepSpeedPlugin.{name} must be one of {OFFLOAD_DEVICES}; got {value!r}. "
                "Use 'none', 'cpu' or 'nvme'."
            )
        return text
    if name in ("zero3_init_flag", "zero3_save_16bit_model"):
        return bool(value)
    return value


__all__ = [
    "DeepSpeedPlugin",
    "HfDeepSpeedConfig",
    "check_gradient_clipping",
    "fill_match",
    "init_config",
]
