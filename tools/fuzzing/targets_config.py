"""Targets of configuration: launch config files (YAML and JSON, read as `accel launch` and
`accel config update` do), estimate-memory's `config.json`, DeepSpeed config files, the
environment variables of the contract, and `accel` command lines."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import threading
from pathlib import Path

from .registry import Context, register


def _launch_configs(folder: Path, suffix: str) -> list[bytes]:
    from accel_launch import LaunchConfig

    seeds = []
    variants = [
        {},
        {"distributed_type": "MULTI_CPU", "num_processes": 2, "use_cpu": True},
        {"distributed_type": "FSDP", "num_processes": 2, "mixed_precision": "bf16"},
        {"distributed_type": "DEEPSPEED", "num_processes": 2},
        {
            "num_machines": 2,
            "num_processes": 4,
            "main_process_ip": "10.0.0.1",
            "main_process_port": 29500,
            "machine_rank": 1,
        },
    ]
    for i, fields in enumerate(variants):
        config = LaunchConfig(**fields)
        if fields.get("distributed_type") == "DEEPSPEED":
            config.deepspeed_config.zero_stage = 3
        path = folder / f"config_{i}{suffix}"
        config.save(path)
        seeds.append(path.read_bytes())
    return seeds


def _yaml_prepare(root: Path) -> Context:
    root.mkdir(parents=True, exist_ok=True)
    return Context(_launch_configs(root, ".yaml"), "yaml")


def _json_prepare(root: Path) -> Context:
    root.mkdir(parents=True, exist_ok=True)
    return Context(_launch_configs(root, ".json"), "json")


def _config_run(suffix: str):  # type: ignore[no-untyped-def]
    def run(ctx: Context, data: bytes, scratch: Path) -> None:
        try:
            from accel_launch.configs import _config_file, _migrate
        except ImportError:  # an older tree (--src), before the modules moved to configs/
            from accel_launch import _config_file, _migrate  # type: ignore[attr-defined,no-redef]

        path = scratch / f"config{suffix}"
        path.write_bytes(data)
        _config_file.load_config_file(path)  # accel launch --config_file
        _migrate.migrate(_config_file.read_raw(path))  # accel config update

    return run


register(
    "launch_config_yaml",
    "a YAML launch config (`load_config_file` through the bounded `load_yaml`; "
    "`accel config update`'s `migrate`)",
    _yaml_prepare,
    _config_run(".yaml"),
)
register(
    "launch_config_json",
    "a JSON launch config (`load_config_file`; `accel config update`'s `migrate`)",
    _json_prepare,
    _config_run(".json"),
)


def _estimate_prepare(root: Path) -> Context:
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    small = {"num_hidden_layers": 2}
    configs = [
        GPT2Config(n_layer=2, n_embd=64, n_head=4),
        LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, **small),
        GPTNeoXConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, **small),
    ]
    return Context([c.to_json_string().encode() for c in configs], "json")


def _estimate_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_launch.cli import parse_args
    from accel_launch.commands._estimate_cmd import estimate_rows

    (scratch / "config.json").write_bytes(data)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        estimate_rows(parse_args(["estimate-memory", str(scratch)]))


register(
    "estimate_config",
    "a model's `config.json`: `accel estimate-memory FOLDER`",
    _estimate_prepare,
    _estimate_run,
)


def _deepspeed_prepare(root: Path) -> Context:
    zero3 = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}},
        "bf16": {"enabled": True},
    }
    zero2 = {"train_batch_size": 8, "zero_optimization": {"stage": 2}, "fp16": {"enabled": "auto"}}
    return Context([json.dumps(c, indent=2).encode() for c in (zero3, zero2)], "json")


def _deepspeed_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_state._plugins._deepspeed_json import HfDeepSpeedConfig

    path = scratch / "ds_config.json"
    path.write_bytes(data)
    config = HfDeepSpeedConfig(str(path))
    config.get_value("zero_optimization.stage")
    config.get_value("zero_optimization.offload_param.device")


register(
    "deepspeed_config",
    "a DeepSpeed JSON config file: `HfDeepSpeedConfig` (the plugin's reader)",
    _deepspeed_prepare,
    _deepspeed_run,
)


def _env_prepare(root: Path) -> Context:
    from accel_state.environment_variables import VARIABLES, read_env

    values = ("1", "0", "30", "0.5", "no", "bf16", "MULTI_CPU", "/tmp")
    seeds = []
    for i, spec in enumerate(VARIABLES.values()):
        for value in values:  # the first two values of its vocabulary that it accepts
            try:
                read_env(spec, None, {str(spec): value})
            except ValueError:
                continue
            seeds.append(bytes([i % 256]) + value.encode())
            if len(seeds) % 2 == 0:
                break
    return Context(seeds, {i: "text" for i in range(256)}, list(VARIABLES.values()))


class StartupTraceback(Exception):
    """The hook run at interpreter start raised: ``site`` prints a traceback at every start."""


def _startup_hook(name: str, value: str) -> None:
    """The hook ``accel_as_accelerate.pth`` runs at every interpreter start must never raise
    (``site`` would print a traceback at every start): a bad value is told, not raised."""
    from accel._reexports import _as_accelerate_startup as startup

    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            startup.install_from_environment()
    except Exception as exc:
        raise StartupTraceback(f"{type(exc).__name__}: {exc}") from exc
    finally:
        os.environ.pop(name) if saved is None else os.environ.__setitem__(name, saved)


def _env_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_state.environment_variables import read_env

    spec = ctx.state[data[0] % len(ctx.state)] if data else ctx.state[0]
    value = data[1:].replace(b"\0", b"").decode("utf-8", "surrogateescape")
    name = str(spec)
    try:
        parsed = read_env(spec, None, {name: value})
    except ValueError:
        parsed = None
        raise
    finally:  # the start-up hook reads it too, whether read_env accepts it or not
        if name == "ACCEL_AS_ACCELERATE" and parsed is not True:
            _startup_hook(name, value)
    if name.endswith("TIMEOUT") and isinstance(parsed, (int, float)) and parsed > 0:
        threading.Lock().acquire(timeout=parsed)  # what a timer built from it would be given
        datetime.timedelta(seconds=parsed)


register(
    "environment",
    "one variable of the environment contract (`read_env`; a timeout's value as a timer takes "
    "it; `ACCEL_AS_ACCELERATE` at interpreter start)",
    _env_prepare,
    _env_run,
)

_COMMAND_LINES = (
    ["launch", "--num_processes", "2", "--cpu", "train.py", "--lr", "1e-3"],
    [
        "launch",
        "--cpu",
        "--num_machines",
        "2",
        "--num_processes",
        "4",
        "--machine_rank",
        "1",
        "--main_process_ip",
        "10.0.0.1",
        "--main_process_port",
        "29500",
        "t.py",
    ],
    ["launch", "--use_fsdp", "--mixed_precision", "bf16", "--num_processes", "2", "t.py"],
    ["launch", "--hang_timeout", "60", "--max_restarts", "1", "--monitor_interval", "1", "t.py"],
    ["estimate-memory", "gpt2", "--dtypes", "float32", "int4"],
    ["merge-weights", "ckpt", "out", "--max_shard_size", "5GB"],
    ["config", "default", "--mixed_precision", "fp16"],
)


def _cli_prepare(root: Path) -> Context:
    return Context([b"\0".join(w.encode() for w in argv) for argv in _COMMAND_LINES], "bytes")


def _cli_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_launch import resolve
    from accel_launch.cli import parse_args

    argv = [w.decode("utf-8", "surrogateescape") for w in data.split(b"\0")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        args = parse_args(argv)
        if argv[:1] == ["launch"]:
            resolve(args, environ={})


register(
    "command_line",
    "`accel` command lines: `parse_args`, and `resolve` of a launch (nothing started)",
    _cli_prepare,
    _cli_run,
    allowed=(SystemExit,),
)
