"""accel under transformers: the cost of the ``ACCEL_AS_ACCELERATE`` switch when it is off, and
transformers' ``Trainer`` steps per second on accel and on the reference, side by side.

Run: ``uv run --no-sync python benchmarks/ecosystem/bench_ecosystem.py [--runs 7] [--steps 40]
[--out PAGE]``

1. The ``.pth`` line that accel-torch installs runs at every interpreter start; with the variable
   unset it is one ``os.environ`` lookup. Measured: that line alone, in-process (mean of 200,000
   executions), and interpreter start (``python -c pass``) and ``import accel`` (``python -X
   importtime``), median of fresh processes, with the variable unset and set to ``0``.
2. ``Trainer`` on a tiny Llama built from a config (no hub), ``--steps`` optimizer steps of batch
   8, 1 process: transformers' own ``train_steps_per_second`` with ``import accelerate`` answered
   by accel (``ACCEL_AS_ACCELERATE=1``) and by the reference, alternating ``--runs`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

TRAIN = textwrap.dedent(
    """
    import json, sys, tempfile, torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64))
    ids = torch.randint(0, 256, (steps * 8, 32), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": row, "labels": row} for row in ids]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, max_steps=steps,
            save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_steps=10**6)
        metrics = Trainer(model=model, args=args, train_dataset=data).train().metrics
    import accelerate
    print("RESULT " + json.dumps({"steps_per_second": steps / metrics["train_runtime"],
                                  "accelerate": accelerate.__file__}))
    """
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", **extra)
    return env


def pth_line_ns() -> float:
    """Nanoseconds of one execution of the installed ``.pth`` line with the variable unset."""
    path = Path(sysconfig.get_paths()["purelib"]) / "accel_as_accelerate.pth"
    line = path.read_text(encoding="utf-8").strip()
    code = compile(line, str(path), "exec")
    saved = os.environ.pop("ACCEL_AS_ACCELERATE", None)
    try:
        n = 200_000
        start = time.perf_counter_ns()
        for _ in range(n):
            exec(code, {})
        return (time.perf_counter_ns() - start) / n
    finally:
        if saved is not None:
            os.environ["ACCEL_AS_ACCELERATE"] = saved


def start_ms(runs: int, env: dict[str, str]) -> float:
    """Median wall time of ``python -c pass``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def import_accel_ms(runs: int, env: dict[str, str]) -> float:
    """Median cumulative ``-X importtime`` of ``import accel``."""
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import accel"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        found = re.findall(r"\|\s*(\d+) \| accel$", done.stderr, re.M)
        times.append(int(found[-1]) / 1000)
    return statistics.median(times)


def trainer_steps(steps: int, as_accelerate: bool) -> float:
    done = subprocess.run(
        [sys.executable, "-c", TRAIN, str(steps)],
        env=_env(ACCEL_AS_ACCELERATE="1" if as_accelerate else "0"),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"Trainer run failed:\n{(done.stdout + done.stderr)[-3000:]}")
    result = json.loads(lines[0][7:])
    assert ("/accel/" in result["accelerate"]) == as_accelerate, result
    return float(result["steps_per_second"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", default=None, help="page to write")
    args = parser.parse_args()

    off, zero = _env(), _env(ACCEL_AS_ACCELERATE="0")
    rows = [
        ("the `.pth` line alone (ns, in-process)", f"{pth_line_ns():.0f}", "-"),
        (
            "`python -c pass` (ms)",
            f"{start_ms(args.runs, off):.1f}",
            f"{start_ms(args.runs, zero):.1f}",
        ),
        (
            "`import accel` (ms, -X importtime)",
            f"{import_accel_ms(args.runs, off):.1f}",
            f"{import_accel_ms(args.runs, zero):.1f}",
        ),
    ]
    ours, reference = [], []
    for _ in range(args.runs):
        ours.append(trainer_steps(args.steps, True))
        reference.append(trainer_steps(args.steps, False))
    load = os.getloadavg()[0]
    page = [
        "# accel under transformers",
        "",
        f"Script: `benchmarks/ecosystem/bench_ecosystem.py --runs {args.runs} --steps "
        f"{args.steps}`; load average {load:.1f} at the end (the machine may be shared: compare "
        "within a table).",
        "",
        "## The switch, off: what every interpreter start pays",
        "",
        "| measure | variable unset | `ACCEL_AS_ACCELERATE=0` |",
        "| --- | ---: | ---: |",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        "",
        f"## `Trainer` steps per second, 1 process (tiny Llama, batch 8, {args.steps} steps)",
        "",
        "| library answering `import accelerate` | median steps/s | runs |",
        "| --- | ---: | ---: |",
        f"| accel (`ACCEL_AS_ACCELERATE=1`) | {statistics.median(ours):.2f} | {len(ours)} |",
        f"| reference accelerate | {statistics.median(reference):.2f} | {len(reference)} |",
        "",
    ]
    text = "\n".join(page)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
