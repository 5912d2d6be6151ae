"""Peak memory per process and throughput: a model loaded stage by stage vs whole.

Run from the repository root (``--group bench`` adds the reference library):

    uv run --group bench python benchmarks/pipeline/bench_stage_memory.py [--iters 3] [--layers 8]

The table replaces its own section of ``benchmarks/results/pipeline.md`` and keeps the rest
(``bench_pipeline.py`` writes the other section).

A Llama decoder built from a config (random weights, about 250 MB in float32) is saved once as a
sharded safetensors checkpoint. Then, each in fresh processes:

- ``whole`` (the floor: the least work that gives the same logits): one process builds the
  model on ``meta`` and loads the whole checkpoint by hand, safetensors' ``safe_open`` shard by
  shard into ``load_state_dict(assign=True)``;
- ``accel``: 2 gloo processes build it on meta and call
  ``prepare_pippy(..., checkpoint=...)``: each loads only its stage;
- ``accelerate``: the reference library's ``prepare_pippy`` on 2 processes; it needs the whole
  model with real weights in every process (loaded with the reference's own
  ``load_checkpoint_in_model``), or the exact reason it cannot run here.

Every process reports its peak resident memory (``ru_maxrss``), its resident memory after the
imports, the empty model and the tracing modules (the baseline: everything but the weights), and the median time of ``--iters``
calls after one warm-up call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Memory per process: stage-only loading vs the whole model"
TITLE = "accel-pipeline: pipelined inference throughput on 2 processes"
NOTE = (
    "Reading the table: `RSS before weights` is measured after the imports, the empty model and "
    "the tracing modules, so `peak - before weights` is what the weights and running cost. The "
    "whole model pays its weights plus about one shard (read before it is copied into the "
    "model); each pipelined process pays only its stage (`weights held`, the distinct storages "
    "it keeps) plus the same shard buffer, one layer's working copy and the trace. The "
    "reference's `prepare_pippy` needs the whole model with real weights in every process, so "
    "its peak per process is at least the whole model's; when it fails, the line above is the "
    "last error line its processes printed (here a peer crashed without printing its own cause)."
)
BATCH, SEQ = 4, 32
CONFIG = dict(
    vocab_size=8000,
    hidden_size=768,
    intermediate_size=2048,
    num_hidden_layers=8,
    num_attention_heads=12,
    num_key_value_heads=4,
    max_position_embeddings=SEQ,
    tie_word_embeddings=False,
    use_cache=False,
)


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _set_layers(layers: int) -> None:
    CONFIG["num_hidden_layers"] = layers


def _heading() -> str:
    return f"{HEADING} ({CONFIG['num_hidden_layers']} layers)"


def _section() -> str:
    """The page's section this script owns, one per model size (``bench_pipeline.py`` owns
    another)."""
    return f"stage_memory_{CONFIG['num_hidden_layers']}_layers"


def _empty_model() -> Any:
    from accel_bigmodel import init_empty_weights
    from transformers import LlamaConfig, LlamaForCausalLM

    with init_empty_weights():
        return LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()


def _batch() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randint(3, CONFIG["vocab_size"], (BATCH, SEQ), generator=generator)


def _time(call: Any, iters: int, sync: Any) -> float:
    call()
    times = []
    for _ in range(iters):
        sync()
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(mode: str, checkpoint: str, iters: int) -> None:
    """One measurement in this process (and its peer, for the 2-process modes)."""
    import transformers  # noqa: F401  (imported before the baseline is read)
    from safetensors import safe_open

    if mode == "whole":
        rank, sync = 0, lambda: None
    else:
        from accel_state import PartialState

        state = PartialState()
        rank, sync = state.process_index, state.wait_for_everyone
    ids = _batch()
    model = _empty_model()
    # Everything but the weights is loaded before the baseline: the model's code and the
    # tracing/pipelining modules, so that peak - baseline is what weights and running cost.
    import torch.distributed.pipelining
    import torch.export

    baseline = _rss_mb()
    whole_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if mode == "whole":
        for shard in sorted(Path(checkpoint).glob("*.safetensors")):
            with safe_open(str(shard), framework="pt") as handle:
                weights = {key: handle.get_tensor(key) for key in handle.keys()}
            model.load_state_dict(weights, strict=False, assign=True)
            del weights
        held = whole_bytes
    elif mode == "accel":
        from accel.inference import prepare_pippy

        model = prepare_pippy(model, example_args=(ids,), num_chunks=2, checkpoint=checkpoint)
        held = model.pippy_stage_weights.stage_bytes
    else:
        from accelerate.inference import prepare_pippy as reference_prepare_pippy
        from accelerate.utils import load_checkpoint_in_model

        load_checkpoint_in_model(model, checkpoint)
        held = whole_bytes
        model = reference_prepare_pippy(model, example_args=(ids,), num_chunks=2)

    def call() -> Any:
        with torch.no_grad():
            return model(ids)

    seconds = _time(call, iters, sync)
    row = {
        "mode": mode,
        "rank": rank,
        "baseline_mb": round(baseline, 1),
        "peak_rss_mb": round(_peak_mb(), 1),
        "held_mb": round(held / 2**20, 1),
        "whole_mb": round(whole_bytes / 2**20, 1),
        "seconds": seconds,
    }
    print("ROW " + json.dumps(row), flush=True)


def _run(mode: str, checkpoint: str, iters: int) -> list[dict[str, Any]] | str:
    script = [str(Path(__file__).resolve()), "--worker", mode, checkpoint, "--iters", str(iters)]
    script += ["--layers", str(CONFIG["num_hidden_layers"])]
    if mode == "whole":
        command = [sys.executable, *script]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", *script]
    env = dict(os.environ, OMP_NUM_THREADS="1", ACCEL_USE_CPU="true", ACCELERATE_USE_CPU="true")
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env, cwd=ROOT)
    # Two processes may print on one line: each row is a flat JSON object after "ROW ".
    rows = [json.loads(found) for found in re.findall(r"ROW (\{[^{}]*\})", done.stdout)]
    if done.returncode != 0 or not rows:
        errors = [
            line
            for line in done.stderr.splitlines()
            if "Error" in line and "elastic" not in line and "ChildFailedError" not in line
        ]
        return errors[-1].strip() if errors else f"exit code {done.returncode}"
    return rows


def _save_checkpoint(folder: str) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**CONFIG)).save_pretrained(folder, max_shard_size="100MB")


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"torch {torch.__version__}"]
    for name in ("transformers", "accelerate"):
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            parts.append(f"{name} not installed")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/pipeline.md"))
    parser.add_argument("--layers", type=int, default=8, help="decoder layers (~30 MB each)")
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "CHECKPOINT"))
    args = parser.parse_args()
    _set_layers(args.layers)
    if args.worker:
        worker(args.worker[0], args.worker[1], args.iters)
        return
    with tempfile.TemporaryDirectory() as folder:
        _save_checkpoint(folder)
        shards = len(list(Path(folder).glob("*.safetensors")))
        results = {
            mode: _run(mode, folder, args.iters) for mode in ("whole", "accel", "accelerate")
        }
    load = os.getloadavg()
    lines = [
        _heading(),
        "",
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, {_versions()}, "
        f"gloo, 1 thread per process. Load average at the end: {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f}. Model: `LlamaForCausalLM` from a config ({CONFIG['num_hidden_layers']} "
        f"layers, hidden {CONFIG['hidden_size']}, vocab {CONFIG['vocab_size']}, untied), float32, "
        f"saved as {shards} safetensors shards. Batch {BATCH} x {SEQ} tokens, median of "
        f"{args.iters} calls after a warm-up.",
        "",
        "| setup | process | weights held (MB) | RSS before weights (MB) | peak RSS (MB) | "
        "peak - before weights (MB) | s / batch | samples / s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    names = {
        "whole": "floor: whole model, 1 process, safetensors by hand",
        "accel": "accel prepare_pippy(checkpoint=...), 2 processes",
        "accelerate": "accelerate prepare_pippy, 2 processes",
    }
    for mode, rows in results.items():
        if isinstance(rows, str):
            notes.append(f"`{names[mode]}` did not run here: `{rows}`")
            lines.append(f"| {names[mode]}: failed (error below the table) | | | | | | | |")
            continue
        for row in sorted(rows, key=lambda r: r["rank"]):
            lines.append(
                f"| {names[mode]} | {row['rank']} | {row['held_mb']:.0f} | {row['baseline_mb']:.0f} "
                f"| {row['peak_rss_mb']:.0f} | {row['peak_rss_mb'] - row['baseline_mb']:.0f} | "
                f"{row['seconds']:.2f} | {BATCH / row['seconds']:.1f} |"
            )
    notes.append(NOTE)
    lines += ["", *notes]
    write_page(Path(args.out), lines)


def write_page(out: Path, lines: list[str]) -> None:
    """Write ``lines`` as this script's section of ``out`` (the rest of the page is kept)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _machine import write_section  # benchmarks/_machine.py

    write_section(out, _section(), TITLE, "\n".join(lines))  # also draws the page's charts
    print("\n".join(lines))


if __name__ == "__main__":
    main()
