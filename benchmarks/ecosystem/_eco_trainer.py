"""transformers' ``Trainer`` steps per second on accel and on the reference, on 1 and 2 processes,
with the time of one optimizer step split by phase.

Each measurement is a fresh interpreter (two under torchrun) that trains a tiny Llama built from
a config ``repeats`` times and prints one ``RESULT`` line: transformers' own
``train_steps_per_second`` of each ``train()`` after the first (the first warms up), and the
median time of each phase of a step, read from ``TrainerCallback`` hooks:

- ``forward + backward + clip``: ``on_step_begin`` to ``on_pre_optimizer_step``;
- ``optimizer step``: ``on_pre_optimizer_step`` to ``on_optimizer_step`` (the prepared
  optimizer's ``step``);
- ``scheduler + zero_grad``: ``on_optimizer_step`` to ``on_step_end``;
- ``next batch``: ``on_step_end`` to the next ``on_step_begin``.

It also times one call of ``accelerate.utils.is_lomo_available()`` in the library answering
``import accelerate``: the reference's optimizer wrapper calls it twice in every ``step``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
from typing import Any

PHASES = ("forward + backward + clip", "optimizer step", "scheduler + zero_grad", "next batch")

WORKER = textwrap.dedent(
    """
    import json, os, statistics, sys, tempfile, time, torch
    from transformers import (LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback,
        TrainingArguments)
    steps, repeats = int(sys.argv[1]), int(sys.argv[2])
    marks = ("begin", "pre_opt", "opt", "end")

    class Clock(TrainerCallback):
        def __init__(self):
            self.times = {m: [] for m in marks}
        def _mark(self, m):
            self.times[m].append(time.perf_counter())
        def on_step_begin(self, *a, **k): self._mark("begin")
        def on_pre_optimizer_step(self, *a, **k): self._mark("pre_opt")
        def on_optimizer_step(self, *a, **k): self._mark("opt")
        def on_step_end(self, *a, **k): self._mark("end")

    ids = torch.randint(0, 256, (steps * 8, 32), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": row, "labels": row} for row in ids]
    rates, phases = [], [[], [], [], []]
    for _ in range(repeats + 1):
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64,
            intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64))
        clock = Clock()
        with tempfile.TemporaryDirectory() as out:
            args = TrainingArguments(output_dir=out, per_device_train_batch_size=8,
                max_steps=steps, save_strategy="no", report_to=[], use_cpu=True,
                disable_tqdm=True, logging_steps=10**6, max_grad_norm=1.0)
            trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[clock])
            metrics = trainer.train().metrics
        if _ == 0:
            continue  # warm-up
        rates.append(steps / metrics["train_runtime"])
        t = clock.times
        for i in range(len(t["begin"])):
            phases[0].append(t["pre_opt"][i] - t["begin"][i])
            phases[1].append(t["opt"][i] - t["pre_opt"][i])
            phases[2].append(t["end"][i] - t["opt"][i])
            if i + 1 < len(t["begin"]):
                phases[3].append(t["begin"][i + 1] - t["end"][i])
    import accelerate
    from accelerate.utils import is_lomo_available
    start = time.perf_counter()
    for _ in range(20):
        is_lomo_available()
    lomo_us = (time.perf_counter() - start) / 20 * 1e6
    if int(os.environ.get("RANK", "0")) == 0:
        print("RESULT " + json.dumps({
            "steps_per_second": rates,
            "phases_ms": [statistics.median(p) * 1000 for p in phases],
            "lomo_check_us": lomo_us,
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "accelerate": accelerate.__file__,
        }), flush=True)
    """
)

SIDES = {
    "accel, 1 process": ("python", True),
    "reference, 1 process": ("python", False),
    "accel, 2 processes (torchrun)": ("torchrun", True),
    "accel, 2 processes (accel launch --as_accelerate)": ("accel launch", True),
    "reference, 2 processes (torchrun)": ("torchrun", False),
}
"""Row label -> (launcher, accel answers ``import accelerate``)."""


def environment(as_accelerate: bool) -> dict[str, str]:
    """This environment without accel's or the reference's variables, one thread per process,
    offline, the switch on or off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env.update(
        PYTHONWARNINGS="ignore",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        ACCEL_AS_ACCELERATE="1" if as_accelerate else "0",
    )
    return env


def command(launcher: str, script: str) -> list[str]:
    """The command line that starts ``script`` with ``launcher``."""
    if launcher == "python":
        return [sys.executable, script]
    if launcher == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return [sys.executable, "-m", "accel_launch.cli", "launch", "--quiet", "--as_accelerate"]


def measure(label: str, script: str, steps: int, repeats: int) -> dict[str, Any]:
    """One fresh run of ``WORKER`` (saved at ``script``) for the row ``label``."""
    launcher, as_accelerate = SIDES[label]
    argv = command(launcher, script)
    if launcher == "torchrun":
        argv += ["--nproc_per_node", "2", script]
    elif launcher == "accel launch":
        argv += ["--cpu", "--num_processes", "2", script]
    done = subprocess.run(
        [*argv, str(steps), str(repeats)],
        env=environment(as_accelerate and launcher != "accel launch"),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"Trainer run {label!r} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    result: dict[str, Any] = json.loads(lines[0][len("RESULT ") :])
    on_accel = "/accel/" in result["accelerate"]
    if on_accel != as_accelerate or result["world_size"] != (1 if "1 process" in label else 2):
        raise SystemExit(f"Trainer run {label!r} ran on the wrong side: {result}")
    return result


def run_all(work: str, steps: int, repeats: int, runs: int, two: bool) -> dict[str, list[dict]]:
    """Every row, alternating the sides ``runs`` times (2-process rows when ``two``)."""
    script = os.path.join(work, "trainer_worker.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(WORKER)
    labels = [label for label in SIDES if two or "1 process" in label]
    results: dict[str, list[dict]] = {label: [] for label in labels}
    for _ in range(runs):
        for label in labels:
            results[label].append(measure(label, script, steps, repeats))
            print(f"  {label}: {results[label][-1]['steps_per_second']}", flush=True)
    return results


def tables(results: dict[str, list[dict]], steps: int, repeats: int, runs: int) -> list[str]:
    """The markdown of the steps-per-second table and the per-phase table."""
    out = [
        f"### `Trainer` steps per second (tiny Llama, batch 8 per process, {steps} steps)",
        "",
        f"{runs} fresh interpreters per row, alternating rows; in each, {repeats} `train()` "
        "calls after a warm-up one. Steps per second: transformers' `train_steps_per_second` "
        "(rank 0 on 2 processes: per-process batch 8, so 2 processes do twice the samples "
        "per step).",
        "",
        "| launch | median steps/s | min | max | samples |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, runs_ in results.items():
        rates = [rate for result in runs_ for rate in result["steps_per_second"]]
        out.append(
            f"| {label} | {statistics.median(rates):.2f} | {min(rates):.2f} | "
            f"{max(rates):.2f} | {len(rates)} |"
        )
    out += [
        "",
        "### Where a step's time goes (median ms per step, by phase)",
        "",
        "| launch | " + " | ".join(PHASES) + " | `is_lomo_available()` (µs per call) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, runs_ in results.items():
        phases = [statistics.median(r["phases_ms"][i] for r in runs_) for i in range(4)]
        lomo = statistics.median(r["lomo_check_us"] for r in runs_)
        out.append(f"| {label} | " + " | ".join(f"{p:.2f}" for p in phases) + f" | {lomo:.0f} |")
    return out
