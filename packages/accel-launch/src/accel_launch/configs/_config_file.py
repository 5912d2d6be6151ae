"""The config file model shared by ``accel config`` and ``accel launch``."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accel_state import ComputeEnvironment, DistributedType, PrecisionType
from accel_state import environment_variables as contract

from .._device_files import accelerator_device_files
from .._errors import ConfigError
from ._config_values import coerce
from ._engine_configs import (
    SECTIONS,
    DeepSpeedConfig,
    DynamoConfig,
    FSDPConfig,
    MegatronLMConfig,
    ParallelismSection,
)
from ._migrate import CONFIG_VERSION, IGNORED_KEYS, migrate
from ._tpu_settings import check_tpu_settings

if TYPE_CHECKING:
    from ..launchers._config_field import ConfigField


def default_config_dir() -> Path:
    """Folder of the default config file: ``$ACCEL_CONFIG_HOME``, else ``$XDG_CACHE_HOME/accel``
    (``~/.cache/accel``)."""
    home = contract.read_env(contract.ACCEL_CONFIG_HOME)
    if home is not None:
        return Path(home)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "accel"


def default_config_file() -> Path:
    """Path of the default config file (``default_config.yaml`` in `default_config_dir`)."""
    return default_config_dir() / "default_config.yaml"


def launcher_settings() -> dict[str, ConfigField]:
    """The settings declared by the registered launcher backends, by name (those of the
    backends of this package are fields of [`LaunchConfig`][accel_launch.LaunchConfig] too)."""
    from ..launchers._launcher_registry import launcher_fields

    return launcher_fields()


def _added_settings() -> dict[str, ConfigField]:
    """The settings of backends registered from outside: attributes set on each config."""
    return {k: v for k, v in launcher_settings().items() if k not in FIELD_TYPES}


@dataclass
class LaunchConfig:
    """Everything ``accel launch`` needs to start a job. Each field can come from the config
    file or a flag of the same name; a flag always wins. A launcher backend registered with
    [`register_launcher`][accel_launch.register_launcher] adds the settings of its
    ``config_fields`` as attributes, set to their defaults."""

    config_version: int = CONFIG_VERSION
    """Version of this file's format (written by ``accel config``)."""
    compute_environment: str = ComputeEnvironment.LOCAL_MACHINE.value
    """``LOCAL_MACHINE`` or ``AMAZON_SAGEMAKER``."""
    distributed_type: str = DistributedType.NO.value
    """``NO``, ``MULTI_CPU``, ``MULTI_GPU``, ``DEEPSPEED``, ``FSDP`` ... (derived when ``NO``)."""
    mixed_precision: str = PrecisionType.NO.value
    """``no``, ``fp16``, ``bf16`` or ``fp8``."""
    use_cpu: bool = False
    """Run on CPU even when accelerators are present."""
    debug: bool = False
    """Check collectives across ranks (clear errors instead of hangs)."""
    num_processes: int = 1
    """Total number of processes over all machines."""
    num_machines: int = 1
    """Number of machines."""
    machine_rank: int = 0
    """Index of this machine (0 is the main machine)."""
    main_process_ip: str | None = None
    """Address of the main machine (multi-machine runs)."""
    main_process_port: int | None = None
    """Rendezvous port on the main machine (None or 0: a free port on one machine, 29500 on
    several)."""
    rdzv_backend: str = "static"
    """Rendezvous backend: ``static`` or ``c10d``."""
    same_network: bool = True
    """All machines are on the same network."""
    gpu_ids: str = "all"
    """Which GPUs to use (``all`` or a comma-separated list)."""
    num_cpu_threads_per_process: int | None = None
    """Value of ``OMP_NUM_THREADS`` for each process (default: cores / local processes)."""
    max_restarts: int = 0
    """How many times a failed worker group is restarted before the job fails."""
    monitor_interval: float = 0.1
    """Seconds between two checks of the workers' health."""
    mpirun_hostfile: str | None = None
    """Start the processes with ``mpirun`` on the hosts of this hostfile (multi-CPU)."""
    dynamo_config: DynamoConfig = field(default_factory=DynamoConfig)
    """``torch.compile`` options (see [`DynamoConfig`][accel_launch.DynamoConfig])."""
    deepspeed_config: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    """DeepSpeed options, used when ``distributed_type`` is ``DEEPSPEED``."""
    fsdp_config: FSDPConfig = field(default_factory=FSDPConfig)
    """FSDP options, used when ``distributed_type`` is ``FSDP``."""
    megatron_lm_config: MegatronLMConfig = field(default_factory=MegatronLMConfig)
    """Megatron-LM options, used when ``distributed_type`` is ``MEGATRON_LM``."""
    parallelism_config: ParallelismSection = field(default_factory=ParallelismSection)
    """``ParallelismConfig`` sizes and backends sent to the processes (any engine)."""
    downcast_bf16: bool = False
    """XLA with bf16 mixed precision: cast float32 to bf16 and float64 to float32
    (``XLA_DOWNCAST_BF16``) instead of every float to bf16 (``XLA_USE_BF16``)."""
    main_training_function: str = "main"
    """XLA: the function of the script that each process runs."""
    tpu_use_cluster: bool = False
    """XLA: launch on every VM of a TPU pod through ``gcloud`` (``--tpu_cluster``)."""
    tpu_name: str | None = None
    """The TPU pod's name (``accel launch --tpu_cluster``, ``accel tpu-config``)."""
    tpu_zone: str | None = None
    """The TPU pod's Google Cloud zone, e.g. ``us-central2-b``."""
    tpu_use_sudo: bool = False
    """Pod launch: run ``accel launch`` with ``sudo`` on each VM."""
    tpu_vm: list[str] | None = None
    """Pod launch: the workers to launch on (default: all)."""
    tpu_env: list[str] | None = None
    """XLA: ``KEY=VALUE`` variables set for the processes (exported on each VM of a pod)."""
    command_file: str | None = None
    """``accel tpu-config``: a file of commands, one per line, run on each VM."""
    commands: list[str] | None = None
    """``accel tpu-config``: commands run on each VM."""

    def __post_init__(self) -> None:
        for name, declared in _added_settings().items():
            setattr(self, name, declared.default)

    def validate(self) -> LaunchConfig:
        """Check every value; raise [`ConfigError`][accel_launch.ConfigError] naming the field, the value and the fix."""
        try:
            self.mixed_precision = PrecisionType.parse(
                self.mixed_precision, "mixed_precision"
            ).value
            self.distributed_type = DistributedType.parse(
                self.distributed_type, "distributed_type"
            ).value
            self.compute_environment = ComputeEnvironment.parse(
                self.compute_environment, "compute_environment"
            ).value
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for name in SECTIONS:
            getattr(self, name).validate(name)
        for name in ("num_processes", "num_machines"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1; got {value!r}. Use e.g. 2.")
        if not 0 <= self.machine_rank < self.num_machines:
            raise ConfigError(
                f"machine_rank must be in [0, num_machines={self.num_machines}); "
                f"got {self.machine_rank}. Number the machines 0..{self.num_machines - 1}."
            )
        if self.num_processes % self.num_machines:
            raise ConfigError(
                f"num_processes is the total over all machines and must be a multiple of "
                f"num_machines={self.num_machines}; got {self.num_processes}. Use "
                f"{self.num_machines * max(1, self.num_processes // self.num_machines)}."
            )
        if self.num_machines > 1 and not self.main_process_ip:
            raise ConfigError(
                f"a run on num_machines={self.num_machines} needs main_process_ip; got None. "
                "Pass --main_process_ip <address of machine 0>."
            )
        check_tpu_settings(self)
        threads = self.num_cpu_threads_per_process
        if threads is not None and threads < 1:
            raise ConfigError(
                f"num_cpu_threads_per_process must be >= 1; got {threads}. Use e.g. 2."
            )
        added = _added_settings()
        for name, declared in launcher_settings().items():  # each backend checks its own
            value = getattr(self, name, declared.default)
            if name in added:
                value = declared.read(value)
                setattr(self, name, value)
            if declared.check is not None:
                declared.check(value, self)
        if self.main_process_port is not None and not 0 <= self.main_process_port < 65536:
            raise ConfigError(
                f"main_process_port must be in [0, 65535]; got {self.main_process_port}. Use 0 "
                "for a free port, or e.g. 29500."
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict (what the file holds; sections hold only set values)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if f.name in SECTIONS else value
        for name, declared in _added_settings().items():
            out[name] = getattr(self, name, declared.default)
        return out

    def save(self, path: str | os.PathLike[str], comments_of: str | None = None) -> Path:
        """Write the config as YAML (or JSON when the name ends in ``.json``); return the path.

        Args:
            path: Where to write (replaced in one step: a reader never sees half a file).
            comments_of: The text of an older YAML version of the file, whose comments are
                written above the same keys.
        """
        return write_config_data(path, self.to_dict(), comments_of)


def write_config_data(
    path: str | os.PathLike[str], data: dict[str, Any], comments_of: str | None = None
) -> Path:
    """Write the mapping ``data`` as a config file, as ``LaunchConfig.save`` does (YAML, or
    JSON for a ``.json`` name; replaced in one step; the comments of ``comments_of`` carried
    over); return the path."""
    from ._comments import carry_comments

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix == ".json":
        text = json.dumps(data, indent=2) + "\n"
    else:
        import yaml  # imported when a YAML file is read or written: not on every launch

        text = yaml.safe_dump(data, sort_keys=False)
        if comments_of:
            text = carry_comments(comments_of, text)
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)  # nothing of a failed write stays
        raise
    return target


def check_layout(config: LaunchConfig) -> None:
    """The sizes of a ``parallelism_config`` section fit the run's processes: their product is
    ``num_processes``, or divides it when ``dp_shard_size`` is left to take the rest.

    Raises:
        ConfigError: naming the sizes, their product and the fix.
    """
    layout = config.parallelism_config
    sizes = {
        name: getattr(layout, f"parallelism_config_{name}_size")
        for name in ("dp_replicate", "dp_shard", "tp", "cp", "sp")
    }
    given = {name: size for name, size in sizes.items() if size is not None}
    if not given:
        return
    product = math.prod(given.values())
    processes = config.num_processes
    auto_shard = sizes["dp_shard"] is None
    if product == processes or (auto_shard and processes % product == 0):
        return
    shown = " x ".join(f"{name} {size}" for name, size in given.items())
    rest = "divide" if auto_shard else "equal"
    raise ConfigError(
        f"the parallelism_config sizes must {rest} the number of processes "
        f"(num_processes={processes}); got {shown} = {product}. Change the sizes so that they "
        f"multiply to {processes}, or set num_processes to {product}."
    )


FIELD_NAMES = [f.name for f in dataclasses.fields(LaunchConfig)]
FIELD_TYPES = {f.name: str(f.type) for f in dataclasses.fields(LaunchConfig)}


def config_from_dict(data: dict[str, Any], source: str = "<dict>") -> LaunchConfig:
    """Build a validated [`LaunchConfig`][accel_launch.LaunchConfig], refusing unknown keys with the closest valid one."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a config file must hold a mapping of settings; got "
            f"{type(data).__name__}. Write `key: value` lines, e.g. `num_processes: 2`."
        )
    values: dict[str, Any] = {}
    version = data.get("config_version", 0)
    if isinstance(version, int) and version > CONFIG_VERSION:
        raise ConfigError(
            f"{source}: config_version must be at most {CONFIG_VERSION}, the newest format this "
            f"accel-launch understands; got {version}. Upgrade accel-launch: "
            "pip install -U accel-launch."
        )
    data, _ = migrate(data)
    added = _added_settings()
    names = FIELD_NAMES + list(added)
    types = FIELD_TYPES | {name: declared.annotation for name, declared in added.items()}
    for key, value in data.items():
        if key in IGNORED_KEYS:
            continue
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{source}: unknown setting {key!r}.{hint} Valid settings: {', '.join(names)}."
            )
        if value is None and "None" not in types[key] and key not in SECTIONS:
            raise ConfigError(
                f"{source}: {key} needs a value; got null (an empty `{key}:`). Write a value, "
                f"or delete the line to take the default ({getattr(LaunchConfig(), key)!r})."
            )
        values[key] = value if key in SECTIONS else coerce(value, types[key], key)
    for key, cls in SECTIONS.items():
        if key in values:
            values[key] = cls.from_dict(values[key], f"{source}: {key}")
    extra = {key: values.pop(key) for key in added if key in values}
    try:
        config = LaunchConfig(**values)
        for key, value in extra.items():
            setattr(config, key, value)
        return config.validate()
    except TypeError as err:
        raise ConfigError(f"{source}: {err}") from None


def load_config_file(path: str | os.PathLike[str]) -> LaunchConfig:
    """Read a YAML or JSON config file.

    Raises:
        ConfigError: when the file is missing, does not parse, or holds invalid settings.
    """
    from ._config_bounds import check_regular_file

    target = Path(path)
    check_regular_file(target)
    if not target.is_file():
        raise ConfigError(
            f"config file {str(target)!r} does not exist. Create it with `accel config` or "
            "`accel config default`, or pass an existing --config_file."
        )
    return config_from_dict(read_raw(target), source=str(target))


def read_raw(path: Path) -> dict[str, Any]:
    """The mapping held by a YAML or JSON config file, before any check of its settings.

    The file's size and what it expands to (YAML aliases included) are bounded first
    (`accel_launch.configs._config_bounds`), so no file makes a later step work without end.

    Raises:
        ConfigError: when the file is too large, does not parse, or expands past the bounds.
    """
    import yaml  # with the bounds' loader: only once a config file is read

    from ._config_bounds import (
        check_expansion,
        check_file_size,
        check_regular_file,
        load_yaml,
        nested_too_deep,
    )

    check_regular_file(path)
    check_file_size(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"config file {str(path)!r} cannot be read as text: {err}. Pass a YAML or JSON "
            "config file (written by `accel config`)."
        ) from None
    try:
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text, path)
    except yaml.constructor.ConstructorError as err:
        raise ConfigError(
            f"config files hold plain values only (YAML is read with yaml.safe_load, which never "
            f"builds Python objects nor runs code); {str(path)!r} uses a tag it refused: "
            f"{str(err).splitlines()[0]}. Remove the `!!python/...` tag and write the plain "
            "value, or regenerate the file with `accel config`."
        ) from None
    except ConfigError:
        raise
    except (json.JSONDecodeError, yaml.YAMLError, ValueError) as err:
        # ValueError: a tag's value YAML cannot build (`!!int abc`, `!!float x`)
        raise ConfigError(
            f"config file {str(path)!r} does not parse: {err}. Fix the syntax or regenerate "
            "it with `accel config`."
        ) from None
    except RecursionError:
        raise nested_too_deep(path) from None
    check_expansion(data, path)
    return data if data is not None else {}


def write_basic_config(
    mixed_precision: str = "no",
    save_location: str | os.PathLike[str] | None = None,
) -> Path | bool:
    """Write a config for this machine: every local GPU (or Intel XPU), or one CPU process when
    there is none.

    Args:
        mixed_precision: ``"no"``, ``"fp16"``, ``"bf16"`` or ``"fp8"``.
        save_location: Where to write (default: [`default_config_file`][accel_launch.default_config_file]).

    Returns:
        The path written, or ``False`` when a file already exists there (it is left untouched).
    """
    target = Path(save_location) if save_location is not None else default_config_file()
    if target.exists():
        return False
    precision = PrecisionType.parse(mixed_precision, "mixed_precision").value
    config = LaunchConfig(mixed_precision=precision)
    if accelerator_device_files() == []:  # no driver: torch would find no device either
        config.use_cpu = True
        return config.validate().save(target)
    import torch  # only to count devices, once something will be written

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        count = torch.cuda.device_count()
        config.num_processes = count
        config.distributed_type = "MULTI_GPU" if count > 1 else "NO"
    elif hasattr(torch, "xpu") and torch.xpu.is_available() and torch.xpu.device_count() > 0:
        count = torch.xpu.device_count()
        config.num_processes = count
        config.distributed_type = "MULTI_XPU" if count > 1 else "NO"
    else:
        config.use_cpu = True
    return config.validate().save(target)
