"""Wall time of each ``accel`` command against the reference's same command, in one run.

Every command runs as a user runs it (a fresh process through the installed console script),
alternating accel and the reference (``accelerate``, in the bench group) on each repetition so
both see the same machine load; the table reports the median and the range. The config homes
are temporary folders, so no user file is read or written.

Commands: ``--help``; ``--version`` (the reference has none); ``env``; ``config default`` when
the file already exists (nothing is written); ``estimate-memory`` on a local transformers
config.json (a 4-layer Llama, which accel answers from its fields without importing torch or
transformers; offline); ``test`` on 2 CPU processes.

Each command also has a floor, run in the same rotation: the least a process must do for the
same answer. A bare interpreter start for ``--help`` and ``config default`` (nothing to write),
the start plus a metadata read for ``--version`` and ``env``, the start plus a JSON read for
``estimate-memory``, and for ``test`` a torchrun of 2 gloo processes doing one ``all_reduce``.

Run: ``uv run --no-sync python benchmarks/cli/bench_cli.py [--runs 3] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent
LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
}


FLOOR_TEST = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
value = torch.ones(1)
dist.all_reduce(value)
assert value.item() == dist.get_world_size()
dist.destroy_process_group()
"""
VERSIONS = "from importlib.metadata import version; print({})"


def commands(
    model: Path, reference_config: Path, floor_test: Path
) -> dict[str, tuple[list[str], list[str] | None, list[str]]]:
    """Row name -> (accel's command, the reference's command or None, the floor's command)."""
    python = ["python", "-c"]
    env_floor = "platform.platform(), *(version(n) for n in ('accel-launch', 'torch'))"
    return {
        "--help": (["accel", "--help"], ["accelerate", "--help"], [*python, "pass"]),
        "--version": (
            ["accel", "--version"],
            None,
            [*python, VERSIONS.format("version('accel-launch')")],
        ),
        "env": (
            ["accel", "env"],
            ["accelerate", "env"],
            [*python, "import platform; " + VERSIONS.format(env_floor)],
        ),
        "config default (file exists)": (
            ["accel", "config", "default"],
            ["accelerate", "config", "default"],
            [*python, "pass"],
        ),
        "estimate-memory (local config.json)": (
            ["accel", "estimate-memory", str(model)],
            ["accelerate", "estimate-memory", str(model)],
            [*python, f"import json; print(json.load(open({str(model / 'config.json')!r})))"],
        ),
        "test (2 CPU processes)": (
            ["accel", "test", "--num_processes", "2", "--cpu"],
            ["accelerate", "test", "--config_file", str(reference_config)],
            ["python", "-m", "torch.distributed.run", "--nproc_per_node", "2", str(floor_test)],
        ),
    }


def run(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Seconds taken by ``command`` and its exit code."""
    start = time.perf_counter()
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:]], env=env, capture_output=True, timeout=900
    )
    return time.perf_counter() - start, done.returncode


def _cell(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} ({min(samples):.2f}-{max(samples):.2f})"


def parse_page_arguments(doc: str | None, runs: int) -> argparse.Namespace:
    """``--runs`` and ``--out`` of a CLI benchmark (its docstring's first line describes it)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=runs, help="Repetitions of each command.")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="Also write the table into its own section of this page, keeping the rest.",
    )
    return parser.parse_args()


def publish(table: str, out: Path | None, key: str, title: str) -> None:
    """Print ``table`` and, with ``out``, write it as the section ``key`` of that page."""
    print(table)
    if out is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _machine import write_section  # benchmarks/_machine.py

        write_section(out, key, title, f"## Latest run of `{key}.py`\n\n{table}")


def main() -> None:
    args = parse_page_arguments(__doc__, runs=3)
    with tempfile.TemporaryDirectory(prefix="accel-bench-cli-") as tmp:
        root = Path(tmp)
        model = root / "llama"
        model.mkdir()
        (model / "config.json").write_text(json.dumps(LLAMA))
        reference_config = root / "reference_2cpu.yaml"
        reference_config.write_text(
            yaml.safe_dump(
                {
                    "compute_environment": "LOCAL_MACHINE",
                    "distributed_type": "MULTI_CPU",
                    "num_processes": 2,
                    "num_machines": 1,
                    "machine_rank": 0,
                    "mixed_precision": "no",
                    "use_cpu": True,
                }
            )
        )
        env = {
            **os.environ,
            "ACCEL_CONFIG_HOME": str(root / "accel-home"),
            "HF_HOME": str(root / "hf-home"),
            "HF_HUB_OFFLINE": "1",
        }
        # `config default` is measured when the file exists: write it once first.
        for command in (["accel", "config", "default"], ["accelerate", "config", "default"]):
            run(command, env)
        floor_test = root / "floor_test.py"
        floor_test.write_text(FLOOR_TEST)
        rows = commands(model, reference_config, floor_test)
        times: dict[str, dict[str, list[float]]] = {
            name: {"ours": [], "ref": [], "floor": []} for name in rows
        }
        failures: list[str] = []
        for repetition in range(args.runs):
            for name, (ours, reference, floor) in rows.items():
                sides = [("ours", ours), ("ref", reference), ("floor", floor)]
                for side, command in sides if repetition % 2 == 0 else sides[::-1]:
                    if command is None:
                        continue
                    seconds, code = run(command, env)
                    times[name][side].append(seconds)
                    if code != 0:
                        failures.append(f"`{' '.join(command)}` exited with {code}")
                    print(f"{name:<38} {side:<4} {seconds:6.1f}s", file=sys.stderr, flush=True)
        shutil.rmtree(root / "hf-home", ignore_errors=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Wall time in seconds, median (min-max) of {args.runs} runs, accel and the reference "
        f"alternating with the floor; {platform.machine()}, {os.cpu_count()} cores shared with other jobs "
        f"(load average at the end: {load}); Python {platform.python_version()}.",
        "",
        "| command | accel (s) | accelerate (s) | floor: raw `python -c` / torchrun (s) "
        "| accel / floor |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, sides in times.items():
        ref = _cell(sides["ref"]) if sides["ref"] else "no such command"
        ratio = statistics.median(sides["ours"]) / statistics.median(sides["floor"])
        lines.append(
            f"| `{name}` | {_cell(sides['ours'])} | {ref} | {_cell(sides['floor'])} "
            f"| {ratio:.1f}x |"
        )
    lines += [
        "",
        "Floor of each command: `--help` and `config default` a bare `python -c pass`; "
        "`--version` and `env` that start plus a metadata read (`env`: platform, accel-launch and "
        "torch versions); `estimate-memory` that start plus reading the config.json; `test` "
        "a torchrun of 2 gloo processes doing one `all_reduce`.",
    ]
    if failures:
        lines += ["", "Commands that failed:", *sorted({f"- {f}" for f in failures})]
    publish("\n".join(lines), args.out, "bench_cli", "CLI: wall time of each command")


if __name__ == "__main__":
    main()
