"""Merge defaults, the config file and flags into one launch plan, remembering where each
value came from."""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._config import ConfigError, LaunchConfig, default_config_file, load_config_file

# Flags whose names are not the config field they set.
_FLAG_TO_FIELD = {"cpu": "use_cpu", "multi_gpu": None, "module": None, "no_python": None}
_DYNAMO_FLAGS = ("dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph", "dynamo_use_dynamic")


@dataclass
class LaunchPlan:
    """A resolved configuration with the origin of each value."""

    config: LaunchConfig
    """The merged, validated configuration."""
    sources: dict[str, str] = field(default_factory=dict)
    """For each field: ``default``, ``config file <path>``, ``flag --name`` or ``derived``."""
    config_path: Path | None = None
    """The config file that was read, if any."""

    def explain(self) -> str:
        """A table of each resolved value and where it came from."""
        rows = []
        for name, value in self.config.to_dict().items():
            if isinstance(value, dict) and not value:
                continue
            rows.append((name, repr(value), self.sources.get(name, "default")))
        width = max(len(r[0]) for r in rows)
        vwidth = min(40, max(len(r[1]) for r in rows))
        lines = [f"{'setting':<{width}}  {'value':<{vwidth}}  source"]
        lines += [f"{n:<{width}}  {v:<{vwidth}}  {s}" for n, v, s in rows]
        return "\n".join(lines)


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def resolve(args: argparse.Namespace) -> LaunchPlan:
    """Build the launch plan from parsed ``accel launch`` arguments.

    Precedence: defaults < config file (``--config_file``, else the default file if it exists)
    < flags. A flag left unset does not override the file.
    """
    config = LaunchConfig()
    sources = {name: "default" for name in config.to_dict()}
    path: Path | None = None
    if getattr(args, "config_file", None):
        path = Path(args.config_file)
    elif default_config_file().is_file():
        path = default_config_file()
    if path is not None:
        from_file = load_config_file(path)
        raw_keys = _keys_in_file(path)
        for name in raw_keys:
            if hasattr(from_file, name):
                setattr(config, name, getattr(from_file, name))
                sources[name] = f"config file {path}"
    for flag, value in vars(args).items():
        if value is None or flag in ("config_file", "training_script", "training_script_args"):
            continue
        target = _FLAG_TO_FIELD.get(flag, flag)
        if flag in _DYNAMO_FLAGS:
            config.dynamo_config = {**config.dynamo_config, flag: value}
            sources["dynamo_config"] = "flag --" + flag
            continue
        if target is None or target not in sources:
            continue
        if isinstance(getattr(config, target), bool) and value is False:
            continue
        setattr(config, target, value)
        sources[target] = f"flag --{flag}"
    config.validate()  # before anything imports torch: bad input fails fast
    _derive(config, sources)
    config.validate()
    return LaunchPlan(config=config, sources=sources, config_path=path)


def _keys_in_file(path: Path) -> list[str]:
    import json

    import yaml

    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return list((data or {}).keys())


def _derive(config: LaunchConfig, sources: dict[str, str]) -> None:
    if config.distributed_type == "NO" and config.num_processes > 1:
        config.distributed_type = (
            "MULTI_GPU" if not config.use_cpu and _has_accelerator() else "MULTI_CPU"
        )
        sources["distributed_type"] = "derived"
    if config.num_processes == 1 and config.distributed_type in ("MULTI_CPU", "MULTI_GPU"):
        config.distributed_type = "NO"
        sources["distributed_type"] = "derived"
    if not _has_accelerator() and not config.use_cpu:
        config.use_cpu = True
        sources["use_cpu"] = "derived (no accelerator)"


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`ConfigError` when ``port`` cannot be bound on this machine."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            raise ConfigError(
                f"main_process_port {port} is already in use on this machine, so the rendezvous "
                "cannot start there. Stop the process holding it (`ss -ltnp | grep "
                f":{port}`), or pass another --main_process_port (0 picks a free one on a single "
                "machine)."
            ) from None


def free_port() -> int:
    """A TCP port free on this machine right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def child_environment(config: LaunchConfig) -> dict[str, str]:
    """Environment variables through which the configuration reaches every process."""
    env: dict[str, str] = {
        "ACCEL_MIXED_PRECISION": config.mixed_precision,
        "ACCEL_USE_CPU": "1" if config.use_cpu else "0",
        "ACCEL_DEBUG_MODE": "1" if config.debug else "0",
        "ACCEL_DISTRIBUTED_TYPE": config.distributed_type,
    }
    local = max(1, config.num_processes // config.num_machines)
    threads = config.num_cpu_threads_per_process
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // local)
    env["OMP_NUM_THREADS"] = str(threads)
    if config.gpu_ids not in ("all", "", None) and not config.use_cpu:
        env["CUDA_VISIBLE_DEVICES"] = str(config.gpu_ids)
    for key, value in config.dynamo_config.items():
        env["ACCEL_" + key.upper()] = _env_value(value)
    for prefix, options in (
        ("ACCEL_DEEPSPEED_", config.deepspeed_config),
        ("ACCEL_FSDP_", config.fsdp_config),
    ):
        for key, value in options.items():
            name = key.upper()
            for strip in ("DEEPSPEED_", "FSDP_"):
                if name.startswith(strip):
                    name = name[len(strip) :]
            env[prefix + name] = _env_value(value)
    return env


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def plan_field_names() -> list[str]:
    """Names of every setting of the plan (for help texts)."""
    return [f.name for f in dataclasses.fields(LaunchConfig)]
