"""TPU pieces of the command line: ``accel tpu-config``, the ``--tpu`` launch flags, the XLA
launch path and ``install_xla``.

A TPU pod is driven through Google Cloud's ``gcloud compute tpus tpu-vm ssh`` command; every
command here is built as a list first, so ``--debug`` (``tpu-config``) and ``--explain``
(``launch``) print exactly what would run.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from accel_state import environment_variables as contract
from accel_state import patch_environment, torch_xla_module, unsupported_distributed_type

from ._config_file import default_config_file
from ._errors import ConfigError

_TPU_KEYS = ("tpu_name", "tpu_zone", "command_file", "commands", "main_training_function")


def _config_tpu_keys(path: str | None) -> dict[str, Any]:
    """The TPU keys of a config file (the reference's names), or nothing without a file."""
    target = Path(path) if path is not None else default_config_file()
    if not target.is_file():
        if path is not None:
            raise ConfigError(
                f"--config_file must name an existing file; got {path!r}. Pass the file that "
                "`accel config` wrote, or leave --config_file out."
            )
        return {}
    data = yaml.safe_load(target.read_text()) or {}
    return {k: data[k] for k in _TPU_KEYS if isinstance(data, dict) and data.get(k) is not None}


# ------------------------------------------------------------------------------ tpu-config
def add_tpu_config_parser(sub: Any) -> None:
    """Register ``accel tpu-config`` on the subcommands ``sub``."""
    p = sub.add_parser(
        "tpu-config",
        help="Run setup commands on every worker of a TPU pod (gcloud compute tpus tpu-vm ssh).",
    )
    p.add_argument("--config_file", default=None, help="Config file with tpu_name, tpu_zone.")
    p.add_argument("--tpu_name", default=None, help="The TPU (default: the config file's).")
    p.add_argument("--tpu_zone", default=None, help="Its zone (default: the config file's).")
    p.add_argument("--use_alpha", action="store_true", help="Use `gcloud alpha`.")
    p.add_argument("--command_file", default=None, help="File of commands, one per line.")
    p.add_argument("--command", action="append", nargs="+", help="A command to run (repeatable).")
    p.add_argument(
        "--install_accel",
        "--install_accelerate",
        dest="install_accel",
        action="store_true",
        help="pip install accel-torch on every worker first.",
    )
    p.add_argument(
        "--accel_version",
        "--accelerate_version",
        dest="accel_version",
        default="latest",
        help="Version of accel to install: latest (default) or a version such as 0.1.0.",
    )
    p.add_argument(
        "--debug", action="store_true", help="Print the gcloud command instead of running it."
    )
    p.set_defaults(func=tpu_config_command)


def _install_line(version: str) -> str:
    if version == "latest":
        return "pip install -U accel-torch"
    if version == "dev":
        raise ConfigError(
            "--accel_version dev would install from a source repository, which this command "
            "does not do; got 'dev'. Pass latest or a released version such as 0.1.0."
        )
    if not version[:1].isdigit():
        raise ConfigError(
            f"--accel_version must be latest or a version number; got {version!r}. Use e.g. 0.1.0."
        )
    return f"pip install accel-torch=={version}"


def gcloud_ssh_command(
    tpu_name: str, tpu_zone: str, remote: str, *, use_alpha: bool = False, worker: str = "all"
) -> list[str]:
    """``gcloud [alpha] compute tpus tpu-vm ssh NAME --zone ZONE --command REMOTE --worker W``."""
    return [
        "gcloud",
        *(["alpha"] if use_alpha else []),
        "compute",
        "tpus",
        "tpu-vm",
        "ssh",
        tpu_name,
        "--zone",
        tpu_zone,
        "--command",
        remote,
        "--worker",
        worker,
    ]


def tpu_config_plan(args: argparse.Namespace) -> list[str]:
    """The gcloud command ``accel tpu-config`` runs for ``args`` (flags over the config file).

    Raises:
        ConfigError: without a TPU name or zone, or without any command to run.
    """
    defaults = _config_tpu_keys(args.config_file)
    name = args.tpu_name or defaults.get("tpu_name")
    zone = args.tpu_zone or defaults.get("tpu_zone")
    # One --command is one line (its words joined), however many words it was given as.
    commands: list[str] = [" ".join(group) for group in args.command or []]
    command_file = args.command_file or (None if commands else defaults.get("command_file"))
    if command_file:
        commands = Path(command_file).read_text().splitlines()
    elif not commands:
        commands = list(defaults.get("commands") or [])
    for label, value, flag in (("TPU name", name, "--tpu_name"), ("zone", zone, "--tpu_zone")):
        if not value:
            raise ConfigError(
                f"accel tpu-config needs the {label} of the pod; got none from the flags or the "
                f"config file. Pass {flag}, or set it with `accel config`."
            )
    if not commands:
        raise ConfigError(
            "accel tpu-config needs something to run on the pod; got neither --command nor "
            "--command_file (nor commands in the config file). Pass --command 'pip list'."
        )
    lines = ["cd /usr/share"]
    if args.install_accel:
        lines.append(_install_line(str(args.accel_version)))
    lines += commands
    return gcloud_ssh_command(str(name), str(zone), "; ".join(lines), use_alpha=args.use_alpha)


def tpu_config_command(args: argparse.Namespace) -> int:
    """Run (or with ``--debug`` print) the pod setup command."""
    command = tpu_config_plan(args)
    if args.debug:
        print(f"Running {shlex.join(command)}")
        return 0
    return _run_gcloud(command)


def _run_gcloud(command: list[str]) -> int:
    try:
        return subprocess.run(command, check=False).returncode
    except FileNotFoundError:
        raise ConfigError(
            "TPU pods are driven with Google Cloud's gcloud command; got no `gcloud` on PATH. "
            "Install the Google Cloud CLI, or pass --debug / --explain to print the command."
        ) from None


# ---------------------------------------------------------------------------- launch flags
def add_tpu_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``--tpu`` group of ``accel launch``."""
    tpu = parser.add_argument_group("TPU / XLA")
    tpu.add_argument(
        "--tpu",
        action="store_true",
        default=None,
        help="Run the script's main function on "
        "the XLA devices of this machine (torch_xla), one replica per device.",
    )
    tpu.add_argument(
        "--tpu_cluster",
        dest="tpu_cluster",
        action="store_true",
        default=None,
        help="Launch on every worker of a TPU pod through gcloud.",
    )
    tpu.add_argument(
        "--no_tpu_cluster",
        dest="tpu_cluster",
        action="store_false",
        help="Run on this worker only (what each pod worker is started with).",
    )
    tpu.add_argument(
        "--tpu_use_sudo", action="store_true", default=None, help="Pod: run with sudo."
    )
    tpu.add_argument("--tpu_name", default=None, help="Pod: the TPU's name.")
    tpu.add_argument("--tpu_zone", default=None, help="Pod: the TPU's zone.")
    tpu.add_argument(
        "--vm",
        action="append",
        default=None,
        help="Pod: a worker to launch on (repeatable; default: all).",
    )
    tpu.add_argument(
        "--env",
        action="append",
        default=None,
        help="Pod: KEY=VALUE set on every worker (repeatable).",
    )
    tpu.add_argument(
        "--main_training_function",
        default=None,
        help="The function of the script that XLA replicas run (default: main).",
    )


def wants_tpu(args: argparse.Namespace) -> bool:
    """Whether ``args`` ask for the XLA launch path (``--tpu`` or ``--tpu_cluster``)."""
    return bool(getattr(args, "tpu", None) or getattr(args, "tpu_cluster", None))


def _check_env(values: list[str]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(
                f"--env takes KEY=VALUE with KEY a variable name; got {item!r}. Use e.g. "
                "--env XLA_USE_BF16=1."
            )
        out[key] = value
    return out


def tpu_pod_command(args: argparse.Namespace) -> list[str]:
    """The gcloud command that starts ``accel launch --tpu --no_tpu_cluster`` on the workers."""
    defaults = _config_tpu_keys(args.config_file)
    name = args.tpu_name or defaults.get("tpu_name")
    zone = args.tpu_zone or defaults.get("tpu_zone")
    if not name or not zone:
        raise ConfigError(
            f"--tpu_cluster needs the pod's name and zone; got tpu_name={name!r}, "
            f"tpu_zone={zone!r}. Pass --tpu_name and --tpu_zone (or set them in the config file)."
        )
    if not args.training_script:
        raise ConfigError(
            "--tpu_cluster needs the training script to run; got none. Pass it last: "
            "accel launch --tpu_cluster ... train.py"
        )
    env = _check_env(args.env or [])
    remote = [*(["sudo"] if args.tpu_use_sudo else []), "accel", "launch", "--tpu"]
    remote += ["--no_tpu_cluster"]
    remote += ["--main_training_function", args.main_training_function or "main"]
    if args.num_processes is not None:
        remote += ["--num_processes", str(args.num_processes)]
    remote += [args.training_script, *args.training_script_args]
    exports = [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    line = "; ".join([*exports, shlex.join(remote)])
    worker = ",".join(args.vm) if args.vm else "all"
    return gcloud_ssh_command(str(name), str(zone), line, worker=worker)


def launch_tpu(args: argparse.Namespace) -> int:
    """``accel launch --tpu`` / ``--tpu_cluster``: run on XLA devices, here or on a pod."""
    if args.tpu_cluster:
        command = tpu_pod_command(args)
        if args.explain:
            print(f"launcher: gcloud\ncommand: {shlex.join(command)}")
            return 0
        return _run_gcloud(command)
    message = unsupported_distributed_type("XLA", "--tpu")
    if message is not None:
        raise ConfigError(message)
    if args.no_python:
        raise ConfigError(
            "--tpu runs a function of a Python script (imported, then spawned on each XLA "
            "device); got --no_python. Drop --no_python."
        )
    if not args.training_script:
        raise ConfigError("--tpu needs the training script; got none. Pass it last.")
    env = {contract.ACCEL_DISTRIBUTED_TYPE: "XLA", **_check_env(args.env or [])}
    if args.debug:
        env[contract.ACCEL_DEBUG_MODE] = contract.env_text(True)
    function_name = args.main_training_function or "main"
    if args.explain:
        print(
            f"launcher: xmp.spawn\nfunction: {function_name} of {args.training_script}\n"
            f"environment: {' '.join(f'{k}={v}' for k, v in sorted(env.items()))}"
        )
        return 0
    function = _main_function(args.training_script, bool(args.module), function_name)
    sys.argv = [args.training_script, *args.training_script_args]
    xmp = torch_xla_module("distributed.xla_multiprocessing")
    nprocs = 1 if args.num_processes == 1 else None
    with patch_environment(**env):
        xmp.spawn(_Replica(function), args=(), nprocs=nprocs)
    return 0


class _Replica:
    """Picklable target of ``xmp.spawn``: calls the script's function without the ordinal."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def __call__(self, index: int) -> None:
        self.function()


def _main_function(script: str, module: bool, name: str) -> Any:
    if module:
        imported = importlib.import_module(script)
    else:
        path = Path(script).resolve()
        if not path.is_file():
            raise ConfigError(f"the training script must exist; got {script!r}. Check the path.")
        sys.path.insert(0, str(path.parent))
        imported = importlib.import_module(path.stem)
    function = getattr(imported, name, None)
    if not callable(function):
        raise ConfigError(
            f"--tpu runs the script's function {name!r}, which {script!r} does not define; "
            f"got --main_training_function {name}. Define it, or pass the name of the function "
            "to run."
        )
    return function


# ------------------------------------------------------------------------------ install_xla
def xla_install_commands(
    upgrade: bool = False, torch_version: str | None = None
) -> list[list[str]]:
    """The pip commands ``install_xla`` runs: torch upgraded first when ``upgrade``, then the
    torch_xla release of the installed torch's ``major.minor`` from PyPI."""
    pip = [sys.executable, "-m", "pip", "install"]
    commands = [[*pip, "-U", "torch"]] if upgrade else []
    if upgrade:
        xla = "torch-xla"  # the new torch's version is known only after the upgrade
    else:
        version = torch_version or importlib.metadata.version("torch")
        major_minor = ".".join(version.split("+")[0].split(".")[:2])
        xla = f"torch-xla=={major_minor}.*"
    return [*commands, [*pip, xla]]


def _in_colab() -> bool:
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return bool(get is not None and "google.colab" in str(get()))


def install_xla(upgrade: bool = False) -> None:
    """Install the torch_xla wheel that matches torch, in a Google Colab notebook.

    Args:
        upgrade: Upgrade torch first, then install the newest torch_xla.

    Raises:
        RuntimeError: outside Google Colab (as the reference library does), or if pip fails.
    """
    if not _in_colab() and not os.environ.get("COLAB_RELEASE_TAG"):
        raise RuntimeError(
            "install_xla installs torch_xla in a Google Colab notebook only; got a Python "
            "outside Colab. Elsewhere run: pip install torch-xla (matching your torch)."
        )
    for command in xla_install_commands(upgrade):
        subprocess.run(command, check=True)


__all__ = [
    "add_tpu_config_parser",
    "add_tpu_launch_arguments",
    "gcloud_ssh_command",
    "install_xla",
    "launch_tpu",
    "tpu_config_command",
    "tpu_config_plan",
    "tpu_pod_command",
    "wants_tpu",
    "xla_install_commands",
]
