"""Every ``accel`` command with each bad input: wall time of the refusal, whether torch was
imported, and the first line of the message.

Each case runs as a user runs it, in a fresh interpreter (``python -m accel_launch.cli ...``),
in a temporary folder with its own config home, so no user file is read or written. A small
wrapper runs the command's ``main`` and then writes to a side file whether ``torch`` is in
``sys.modules``: torch's import is the cost of a late refusal (seconds on a busy machine).
The rule the table checks: a refusal comes in under 2 s on an idle machine (``LIMIT``), before
torch is imported wherever the input can be judged without it.

Run: ``uv run --no-sync python benchmarks/cli/bench_cli_refusals.py [--runs 1] [--out FILE]``
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli import parse_page_arguments, publish

LIMIT = 2.0
"""Seconds a refusal may take on an idle machine."""

WRAPPER = """
import sys
from accel_launch.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as stop:
    code = stop.code
with open(sys.argv[1], "w") as out:
    out.write("yes" if "torch" in sys.modules else "no")
sys.exit(code)
"""

LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "vocab_size": 32000,
}


def _json(folder: Path, data: object) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(data))
    return str(folder)


def cases(root: Path) -> list[tuple[str, str, Callable[[], list[str]]]]:
    """(command, bad input, a function that prepares the files and returns the argv)."""
    script = root / "train.py"
    ckpt = root / "ckpt"

    def files() -> None:
        script.write_text("print('ran')\n")
        ckpt.mkdir(exist_ok=True)
        (ckpt / ".metadata").write_bytes(b"")
        (root / "held").mkdir(exist_ok=True)
        (root / "held" / "model.safetensors").write_bytes(b"")
        (root / "a-file").write_text("keep")
        (root / "cpu.yaml").write_text("use_cpu: true\nnum_processes: 2\n")
        (root / "fsdp.yaml").write_text("distributed_type: FSDP\nfsdp_config: {}\n")
        (root / "model.py").write_text("print(1)\n")
        (root / "empty").mkdir(exist_ok=True)

    s = str(script)
    rows: list[tuple[str, str, Callable[[], list[str]]]] = [
        ("launch", "--num_processes 0", lambda: ["launch", "--num_processes", "0", s]),
        ("launch", "--num_processes 500", lambda: ["launch", "--num_processes", "500", s]),
        ("launch", "a script that does not exist", lambda: ["launch", str(root / "nope.py")]),
        ("launch", "--multi_gpu --cpu", lambda: ["launch", "--multi_gpu", "--cpu", s]),
        (
            "launch",
            "--multi_gpu with use_cpu: true in the config file",
            lambda: ["launch", "--config_file", str(root / "cpu.yaml"), "--multi_gpu", s],
        ),
        ("launch", "--mixed_precision bf17", lambda: ["launch", "--mixed_precision", "bf17", s]),
        (
            "launch",
            "a config file that does not exist",
            lambda: ["launch", "--config_file", str(root / "nope.yaml"), s],
        ),
        (
            "launch",
            "--main_process_port 99999",
            lambda: ["launch", "--main_process_port", "99999", s],
        ),
        ("launch", "an unknown flag", lambda: ["launch", "--num_proceses", "2", s]),
        ("test", "--num_processes 500", lambda: ["test", "--num_processes", "500"]),
        (
            "config default",
            "--mixed_precision bf17",
            lambda: ["config", "default", "--mixed_precision", "bf17"],
        ),
        (
            "config update",
            "a file that does not exist",
            lambda: ["config", "update", "--config_file", str(root / "nope.yaml")],
        ),
        ("estimate-memory", "a Hub id (offline)", lambda: ["estimate-memory", "org/model"]),
        ("estimate-memory", "a .py file", lambda: ["estimate-memory", str(root / "model.py")]),
        (
            "estimate-memory",
            "a folder without config.json",
            lambda: ["estimate-memory", str(root / "empty")],
        ),
        (
            "estimate-memory",
            "config.json: hidden_size -5",
            lambda: ["estimate-memory", _json(root / "neg", {**LLAMA, "hidden_size": -5})],
        ),
        (
            "estimate-memory",
            "config.json: no model_type",
            lambda: ["estimate-memory", _json(root / "untyped", {"hidden_size": 8})],
        ),
        (
            "estimate-memory",
            "config.json: a model of 10^17 parameters",
            lambda: [
                "estimate-memory",
                _json(
                    root / "absurd",
                    {
                        **LLAMA,
                        "hidden_size": 1 << 20,
                        "intermediate_size": 1 << 22,
                        "num_hidden_layers": 10_000,
                    },
                ),
            ],
        ),
        (
            "estimate-memory",
            "config.json: 100 layers x 10000 experts",
            lambda: [
                "estimate-memory",
                _json(
                    root / "experts",
                    {
                        **LLAMA,
                        "model_type": "mixtral",
                        "num_hidden_layers": 100,
                        "num_local_experts": 10_000,
                    },
                ),
            ],
        ),
        (
            "estimate-memory",
            "config.json: a billion layers",
            lambda: [
                "estimate-memory",
                _json(root / "billion", {**LLAMA, "num_hidden_layers": 10**9}),
            ],
        ),
        (
            "estimate-memory",
            "--library_name timm",
            lambda: ["estimate-memory", "resnet50", "--library_name", "timm"],
        ),
        (
            "merge-weights",
            "a folder without .metadata",
            lambda: ["merge-weights", str(root / "empty"), str(root / "out")],
        ),
        (
            "merge-weights",
            "an output path that is a file",
            lambda: ["merge-weights", str(ckpt), str(root / "a-file")],
        ),
        (
            "merge-weights",
            "an output folder holding model.safetensors",
            lambda: ["merge-weights", str(ckpt), str(root / "held")],
        ),
        (
            "merge-weights",
            "--remove_checkpoint_dir, output inside the checkpoint",
            lambda: ["merge-weights", str(ckpt), str(ckpt / "in"), "--remove_checkpoint_dir"],
        ),
        (
            "merge-weights",
            "--max_shard_size 10XB",
            lambda: ["merge-weights", str(ckpt), str(root / "out"), "--max_shard_size", "10XB"],
        ),
        (
            "merge-weights",
            "--unsafe_serialization",
            lambda: ["merge-weights", str(ckpt), str(root / "out"), "--unsafe_serialization"],
        ),
        (
            "to-fsdp2",
            "a config file that does not exist",
            lambda: ["to-fsdp2", "--config_file", str(root / "nope.yaml"), "--overwrite"],
        ),
        (
            "to-fsdp2",
            "neither --output_file nor --overwrite",
            lambda: ["to-fsdp2", "--config_file", str(root / "fsdp.yaml")],
        ),
        (
            "to-fsdp2",
            "an existing --output_file",
            lambda: [
                "to-fsdp2",
                "--config_file",
                str(root / "fsdp.yaml"),
                "--output_file",
                str(root / "cpu.yaml"),
            ],
        ),
        ("tpu-config", "no TPU name", lambda: ["tpu-config", "--command", "echo hi"]),
    ]
    return [(command, what, lambda argv=argv: (files(), argv())[1]) for command, what, argv in rows]


def run_case(argv: list[str], root: Path, env: dict[str, str]) -> tuple[float, int, bool, str]:
    """Seconds, exit code, whether torch was imported, and the first line of the message."""
    side = root / "torch-imported"
    side.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(side), *argv],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.perf_counter() - start
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line), lines[0] if lines else "")
    torch = side.exists() and side.read_text() == "yes"
    return seconds, done.returncode, torch, first


def _cell(text: str, width: int = 160) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def main() -> None:
    args = parse_page_arguments(__doc__, runs=1)
    rows: list[str] = []
    slow: list[str] = []
    with tempfile.TemporaryDirectory(prefix="accel-bench-refusals-") as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "ACCEL_CONFIG_HOME": str(root / "accel-home"),
            "HF_HOME": str(root / "hf-home"),
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        }
        for command, what, argv in cases(root):
            samples, code, torch, first = [], 0, False, ""
            for _ in range(args.runs):
                seconds, code, torch, first = run_case(argv(), root, env)
                samples.append(seconds)
            wall = statistics.median(samples)
            print(f"{command:<16} {wall:5.2f}s torch={torch!s:<5} {what}", file=sys.stderr)
            if wall >= LIMIT or code == 0:
                slow.append(f"`{command}` {what}: {wall:.2f} s, exit code {code}")
            first = first.replace(str(root), "TMP")
            rows.append(
                f"| `{command}` | {what} | {code} | {wall:.2f} | {'yes' if torch else 'no'} "
                f"| {_cell(first)} |"
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Wall time of each refusal in a fresh interpreter, median of {args.runs} run(s); "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average at "
        f"the end: {load}); Python {platform.python_version()}. Rule: under {LIMIT:.0f} s, "
        "before torch wherever the input can be judged without it.",
        "",
        "| command | bad input | exit code | wall (s) | torch imported | first line of the message |",
        "| --- | --- | ---: | ---: | --- | --- |",
        *rows,
        "",
        (
            f"Every refusal took under {LIMIT:.0f} s and exited with a non-zero code."
            if not slow
            else "Over the limit or not refused:\n\n" + "\n".join(f"- {s}" for s in slow)
        ),
    ]
    publish("\n".join(lines), args.out, "bench_cli_refusals", "CLI: refusals of bad input")


if __name__ == "__main__":
    main()
