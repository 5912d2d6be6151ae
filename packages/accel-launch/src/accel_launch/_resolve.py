"""Merge defaults, the config file and flags into one launch plan, remembering where each
value came from."""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel_state import environment_variables as contract
from accel_state import unsupported_distributed_type

from ._errors import ConfigError
from .configs._config_file import (
    LaunchConfig,
    check_layout,
    default_config_file,
    load_config_file,
    read_raw,
)
from .configs._engine_configs import SECTIONS, section_flags
from .configs._limits import (
    check_machines,
    check_processes_per_machine,
    local_accelerators,
    usable_cpus,
)
from .configs._migrate import migrate
from .configs._tpu_settings import TPU_FIELDS
from .launchers._cluster import SlurmBatch, SlurmStep, detect_slurm, detect_slurm_batch

# Flags whose names are not the config field they set.
_FLAG_TO_FIELD = {
    "cpu": "use_cpu",
    "tpu_cluster": "tpu_use_cluster",
    "vm": "tpu_vm",
    "env": "tpu_env",
}
_XLA_FLAGS = ("tpu", "tpu_cluster")
"""Flags that make the run an XLA one (``--tpu_cluster`` launches on a pod)."""
_NOT_SETTINGS = {
    "config_file",
    "training_script",
    "training_script_args",
    "explain",
    "quiet",
    "module",
    "no_python",
    "multi_gpu",
    "func",
    "command",
    "subcommand",
}
_ENGINE_FLAGS = {
    "use_deepspeed": "DEEPSPEED",
    "use_fsdp": "FSDP",
    "use_megatron_lm": "MEGATRON_LM",
}
_SECTION_ENGINE = {
    "deepspeed_config": "DEEPSPEED",
    "fsdp_config": "FSDP",
    "megatron_lm_config": "MEGATRON_LM",
}
_ENGINE_VARIABLE = {
    "DEEPSPEED": contract.ACCEL_USE_DEEPSPEED,
    "FSDP": contract.ACCEL_USE_FSDP,
    "MEGATRON_LM": contract.ACCEL_USE_MEGATRON_LM,
}


@dataclass
class LaunchPlan:
    """A resolved configuration with the origin of each value."""

    config: LaunchConfig
    """The merged, validated configuration."""
    sources: dict[str, str] = field(default_factory=dict)
    """For each setting (``section.key`` inside sections): ``default``, ``config file
    <path>``, ``flag --name``, ``SLURM (<variable>)`` or ``derived``."""
    config_path: Path | None = None
    """The config file that was read, if any."""
    slurm: SlurmStep | None = None
    """The SLURM step this launcher runs in, when started by srun."""
    warnings: list[str] = field(default_factory=list)
    """Lines about settings the hardware makes moot (``accel launch: warning: ...``). They are
    printed by `print_warnings` once nothing
    else can refuse the launch, so a refusal stays the first line of its output."""

    def print_warnings(self) -> None:
        """Print the plan's warnings to stderr, once."""
        for line in self.warnings:
            print(line, file=sys.stderr)
        self.warnings.clear()

    def rows(self) -> list[tuple[str, str, str]]:
        """(setting, value, source) for every top-level setting and every set section key."""
        rows = []
        xla = self.config.distributed_type == "XLA"
        for name, value in self.config.to_dict().items():
            if name in TPU_FIELDS and not xla and self.sources.get(name, "default") == "default":
                continue  # TPU settings only clutter the table of another run
            if name in SECTIONS:
                for key, sub in value.items():
                    rows.append(
                        (f"{name}.{key}", repr(sub), self.sources.get(f"{name}.{key}", "default"))
                    )
                continue
            rows.append((name, repr(value), self.sources.get(name, "default")))
        return rows

    def explain(self) -> str:
        """A table of each resolved value and where it came from."""
        rows = self.rows()
        width = max(len(r[0]) for r in rows)
        vwidth = min(40, max(len(r[1]) for r in rows))
        lines = [f"{'setting':<{width}}  {'value':<{vwidth}}  source"]
        lines += [f"{n:<{width}}  {v:<{vwidth}}  {s}" for n, v, s in rows]
        return "\n".join(lines)


def _has_accelerator() -> bool:
    """Whether CUDA (or ROCm) devices are usable; torch is imported only where a driver exists."""
    return local_accelerators() > 0


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> LaunchPlan:
    """Build the launch plan from parsed ``accel launch`` arguments.

    Precedence: defaults < config file (``--config_file``, else the default file if it exists)
    < what ``srun`` says about the machines (under SLURM) < flags. A flag left unset does not
    override anything.
    """
    environ = os.environ if environ is None else environ
    config = LaunchConfig()
    sources = {name: "default" for name in config.to_dict()}
    path: Path | None = None
    if getattr(args, "config_file", None):
        path = Path(args.config_file)
    elif default_config_file().is_file():
        path = default_config_file()
    if path is not None:
        from_file = load_config_file(path)
        raw, _ = migrate(read_raw(path))
        for name in raw:
            if name in SECTIONS:
                setattr(config, name, getattr(from_file, name))
                for key in getattr(from_file, name).to_dict():
                    sources[f"{name}.{key}"] = f"config file {path}"
            elif name in sources:
                setattr(config, name, getattr(from_file, name))
                sources[name] = f"config file {path}"
    given = {k: v for k, v in vars(args).items() if v is not None and k not in _NOT_SETTINGS}
    slurm = detect_slurm(environ)
    if slurm is not None:
        _apply_slurm(config, sources, slurm, given)
    else:
        batch = detect_slurm_batch(environ)
        if batch is not None:
            _apply_slurm_batch(config, sources, batch, given)
    _apply_flags(config, sources, given)
    multi_gpu = bool(getattr(args, "multi_gpu", None))
    if multi_gpu and config.distributed_type == "XLA":
        raise ConfigError(
            "--multi_gpu starts one process per GPU and an XLA run one per XLA device; got "
            f"--multi_gpu with distributed_type XLA ({sources['distributed_type']}). Keep one."
        )
    if not (config.distributed_type == "XLA" and config.tpu_use_cluster):
        _refuse_unsupported(config, sources)  # a pod launch only runs gcloud here
    config.validate()  # before anything imports torch: bad input fails fast
    _check_counts(config, sources, slurm)
    warnings: list[str] = []
    if config.distributed_type != "XLA":  # XLA processes are started by torch_xla
        _derive(config, sources, multi_gpu, warnings)
    config.validate()
    check_layout(config)
    return LaunchPlan(
        config=config, sources=sources, config_path=path, slurm=slurm, warnings=warnings
    )


def _apply_flags(config: LaunchConfig, sources: dict[str, str], given: dict[str, Any]) -> None:
    engines = [flag for flag in _ENGINE_FLAGS if given.get(flag)]
    if len(engines) > 1:
        raise ConfigError(
            "one engine per run: --use_deepspeed, --use_fsdp and --use_megatron_lm exclude each "
            f"other; got {' and '.join('--' + e for e in engines)}. Keep one of them."
        )
    xla = [flag for flag in _XLA_FLAGS if given.get(flag)]
    if xla and (engines or given.get("cpu")):
        other = f"--{engines[0]}" if engines else "--cpu"
        raise ConfigError(
            f"--{xla[0]} runs the script on XLA devices, which excludes {other}; got both. "
            f"Keep one of them."
        )
    if engines:
        config.distributed_type = _ENGINE_FLAGS[engines[0]]
        sources["distributed_type"] = f"flag --{engines[0]}"
    elif xla:
        config.distributed_type = "XLA"
        sources["distributed_type"] = f"flag --{xla[0]}"
    by_flag = section_flags()
    for flag, value in given.items():
        if flag in _ENGINE_FLAGS:
            continue
        if flag in by_flag:
            section, key = by_flag[flag]
            setattr(getattr(config, section), key, value)
            sources[f"{section}.{key}"] = f"flag --{flag}"
            continue
        target = _FLAG_TO_FIELD.get(flag, flag)
        if target not in sources:
            continue
        if isinstance(getattr(config, target), bool) and value is False and flag != "tpu_cluster":
            continue  # an unset switch; --no_tpu_cluster is an explicit false
        setattr(config, target, value)
        sources[target] = "flag --no_tpu_cluster" if value is False else f"flag --{flag}"
    for flag in given:
        section = by_flag.get(flag, ("", ""))[0]
        engine = _SECTION_ENGINE.get(section)
        if engine and config.distributed_type != engine:
            use = {v: k for k, v in _ENGINE_FLAGS.items()}[engine]
            raise ConfigError(
                f"--{flag} is an option of {engine}, but this run uses distributed_type="
                f"{config.distributed_type}. Add --{use}, or drop --{flag}."
            )


def _apply_slurm(
    config: LaunchConfig, sources: dict[str, str], slurm: SlurmStep, given: dict[str, Any]
) -> None:
    """Take the machines from srun's variables (flags given on the command line still win)."""
    values: dict[str, tuple[Any, str]] = {
        "num_machines": (slurm.num_nodes, "SLURM_NNODES"),
        "machine_rank": (slurm.node_id, "SLURM_NODEID"),
    }
    if slurm.hosts:
        values["main_process_ip"] = (slurm.hosts[0], "first host of SLURM_JOB_NODELIST")
    if slurm.one_task_per_rank:
        values["num_processes"] = (slurm.num_tasks, "SLURM_NTASKS: srun started every rank")
        if given.get("num_processes") not in (None, slurm.num_tasks):
            raise ConfigError(
                f"srun started {slurm.num_tasks} tasks, one per rank, so the run has "
                f"{slurm.num_tasks} processes; got --num_processes {given['num_processes']}. "
                f"Drop --num_processes, or start one task per machine (srun --ntasks-per-node=1)."
            )
    elif sources["num_processes"] == "default" and "num_processes" not in given:
        per_node = slurm.gpus_on_node or local_accelerators() or 1
        values["num_processes"] = (
            per_node * slurm.num_nodes,
            f"{per_node} per machine x SLURM_NNODES",
        )
    if config.main_process_port in (None, 0) and "main_process_port" not in given:
        values["main_process_port"] = (slurm.port, "SLURM_JOB_ID (20000 + id % 10000)")
    for name, (value, origin) in values.items():
        setattr(config, name, value)
        sources[name] = f"SLURM ({origin})"


def _apply_slurm_batch(
    config: LaunchConfig, sources: dict[str, str], batch: SlurmBatch, given: dict[str, Any]
) -> None:
    """In a batch script, take the processes from the allocation of its one machine.

    A batch script runs on the first machine of the job only, so a job of several machines
    needs one launcher per machine, started by ``srun``.
    """
    if batch.num_nodes > 1:
        if "num_machines" in given:
            return  # the user drives the topology by flags
        raise ConfigError(
            f"an sbatch script runs on the first machine of its job only; got `accel launch` "
            f"in the batch script of job {batch.job_id}, which holds {batch.num_nodes} "
            "machines. Start one launcher per machine: `srun --ntasks-per-node=1 accel launch "
            "...` (see examples/slurm/submit_multinode.sh), or set ACCEL_IGNORE_SLURM=1 and pass "
            "the topology flags yourself."
        )
    values: dict[str, tuple[Any, str]] = {}
    if sources["num_processes"] == "default" and "num_processes" not in given:
        if batch.num_tasks:
            values["num_processes"] = (batch.num_tasks, "SLURM_NTASKS of the batch job")
        elif batch.gpus_on_node:
            values["num_processes"] = (batch.gpus_on_node, "SLURM_GPUS_ON_NODE of the batch job")
    if config.main_process_port in (None, 0) and "main_process_port" not in given:
        values["main_process_port"] = (batch.port, "SLURM_JOB_ID (20000 + id % 10000)")
    for name, (value, origin) in values.items():
        setattr(config, name, value)
        sources[name] = f"SLURM ({origin})"


def _check_counts(config: LaunchConfig, sources: dict[str, str], slurm: SlurmStep | None) -> None:
    """Refuse machine and process counts this machine cannot run (see `_limits`)."""
    if slurm is not None and slurm.one_task_per_rank:
        return  # srun already started every rank: nothing is started here
    machines = config.num_machines
    origin = sources.get("num_machines", "default")
    check_machines(
        machines,
        who=f"num_machines (from the {origin})",
        fix="Pass the number of machines the run uses: --num_machines N",
    )
    origin = sources.get("num_processes", "default")
    check_processes_per_machine(
        config.num_processes // machines,
        who=f"num_processes={config.num_processes} over num_machines={machines} (from the "
        f"{origin})",
        fix=lambda limit: (
            f"Pass --num_processes {limit * machines} or fewer (the total over all "
            f"{machines} machine(s))"
        ),
    )


def _refuse_unsupported(config: LaunchConfig, sources: dict[str, str]) -> None:
    """Refuse a distributed type no process of this version would use, in accel-state's words."""
    origin = sources.get("distributed_type", "default")
    if origin.startswith("flag "):
        got = origin[len("flag ") :]
    else:
        got = f"distributed_type {config.distributed_type!r} from the {origin}"
    message = unsupported_distributed_type(str(config.distributed_type), got)
    if message is not None:
        raise ConfigError(message)


def _derive(
    config: LaunchConfig, sources: dict[str, str], multi_gpu: bool, warnings: list[str]
) -> None:
    """Fill what the hardware decides, so the plan states what the processes will use; add to
    ``warnings`` what the hardware makes moot."""
    accelerator = _has_accelerator()
    if multi_gpu and config.use_cpu:
        origin = sources.get("use_cpu", "default")
        cpu, fix = "--cpu", ""
        if not origin.startswith("flag"):
            cpu = f"use_cpu: true ({origin})"
            if origin.startswith("config file "):
                fix = f", or set use_cpu: false in {origin.removeprefix('config file ')}"
        raise ConfigError(
            f"--multi_gpu runs one process per GPU, but {cpu} is set; got --multi_gpu. Drop "
            f"--multi_gpu (several CPU processes need only --num_processes N){fix}."
        )
    if config.gpu_ids not in ("all", "", None) and not accelerator:
        warnings.append(
            f"accel launch: warning: gpu_ids {config.gpu_ids} "
            f"({sources.get('gpu_ids', 'default')}) names GPUs, but this machine has none; "
            "the processes run on CPU and gpu_ids is not used."
        )
    if multi_gpu and not accelerator:
        # As the reference does: a script written for a GPU machine still runs on a laptop.
        warnings.append(
            "accel launch: warning: --multi_gpu found no GPU on this machine; the "
            f"{config.num_processes} process(es) run on CPU."
        )
    if multi_gpu and config.distributed_type == "NO":
        config.distributed_type = "MULTI_GPU"
        sources["distributed_type"] = "flag --multi_gpu"
    if not config.use_cpu and not accelerator:
        config.use_cpu = True
        sources["use_cpu"] = "derived (no accelerator)"
    if config.distributed_type == "NO" and config.num_processes > 1:
        config.distributed_type = "MULTI_CPU" if config.use_cpu else "MULTI_GPU"
        sources["distributed_type"] = "derived"
    if config.use_cpu and config.distributed_type in ("MULTI_GPU", "MULTI_XPU"):
        origin = sources.get("distributed_type", "default")
        config.distributed_type = "MULTI_CPU"
        sources["distributed_type"] = f"derived (processes run on CPU; {origin} said GPU)"
    if config.num_processes == 1 and config.distributed_type in ("MULTI_CPU", "MULTI_GPU"):
        config.distributed_type = "NO"
        sources["distributed_type"] = "derived"
    if config.num_processes == 1 and config.distributed_type == "FSDP":
        config.distributed_type = "NO"  # what the Accelerator runs: nothing to shard over
        sources["distributed_type"] = "derived (FSDP on one process trains plainly)"


def check_port_free(host: str, port: int) -> None:
    """Raise [`ConfigError`][accel_launch.ConfigError] when ``port`` cannot be bound on this machine."""
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
    """Environment variables through which the configuration reaches every process.

    Every name is a constant of ``accel_state.environment_variables`` (the table of
    ``docs/launch.md`` is generated from it); the state and plugins read them in the processes.
    """
    env: dict[str, str] = {
        contract.ACCEL_MIXED_PRECISION: str(config.mixed_precision),
        contract.ACCEL_USE_CPU: contract.env_text(bool(config.use_cpu)),
        contract.ACCEL_DEBUG_MODE: contract.env_text(bool(config.debug)),
        contract.ACCEL_DISTRIBUTED_TYPE: str(config.distributed_type),
    }
    local = max(1, config.num_processes // config.num_machines)
    threads = config.num_cpu_threads_per_process
    if threads is None:
        threads = max(1, usable_cpus() // local)
    env["OMP_NUM_THREADS"] = str(threads)
    if config.gpu_ids not in ("all", "", None) and not config.use_cpu:
        env["CUDA_VISIBLE_DEVICES"] = str(config.gpu_ids)
    env.update(config.dynamo_config.environment())
    env.update(config.parallelism_config.environment())
    for section, engine in _SECTION_ENGINE.items():
        if config.distributed_type == engine:
            env[_ENGINE_VARIABLE[engine]] = "1"
            env.update(getattr(config, section).environment())
    return env


CPU_OPENMP_ENVIRONMENT = {"KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": "1"}
"""Intel OpenMP settings of a launch told to run on the CPU: each thread pinned to one core,
and a thread sleeps 1 ms after its work instead of spinning (the reference sets the same)."""


def cpu_openmp_environment(
    plan: LaunchPlan, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The Intel OpenMP variables for the processes when the launch was told to use the CPU
    (``--cpu`` or ``use_cpu: true``; not when the CPU was only derived from the hardware), less
    those the user's environment already sets."""
    environ = os.environ if environ is None else environ
    origin = plan.sources.get("use_cpu", "default")
    if not plan.config.use_cpu or origin == "default" or origin.startswith("derived"):
        return {}
    return {k: v for k, v in CPU_OPENMP_ENVIRONMENT.items() if k not in environ}


def plan_field_names() -> list[str]:
    """Names of every setting of the plan (for help texts)."""
    return [f.name for f in dataclasses.fields(LaunchConfig)]
