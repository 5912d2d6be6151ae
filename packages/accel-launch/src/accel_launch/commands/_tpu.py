"""TPU pieces of the command line: ``accel tpu-config``, the ``--tpu`` launch flags, the XLA
launch path and ``install_xla``.

A TPU pod is driven through Google Cloud's ``gcloud compute tpus tpu-vm ssh`` command; every
command here is built as a list first, so ``--debug`` (``tpu-config``) and ``--explain``
(``launch``) print exactly what would run.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accel_state import environment_variables as contract
from accel_state import patch_environment, torch_xla_module

from .._errors import ConfigError
from ..configs._config_file import LaunchConfig, default_config_file, load_config_file
from ..configs._tpu_settings import check_pod, env_pairs, xla_precision_environment

if TYPE_CHECKING:
    from .._resolve import LaunchPlan


def _file_config(path: str | None) -> LaunchConfig | None:
    """The validated config file of ``accel tpu-config``: ``--config_file``, else the default
    file when it exists."""
    if path is not None:
        return load_config_file(path)
    target = default_config_file()
    return load_config_file(target) if target.is_file() else None


# ------------------------------------------------------------------------------ tpu-config
def add_tpu_config_parser(sub: Any) -> None:
    """Register ``accel tpu-config`` on the subcommands ``sub``."""
    p = sub.add_parser(
        "tpu-config",
        help="Run setup commands on every worker of a TPU pod (gcloud compute tpus tpu-vm ssh).",
    )
    add_tpu_config_arguments(p)
    p.set_defaults(func=tpu_config_command)


def add_tpu_config_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``accel tpu-config``."""
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


def _install_line(version: str) -> str:
    if version == "latest":
        return "pip install -U accel-torch"
    if version == "dev":
        raise ConfigError(
            "--accel_version dev would install from a source repository, which this command "
            "does not do; got 'dev'. Pass latest or a released version such as 0.1.0."
        )
    if not version[:1].isdecimal():
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
    config = _file_config(args.config_file)
    name = args.tpu_name or (config.tpu_name if config else None)
    zone = args.tpu_zone or (config.tpu_zone if config else None)
    # One --command is one line (its words joined), however many words it was given as.
    commands: list[str] = [" ".join(group) for group in args.command or []]
    command_file = args.command_file
    if not commands and not command_file and config is not None:
        command_file = config.command_file
        commands = list(config.commands or [])
    if command_file:
        commands = _read_commands(command_file)
    for label, value, flag in (("TPU name", name, "--tpu_name"), ("zone", zone, "--tpu_zone")):
        if not value:
            raise ConfigError(
                f"accel tpu-config needs the {label} of the pod; got none from the flags or the "
                f"config file. Pass {flag}, or set it with `accel config`."
            )
    check_pod(name, zone)
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


def _read_commands(path: str) -> list[str]:
    from ..configs._config_bounds import check_file_size, check_regular_file

    check_regular_file(Path(path), "command_file")
    check_file_size(Path(path))
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"command_file must be a readable text file of commands, one per line; got "
            f"{path!r} ({err.__class__.__name__}: {err}). Pass an existing file."
        ) from None
    return [line for line in text.splitlines() if line.strip()]


def run_gcloud(command: list[str]) -> int:
    """Run a gcloud command; return its exit code.

    Raises:
        ConfigError: ``gcloud`` is not on ``PATH``, with the fix.
    """
    return _run_gcloud(command)


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


def tpu_pod_command(plan: LaunchPlan, args: argparse.Namespace) -> list[str]:
    """The gcloud command that starts ``accel launch --tpu --no_tpu_cluster`` on the workers."""
    config = plan.config
    name, zone = config.tpu_name, config.tpu_zone
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
    env = {
        **xla_precision_environment(config.mixed_precision, config.downcast_bf16),
        **env_pairs(config.tpu_env or []),
    }
    remote = [*(["sudo"] if config.tpu_use_sudo else []), "accel", "launch", "--tpu"]
    remote += ["--no_tpu_cluster", "--main_training_function", config.main_training_function]
    if plan.sources.get("num_processes", "default") != "default":
        remote += ["--num_processes", str(config.num_processes)]
    if config.debug:
        remote += ["--debug"]
    remote += [args.training_script, *args.training_script_args]
    exports = [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    line = "; ".join([*exports, shlex.join(remote)])
    worker = ",".join(config.tpu_vm) if config.tpu_vm else "all"
    return gcloud_ssh_command(str(name), str(zone), line, worker=worker)


def launch_tpu(plan: LaunchPlan, args: argparse.Namespace) -> int:
    """``accel launch`` of an XLA run: torch_xla's spawn on this machine's devices, or
    ``accel launch --tpu`` started on every VM of a pod through gcloud."""
    config = plan.config
    if config.tpu_use_cluster:
        command = tpu_pod_command(plan, args)
        if args.explain:
            print(f"{plan.explain()}\n\nlauncher: gcloud\ncommand: {shlex.join(command)}")
            return 0
        return _run_gcloud(command)
    if args.no_python:
        raise ConfigError(
            "--tpu runs a function of a Python script (imported, then spawned on each XLA "
            "device); got --no_python. Drop --no_python."
        )
    if not args.training_script:
        raise ConfigError("--tpu needs the training script; got none. Pass it last.")
    env = {
        contract.ACCEL_DISTRIBUTED_TYPE: "XLA",
        **xla_precision_environment(config.mixed_precision, config.downcast_bf16),
        **env_pairs(config.tpu_env or []),
    }
    if config.debug:
        env[contract.ACCEL_DEBUG_MODE] = contract.env_text(True)
    function_name = config.main_training_function
    # torch_xla's PJRT spawn runs one process, or one per device of this machine.
    one = config.num_processes == 1 and plan.sources.get("num_processes") != "default"
    if args.explain:
        spawn = "one process" if one else "one process per XLA device"
        shown = " ".join(f"{k}={v}" for k, v in sorted(env.items()))
        print(
            f"{plan.explain()}\n\nlauncher: xmp.spawn ({spawn})\n"
            f"function: {function_name} of {args.training_script}\nenvironment: {shown}"
        )
        return 0
    function = _main_function(args.training_script, bool(args.module), function_name)
    sys.argv = [args.training_script, *args.training_script_args]
    xmp = torch_xla_module("distributed.xla_multiprocessing")
    with patch_environment(**env):
        xmp.spawn(_Replica(function), args=(), nprocs=1 if one else None)
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
        from importlib.metadata import version as installed_version  # only for this

        version = torch_version or installed_version("torch")
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
    "add_tpu_config_arguments",
    "add_tpu_config_parser",
    "add_tpu_launch_arguments",
    "gcloud_ssh_command",
    "install_xla",
    "launch_tpu",
    "run_gcloud",
    "tpu_config_command",
    "tpu_config_plan",
    "tpu_pod_command",
    "xla_install_commands",
]
