"""Amazon SageMaker: the config file of a SageMaker launch and the training job it becomes.

A config file with ``compute_environment: AMAZON_SAGEMAKER`` makes ``accel launch script.py``
submit a SageMaker training job through the SageMaker Python SDK v2: a
``sagemaker.huggingface.HuggingFace`` estimator built from the file (instance type and count,
distribution), the script's arguments (hyperparameters) and the launch settings (environment
of the job), then ``fit``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_state import PrecisionType, SageMakerDistributedType, merge_dicts

from .._errors import ConfigError
from ..configs._engine_configs import DynamoConfig

SAGEMAKER_PYTORCH_VERSION = "1.10.2"
"""PyTorch version of the training image when the config file names none."""
SAGEMAKER_PYTHON_VERSION = "py38"
"""Python version of the training image when the config file names none."""
SAGEMAKER_TRANSFORMERS_VERSION = "4.17.0"
"""Transformers version of the training image when the config file names none."""
SAGEMAKER_PARALLEL_EC2_INSTANCES = ["ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4dn.24xlarge"]
"""Instance types the questionnaire offers for SageMaker data parallelism."""

INSTALL = 'pip install "accel-launch[sagemaker]"'


@dataclass
class SageMakerConfig:
    """A SageMaker launch, as written by ``accel config`` (``compute_environment:
    AMAZON_SAGEMAKER``)."""

    compute_environment: str = "AMAZON_SAGEMAKER"
    """Always ``AMAZON_SAGEMAKER`` for this kind of file."""
    distributed_type: str = SageMakerDistributedType.NO.value
    """``NO`` (one process) or ``DATA_PARALLEL`` (SageMaker's data-parallel library)."""
    mixed_precision: str = PrecisionType.NO.value
    """``no``, ``fp16``, ``bf16`` or ``fp8``."""
    use_cpu: bool = False
    """Run on CPU in the job."""
    debug: bool = False
    """Check collectives across ranks in the job."""
    ec2_instance_type: str = ""
    """Instance type of the job, e.g. ``ml.p3.2xlarge``."""
    iam_role_name: str = ""
    """IAM role (name or ARN) the job runs as."""
    image_uri: str | None = None
    """A training image of your own (it must have accel installed); None: the Hugging Face
    PyTorch image of the versions below."""
    profile: str | None = None
    """AWS profile whose credentials submit the job (else the --aws_* flags or the
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` variables)."""
    region: str = "us-east-1"
    """AWS region of the job."""
    num_machines: int = 1
    """Instances of the job."""
    gpu_ids: str = "all"
    """GPUs to use on each instance."""
    base_job_name: str = "accelerate-sagemaker-1"
    """Prefix of the job's name."""
    pytorch_version: str = SAGEMAKER_PYTORCH_VERSION
    """PyTorch version of the Hugging Face training image."""
    transformers_version: str = SAGEMAKER_TRANSFORMERS_VERSION
    """Transformers version of the Hugging Face training image."""
    py_version: str = SAGEMAKER_PYTHON_VERSION
    """Python version of the Hugging Face training image (``py38`` ...)."""
    sagemaker_inputs_file: str | None = None
    """Tab-separated file of the job's data channels: a header line, then ``name<TAB>s3 uri``."""
    sagemaker_metrics_file: str | None = None
    """Tab-separated file of metrics read from the job's log: a header, then ``name<TAB>regex``."""
    additional_args: dict[str, Any] | None = None
    """More estimator arguments; they win over the ones built from this file."""
    dynamo_config: dict[str, Any] | None = None
    """``torch.compile`` options of the job (keys as in ``accel config``'s ``dynamo_config``)."""
    enable_cpu_affinity: bool = False
    """Pin each process to the CPUs of its GPU's NUMA node (refused: not implemented)."""

    def validate(self, source: str = "<SageMakerConfig>") -> SageMakerConfig:
        """Check every value; raise [`ConfigError`][accel_launch.ConfigError] naming the field, the value and the fix."""
        try:
            self.distributed_type = SageMakerDistributedType.parse(
                self.distributed_type, f"{source}: distributed_type of a SageMaker launch"
            ).value
            self.mixed_precision = PrecisionType.parse(
                self.mixed_precision, f"{source}: mixed_precision"
            ).value
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for name, example in (("ec2_instance_type", "ml.p3.2xlarge"), ("iam_role_name", "")):
            if not str(getattr(self, name) or "").strip():
                fix = f"e.g. `{name}: {example}`" if example else "the role SageMaker may assume"
                raise ConfigError(
                    f"{source}: a SageMaker launch needs {name}; got "
                    f"{getattr(self, name)!r}. Add it to the config file ({fix}), or run "
                    "`accel config` again."
                )
        if not isinstance(self.num_machines, int) or self.num_machines < 1:
            raise ConfigError(
                f"{source}: num_machines is the number of instances, an integer >= 1; got "
                f"{self.num_machines!r}. Use e.g. 1."
            )
        if self.distributed_type == SageMakerDistributedType.MODEL_PARALLEL.value:
            raise ConfigError(
                f"{source}: distributed_type MODEL_PARALLEL needs the script to wrap its model "
                "with SageMaker's model-parallel library, which accel does not do; got "
                "distributed_type: MODEL_PARALLEL. Use DATA_PARALLEL, or NO with your own "
                "`distribution` under additional_args."
            )
        if self.enable_cpu_affinity:
            raise ConfigError(
                f"{source}: enable_cpu_affinity is not implemented by this version; got "
                "enable_cpu_affinity: true. Remove the line (or set it to false)."
            )
        self.dynamo(source)
        return self

    def dynamo(self, source: str = "<SageMakerConfig>") -> DynamoConfig:
        """The ``torch.compile`` options as a checked [`DynamoConfig`][accel_launch.DynamoConfig]."""
        section = DynamoConfig.from_dict(self.dynamo_config or {}, f"{source}: dynamo_config")
        assert isinstance(section, DynamoConfig)
        section.validate(f"{source}: dynamo_config")
        return section

    def to_dict(self) -> dict[str, Any]:
        """The config as the mapping a config file holds."""
        return dataclasses.asdict(self)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the config as YAML (JSON when the name ends in ``.json``); return the path."""
        import json

        import yaml

        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        text = json.dumps(data, indent=2) + "\n" if target.suffix == ".json" else ""
        text = text or yaml.safe_dump(data, sort_keys=False)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, target)
        return target


SAGEMAKER_FIELDS = [f.name for f in dataclasses.fields(SageMakerConfig)]


def is_sagemaker_file(data: Mapping[str, Any]) -> bool:
    """Whether a config mapping describes a SageMaker launch."""
    return str(data.get("compute_environment", "")).upper() == "AMAZON_SAGEMAKER"


def sagemaker_config_from_dict(data: Mapping[str, Any], source: str) -> SageMakerConfig:
    """Build a checked [`SageMakerConfig`][accel_launch.SageMakerConfig], refusing unknown keys with the closest one."""
    values = {}
    for key, value in data.items():
        if key == "config_version":
            continue
        if key not in SAGEMAKER_FIELDS:
            close = difflib.get_close_matches(str(key), SAGEMAKER_FIELDS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{source}: unknown setting {key!r} for a SageMaker launch.{hint} Valid "
                f"settings: {', '.join(SAGEMAKER_FIELDS)}."
            )
        values[key] = value
    return SageMakerConfig(**values).validate(source)


def hyperparameters(script_args: list[str]) -> dict[str, Any]:
    """The script's ``--name value`` arguments as SageMaker hyperparameters.

    SageMaker gives them back to the script as ``--name value``; numbers become ``int`` or
    ``float`` and ``True``/``False`` become booleans, other values stay strings.

    Raises:
        ConfigError: for a flag without a value or a positional argument.
    """
    out: dict[str, Any] = {}
    items = list(script_args)
    index = 0
    while index < len(items):
        word = items[index]
        if not word.startswith("-"):
            raise ConfigError(
                "a SageMaker job passes the script only `--name value` pairs; got the "
                f"positional argument {word!r}. Turn it into an option, e.g. `--input {word}`."
            )
        name, sep, value = word.lstrip("-").partition("=")
        if not sep:
            if index + 1 >= len(items) or items[index + 1].startswith("-"):
                raise ConfigError(
                    "a SageMaker job passes every hyperparameter as `--name value`, so a flag "
                    f"without a value cannot reach the script; got {word!r}. Give it a value "
                    f"(`{word} True`) and parse it with a type in the script."
                )
            index += 1
            value = items[index]
        out[name] = _typed(value)
        index += 1
    return out


def _typed(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_tsv(path: str, what: str, columns: tuple[str, str]) -> dict[str, str]:
    """Read a two-column tab-separated file with a header line.

    Raises:
        ConfigError: when the file is missing or a line has no tab.
    """
    target = Path(path)
    if not target.is_file():
        raise ConfigError(
            f"{what} {str(target)!r} does not exist. Write a header line, then one "
            f"`{columns[0]}<TAB>{columns[1]}` line per entry, or remove the setting."
        )
    rows: dict[str, str] = {}
    for number, line in enumerate(target.read_text().splitlines()[1:], 2):
        if not line.strip():
            continue
        name, sep, value = line.partition("\t")
        if not sep or not name.strip() or not value.strip():
            raise ConfigError(
                f"{what} {str(target)!r} line {number}: each line is "
                f"`{columns[0]}<TAB>{columns[1]}`; got {line!r}. Separate the two with a tab."
            )
        rows[name.strip()] = value.strip()
    return rows


_HONOURED = {
    "config_file",
    "training_script",
    "training_script_args",
    "explain",
    "quiet",
    "mixed_precision",
    "debug",
    "aws_access_key_id",
    "aws_secret_access_key",
    "command",  # the parser's own bookkeeping
    "subcommand",
    "func",
}
"""Flags a SageMaker launch reads; the config file decides everything else."""


def check_sagemaker_flags(args: Any) -> None:
    """Refuse a flag that a SageMaker launch would not use (the config file decides the
    machines, processes and engine of the job)."""
    for name, value in sorted(vars(args).items()):
        if name in _HONOURED or value is None or value is False:
            continue
        if name in ("module", "no_python"):
            raise ConfigError(
                "a SageMaker job runs a Python script file; got "
                f"--{name}. Launch a `.py` file (e.g. `accel launch train.py`)."
            )
        raise ConfigError(
            f"--{name} does not apply to a SageMaker launch, whose config file sets the "
            "instances (ec2_instance_type, num_machines) and the distribution; got "
            f"--{name} {value if value is not True else ''}".rstrip()
            + ". Drop the flag, or set the matching key in the config file."
        )


def credentials(
    config: SageMakerConfig, args: Any, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The arguments of ``boto3.Session`` that identify the caller: the config's profile, else
    the --aws_* flags, else ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``.

    Raises:
        ConfigError: when none of them is complete.
    """
    environ = os.environ if environ is None else environ
    if config.profile:
        return {"profile_name": config.profile}
    key = getattr(args, "aws_access_key_id", None)
    secret = getattr(args, "aws_secret_access_key", None)
    if key or secret:
        if not (key and secret):
            given = "--aws_access_key_id" if key else "--aws_secret_access_key"
            raise ConfigError(
                f"AWS credentials are a key id and its secret together; got only {given}. "
                "Pass both --aws_access_key_id and --aws_secret_access_key."
            )
        return {"aws_access_key_id": key, "aws_secret_access_key": secret}
    key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return {"aws_access_key_id": key, "aws_secret_access_key": secret}
    raise ConfigError(
        "a SageMaker launch needs AWS credentials; got no profile in the config file, no "
        "--aws_access_key_id/--aws_secret_access_key and no AWS_ACCESS_KEY_ID/"
        "AWS_SECRET_ACCESS_KEY variables. Add `profile: <name>` to the config file, or pass "
        "--aws_access_key_id and --aws_secret_access_key."
    )


def prepare_sagemager_args_inputs(
    sagemaker_config: SageMakerConfig, args: Any
) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The arguments of the ``HuggingFace`` estimator and the data channels of ``fit``.

    Args:
        sagemaker_config: The checked SageMaker config.
        args: Parsed ``accel launch`` arguments (script, its arguments, the flags a SageMaker
            launch reads).

    Returns:
        ``(estimator keyword arguments, inputs)``; inputs is None without an inputs file.

    Raises:
        ConfigError: for missing credentials, a script that is not a ``.py`` file, a script
            folder without ``requirements.txt`` (and no image of your own), or bad arguments.
    """
    config = sagemaker_config
    credentials(config, args)
    check_sagemaker_flags(args)
    script = Path(args.training_script or "")
    if script.suffix != ".py" or not script.is_file():
        raise ConfigError(
            "a SageMaker job runs an existing Python script file; got "
            f"{str(script)!r}. Pass the path of a `.py` file."
        )
    source_dir = script.parent
    if config.image_uri is None and not (source_dir / "requirements.txt").is_file():
        raise ConfigError(
            "the training image installs the packages listed in requirements.txt beside the "
            f"script, and accel is not in the image; got no requirements.txt in "
            f"{str(source_dir)!r}. Write one with the line `accel` (and your other packages), "
            "or set image_uri to an image that has accel."
        )
    precision = PrecisionType.parse(
        args.mixed_precision or config.mixed_precision, "mixed_precision"
    ).value
    from accel_state import environment_variables as contract

    debug = bool(args.debug) if getattr(args, "debug", None) is not None else config.debug
    environment = {
        str(contract.ACCEL_MIXED_PRECISION): precision,
        str(contract.ACCEL_USE_CPU): contract.env_text(bool(config.use_cpu)),
        str(contract.ACCEL_DEBUG_MODE): contract.env_text(debug),
        **config.dynamo().environment(),
    }
    if config.gpu_ids not in ("all", "", None) and not config.use_cpu:
        environment["CUDA_VISIBLE_DEVICES"] = str(config.gpu_ids)
    distribution = None
    if config.distributed_type == SageMakerDistributedType.DATA_PARALLEL.value:
        distribution = {"smdistributed": {"dataparallel": {"enabled": True}}}
    inputs = None
    if config.sagemaker_inputs_file:
        inputs = read_tsv(config.sagemaker_inputs_file, "sagemaker_inputs_file", ("name", "s3"))
    metrics = None
    if config.sagemaker_metrics_file:
        rows = read_tsv(config.sagemaker_metrics_file, "sagemaker_metrics_file", ("name", "regex"))
        metrics = [{"Name": name, "Regex": regex} for name, regex in rows.items()]
    kwargs: dict[str, Any] = {
        "image_uri": config.image_uri,
        "entry_point": script.name,
        "source_dir": str(source_dir.resolve()),
        "role": config.iam_role_name,
        "transformers_version": config.transformers_version,
        "pytorch_version": config.pytorch_version,
        "py_version": config.py_version,
        "base_job_name": config.base_job_name,
        "instance_count": config.num_machines,
        "instance_type": config.ec2_instance_type,
        "debugger_hook_config": False,
        "distribution": distribution,
        "hyperparameters": hyperparameters(list(args.training_script_args or [])),
        "environment": environment,
        "metric_definitions": metrics,
    }
    if config.additional_args:
        kwargs = dict(merge_dicts(dict(config.additional_args), kwargs))
    return kwargs, inputs


def build_estimator(
    sagemaker_config: SageMakerConfig, args: Any, session: Any = None
) -> tuple[Any, dict[str, str] | None]:
    """Build the ``sagemaker.huggingface.HuggingFace`` estimator of a launch (nothing is sent
    to AWS until ``fit``).

    Args:
        sagemaker_config: The checked SageMaker config.
        args: Parsed ``accel launch`` arguments.
        session: A ``sagemaker.Session``; default: one for the config's region and the
            caller's credentials (see `credentials`).

    Returns:
        ``(estimator, inputs of fit)``.
    """
    kwargs, inputs = prepare_sagemager_args_inputs(sagemaker_config, args)
    try:
        import boto3
        import sagemaker
        from sagemaker.huggingface import HuggingFace
    except ImportError:
        raise ConfigError(
            "a SageMaker launch needs the SageMaker Python SDK v2, which is not installed; "
            f"got compute_environment: AMAZON_SAGEMAKER. Install it: {INSTALL}"
        ) from None
    if session is None:
        boto = boto3.Session(
            region_name=sagemaker_config.region, **credentials(sagemaker_config, args)
        )
        session = sagemaker.Session(boto_session=boto)
    try:
        estimator = HuggingFace(**kwargs, sagemaker_session=session)
    except (ValueError, TypeError) as err:
        raise ConfigError(
            f"the SageMaker SDK refused the job's settings: {err}. Fix the matching key of "
            "the config file (versions, instance type, additional_args)."
        ) from None
    return estimator, inputs


def explain_job(kwargs: Mapping[str, Any], inputs: Mapping[str, str] | None) -> str:
    """The estimator arguments and inputs of a SageMaker launch, one per line."""
    lines = ["SageMaker job (sagemaker.huggingface.HuggingFace):"]
    lines += [f"  {name}: {kwargs[name]!r}" for name in sorted(kwargs)]
    lines.append(f"fit inputs: {dict(inputs) if inputs else None!r}")
    return "\n".join(lines)


def launch_on_sagemaker(path: Path, args: Any) -> int:
    """``accel launch`` under a SageMaker config file: submit the job (``--explain``: print
    what would be submitted, without contacting AWS); return the exit code."""
    from ..configs._config_file import read_raw

    config = sagemaker_config_from_dict(read_raw(path), str(path))
    if args.explain:
        kwargs, inputs = prepare_sagemager_args_inputs(config, args)
        print(explain_job(kwargs, inputs))
        return 0
    estimator, inputs = build_estimator(config, args)
    estimator.fit(inputs=inputs)
    print(f"accel launch: the model of the SageMaker job is at {estimator.model_data}")
    return 0


def sagemaker_config_path(args: Any) -> Path | None:
    """The config file of this launch when it describes a SageMaker launch, else None."""
    from ..configs._config_file import default_config_file, read_raw

    given = getattr(args, "config_file", None)
    path = Path(given) if given else default_config_file()
    if not path.is_file():
        return None
    data = read_raw(path)
    return path if isinstance(data, dict) and is_sagemaker_file(data) else None
