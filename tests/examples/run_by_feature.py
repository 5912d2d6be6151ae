"""Launched by tests/examples/test_by_feature.py: runs the ``examples/by_feature`` scripts that
need no launcher flags, one after the other in the same processes, and prints each result.

Each script's ``main(argv)`` runs with test arguments; the shared state is reset between two
scripts, as if each had its own launch. Every process writes what each ``main`` returned to
``OUTPUT_DIR/results/<case>.<rank>.json`` (a file, since the processes' printed lines can
interleave).

Usage: accel launch --num_processes 2 tests/examples/run_by_feature.py OUTPUT_DIR [CASE ...]
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

from accel_state import PartialState
from accel_state.testing import reset_state

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "by_feature"


def load(script: str) -> ModuleType:
    """Import ``examples/by_feature/<script>.py`` under a name of its own."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))  # the scripts import toy_task beside them
    spec = importlib.util.spec_from_file_location(f"by_feature_{script}", EXAMPLES / f"{script}.py")
    assert spec is not None and spec.loader is not None, script
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases(out: str) -> dict[str, tuple[str, list[str]]]:
    """Case name -> (script, arguments)."""
    ckpt = os.path.join(out, "checkpointing")
    return {
        "checkpointing": ("checkpointing", ["--checkpointing_steps", "5", "--output_dir", ckpt]),
        "checkpointing_resumed": (
            "checkpointing",
            ["--resume_from_checkpoint", os.path.join(ckpt, "step_10"), "--output_dir", ckpt],
        ),
        "tracking": (
            "tracking",
            ["--with_tracking", "--project_dir", os.path.join(out, "tracking")],
        ),
        "gradient_accumulation": (
            "gradient_accumulation",
            ["--batch_size", "8", "--gradient_accumulation_steps", "4"],
        ),
        "gradient_accumulation_none": (
            "gradient_accumulation",
            ["--batch_size", "32", "--gradient_accumulation_steps", "1"],
        ),
        "automatic_gradient_accumulation": (
            "automatic_gradient_accumulation",
            ["--observed_batch_size", "32", "--simulated_memory_limit", "8"],
        ),
        "automatic_gradient_accumulation_none": (
            "automatic_gradient_accumulation",
            ["--observed_batch_size", "32"],
        ),
        "memory": ("memory", ["--starting_batch_size", "64", "--simulated_memory_limit", "16"]),
        "multi_process_metrics": ("multi_process_metrics", []),
        "cross_validation": ("cross_validation", ["--num_folds", "3"]),
        "early_stopping": ("early_stopping", []),
        "profiler": ("profiler", ["--output_dir", os.path.join(out, "profile")]),
        "local_sgd": ("local_sgd", ["--local_sgd_steps", "4"]),
        "big_model_inference": (
            "big_model_inference",
            ["--output_dir", os.path.join(out, "big_model")],
        ),
        "pipeline_inference": ("pipeline_inference", []),
    }


def main() -> None:
    out, *wanted = sys.argv[1:]
    table = cases(out)
    unknown = sorted(set(wanted) - set(table))
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; choose among {sorted(table)}")
    modules: dict[str, ModuleType] = {}
    results = Path(out) / "results"
    for case, (script, argv) in table.items():
        if wanted and case not in wanted:
            continue
        module = modules.setdefault(script, load(script))
        result = module.main(argv)
        rank = PartialState().process_index
        results.mkdir(parents=True, exist_ok=True)
        (results / f"{case}.{rank}.json").write_text(json.dumps(result))
        reset_state()


if __name__ == "__main__":
    main()
