"""Every benchmark of ``benchmarks/``, with how ``run.py`` runs it in each mode.

A new ``bench_*.py`` must be added here: ``tests/test_benchmark_registry.py`` fails on a script
no entry covers, and on a flag an entry passes that its script does not define.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: a script, its results page and its sizes."""

    name: str
    """Short name, for ``--only`` and the summary."""
    script: str
    """Path under ``benchmarks/``."""
    page: str
    """Results page it writes, a file name of ``benchmarks/results/``."""
    full: tuple[str, ...] = ()
    """Arguments of ``--full`` (the sizes of the committed results; empty: the defaults)."""
    short: tuple[str, ...] | None = ()
    """Arguments of ``--short`` (seconds of work); None: full mode only (see ``full_only``)."""
    out_flag: str | None = "--out"
    """The script's flag naming the page; None: it always writes its committed page."""
    full_only: str = ""
    """Why the benchmark has no short mode (required when ``short`` is None), or why a short
    run of every benchmark (the CI smoke test) leaves it out: too slow even when small. Such a
    benchmark still runs at its short sizes when named with ``--only``."""
    reference: bool = False
    """It compares against the reference library (``accelerate``, in the ``bench`` group)."""
    deepspeed: bool = False
    """It needs DeepSpeed."""
    processes: int = 1
    """Processes it starts for one measurement (more than 1: gloo process groups)."""
    torchrun: bool = False
    """The script itself must be started under torchrun with ``processes`` processes."""
    covers: tuple[str, ...] = ()
    """Other ``bench_*.py`` scripts (paths under ``benchmarks/``) this entry runs."""
    timeout: float = 3600.0
    """Seconds the full run may take before it is stopped (short runs: ``SHORT_TIMEOUT``)."""


SHORT_TIMEOUT = 120.0
"""Seconds one benchmark may take in short mode."""

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "import_time",
        "foundation/bench_import_time.py",
        "import_time.md",
        short=("--runs", "1"),
    ),
    Benchmark(
        "startup",
        "foundation/bench_startup.py",
        "foundation_startup.md",
        short=("--runs", "1"),
        out_flag="--output",
        reference=True,
        processes=2,
        full_only="2-process launches of torch, accel and the reference: about 145 s here",
    ),
    Benchmark(
        "ecosystem",
        "ecosystem/bench_ecosystem.py",
        "ecosystem.md",
        full=("--runs", "1", "--steps", "40", "--repeats", "2", "--load-repeats", "2"),
        short=tuple(
            "--runs 1 --steps 2 --repeats 1 --one-process-only --hidden 64 --layers 2 "
            "--load-repeats 1".split()
        ),
        full_only="transformers Trainer runs and loads in fresh interpreters, each importing "
        "transformers: minutes even when small",
        reference=True,
        timeout=3600.0,
    ),
    Benchmark(
        "cli",
        "cli/bench_cli.py",
        "cli.md",
        full=("--runs", "2"),
        short=("--runs", "1"),
        full_only="the reference's commands take 6 to 55 s each here: about 125 s at 1 run",
        reference=True,
    ),
    Benchmark(
        "cli_refusals",
        "cli/bench_cli_refusals.py",
        "cli-refusals.md",
        full=("--runs", "3"),
        short=("--runs", "1"),
    ),
    Benchmark(
        "collectives",
        "collectives/bench_collectives.py",
        "collectives.md",
        short=("--iters", "5", "--sizes", "1 KB"),
        reference=True,
        processes=2,
        torchrun=True,
    ),
    Benchmark(
        "watchdog",
        "collectives/bench_watchdog.py",
        "collectives_watchdog.md",
        short=("--iters", "20"),
        reference=True,
        processes=2,
        torchrun=True,
    ),
    Benchmark(
        "dataloader",
        "data/bench_dataloader.py",
        "data.md",
        full=("--processes", "2"),
        short=("--processes", "2", "--samples", "1024", "--epochs", "1", "--rounds", "1"),
        reference=True,
        processes=2,
    ),
    Benchmark(
        "stateful_loader",
        "data/bench_stateful_loader.py",
        "stateful_loader.md",
        short=("--epochs", "1", "--samples", "512"),
        out_flag="--output",
    ),
    Benchmark(
        "checkpointing",
        "checkpointing/bench_save_load.py",
        "checkpointing.md",
        short=("--layers", "2", "--width", "256", "--repeats", "1"),
        out_flag="--output",
        reference=True,
        full_only="fresh processes per library, warm and cold, save and load: about 6 minutes here (each cold read waits 5 s after its eviction)",
    ),
    Benchmark(
        "async_save",
        "checkpointing/bench_async_save.py",
        "checkpointing_async.md",
        short=("--layers", "2", "--width", "256", "--saves", "2", "--stall-only"),
        full_only="three to eight fresh processes (accel, the reference): 90-120 s here when small",
    ),
    Benchmark(
        "checksum",
        "checkpoint_integrity/bench_checksum.py",
        "checkpoint_integrity.md",
        short=("--layers", "2", "--width", "256", "--repeats", "1"),
        full_only="six fresh processes per repeat (accel, the reference): over 120 s here, tiny model",
    ),
    Benchmark(
        "untrusted",
        "untrusted/bench_validation.py",
        "untrusted_files.md",
        full=("--ds-layers", "16", "--ds-width", "2048"),
        short=("--repeats", "1", "--ds-layers", "1", "--ds-width", "64", "--dcp-tensors", "20"),
        deepspeed=True,
        full_only="a DeepSpeed launch: 40 s here with its CPU ops built, minutes when they compile",
    ),
    Benchmark(
        "ddp_step",
        "training/bench_ddp_step.py",
        "training_ddp_step.md",
        short=("--steps", "5", "--warmup", "1", "--rounds", "1", "--blocks", "1"),
        out_flag="--output",
        reference=True,
        processes=2,
        full_only="six 2-process launches per round: over 120 s here even at 5 steps",
    ),
    Benchmark(
        "local_sgd",
        "local_sgd/bench_local_sgd.py",
        "local_sgd.md",
        short=("--rounds", "1", "--blocks", "1", "--steps", "16"),
        out_flag="--output",
        reference=True,
        processes=2,
        full_only="2-process launches of four configurations and their hand-written floors: 2 to 4 minutes here even when small",
    ),
    Benchmark(
        "engines",
        "engines/bench_engines.py",
        "engines.md",
        short=("--steps", "2", "--warmup", "1"),
        reference=True,
        deepspeed=True,
        processes=2,
        full_only="twelve 2-process launches, six with DeepSpeed: over 120 s here even at 2 steps",
    ),
    Benchmark(
        "fsdp",
        "engines/bench_fsdp.py",
        "engines_fsdp.md",
        short=("--steps", "2", "--dim", "64", "--depth", "2", "--batch", "4"),
        reference=True,
        processes=2,
        full_only="several 2-process launches (accel and the reference): over 120 s here even when small",
    ),
    Benchmark(
        "fsdp_profile",
        "engines/bench_fsdp_profile.py",
        "engines_fsdp.md",
        short=("--steps", "2", "--dim", "64", "--depth", "2", "--batch", "4", "--rounds", "1"),
        processes=2,
        full_only="nine 2-process launches per round (DDP and each FSDP2 variant): over 120 s here",
    ),
    Benchmark(
        "context_parallel",
        "parallel/bench_context_parallel.py",
        "context_parallel.md",
        short=("--seq", "256", "--dim", "32", "--layers", "1", "--steps", "1"),
        reference=True,
        processes=2,
        full_only="2-process launches with ring attention, and the unsplit floor and reference: 2 to 3 minutes here even when small",
    ),
    Benchmark(
        "pipeline",
        "pipeline/bench_pipeline.py",
        "pipeline.md",
        short=("--iters", "1", "--chunks", "2", "--layers", "2"),
        reference=True,
        processes=2,
        full_only="four launches, three of 2 processes tracing the model: about 60 s here when small",
    ),
    Benchmark(
        "stage_memory",
        "pipeline/bench_stage_memory.py",
        "pipeline.md",
        short=("--iters", "1", "--layers", "1"),
        reference=True,
        processes=2,
        full_only="three launches loading a checkpoint stage by stage: over 120 s here even when small",
    ),
    Benchmark(
        "restart",
        "fault_tolerance/bench_restart.py",
        "fault_tolerance.md",
        short=("--repeat", "1", "--side-cases", "2"),
        processes=2,
        full_only="launches that kill a process and restart: over 120 s here even at 1 repeat",
    ),
    Benchmark(
        "chaos",
        "fault_tolerance/bench_chaos.py",
        "fault_tolerance.md",
        short=("--runs", "1"),
        processes=2,
        full_only="2-process launches hit by faults and restarted: 20 s to minutes per run here",
        timeout=4 * 3600.0,
    ),
    Benchmark(
        "fp8_step",
        "precision/bench_fp8_step.py",
        "precision.md",
        short=("--steps", "1", "--layers", "1", "--width", "256"),
        reference=True,
        full_only="six fresh processes (accel, the reference, the floor; bf16 and float8): minutes here",
    ),
    Benchmark(
        "quantized_load",
        "precision/bench_quantized_load.py",
        "precision.md",
        short=("--layers", "1", "--width", "256"),
        reference=True,
        full_only="nine fresh processes loading with bitsandbytes (accel, the reference, the floor): minutes here",
    ),
    Benchmark(
        "bigmodel",
        "bigmodel/run_all.py",
        "bigmodel.md",
        short=None,
        out_flag=None,
        full_only=(
            "run_all.py and its scripts have no size or output flags: it always writes the "
            "committed page, with the 2 GiB checkpoint"
        ),
        reference=True,
        covers=(
            "bigmodel/bench_load.py",
            "bigmodel/bench_device_map.py",
            "bigmodel/bench_init_empty.py",
        ),
    ),
    Benchmark(
        "bigmodel_offload_cold",
        "bigmodel/bench_offload_cold.py",
        "bigmodel_offload_cold.md",
        short=None,
        out_flag=None,
        full_only=(
            "four fresh processes per row over a 480 MB checkpoint, each forward from a cold "
            "page cache: about 6 minutes here; it always writes the committed page"
        ),
        reference=True,
    ),
    Benchmark(
        "beyond_ram",
        "bigmodel/bench_beyond_ram.py",
        "bigmodel_beyond_ram.md",
        short=("--short",),
        full_only=(
            "the full run writes a 30 GB checkpoint once (~/.cache/accel/beyond-ram-llama) and "
            "reads most of it per token; even the short run starts four processes importing "
            "transformers"
        ),
        reference=True,
        timeout=6 * 3600.0,
    ),
    Benchmark(
        "bigmodel_offload_checks",
        "bigmodel/bench_offload_checks.py",
        "bigmodel_offload_cold.md",
        # The before side: the last revision whose offload loader had no file checks.
        full=("--baseline", "3d034dd"),
        short=("--layers", "2", "--width", "256", "--repeats", "1", "--cold", "0", "--warm", "2"),
    ),
)


def by_name() -> dict[str, Benchmark]:
    """The registry keyed by name."""
    return {benchmark.name: benchmark for benchmark in BENCHMARKS}
