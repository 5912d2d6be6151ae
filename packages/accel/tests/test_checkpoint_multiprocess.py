import importlib.util
import json
import warnings
from pathlib import Path

import pytest
from accel_state.testing import run_distributed

SCRIPTS = Path(__file__).parent / "scripts"


def _common():
    spec = importlib.util.spec_from_file_location("ckpt_common", SCRIPTS / "ckpt_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.multiprocess
def test_two_processes_resume_exactly_and_fail_loudly(tmp_path):
    script = SCRIPTS / "ckpt_resume.py"
    run_distributed(script, "full", str(tmp_path), num_processes=2, timeout=300)
    result = run_distributed(
        script,
        "resume",
        str(tmp_path),
        num_processes=2,
        timeout=300,
        env={"ACCEL_CHECKPOINT_TIMEOUT": "5"},
    )
    for check in ("exact_resume", "failure_reported", "one_process_call", "later_accelerators"):
        for rank in (0, 1):
            assert f"PASSED check_{check} rank={rank}" in result.stdout, (
                result.stdout + result.stderr
            )

    manifest = json.loads((tmp_path / "checkpoints/checkpoint_0/accel_checkpoint.json").read_text())
    assert manifest["world_size"] == 2
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= set(manifest["files"])

    # One process with the same total batch size continues the same data order: each step's
    # batch is the two processes' batches of that step, in process order.
    common = _common()
    full = [json.loads((tmp_path / f"full_{r}.json").read_text()) for r in (0, 1)]
    acc = common.fresh_accelerator(str(tmp_path), seed=3)
    objs = common.build(acc, batch_size=2 * common.BATCH)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        acc.load_state()
    assert any("saved by 2 processes and is loaded by 1" in str(w.message) for w in caught)
    seen = common.train(acc, *objs)
    assert seen == [a + b for a, b in zip(full[0], full[1])]

    acc = common.fresh_accelerator(str(tmp_path), seed=3)
    common.build(acc)
    with pytest.raises(ValueError, match="same total batch size; saved 8, this loader has 4"):
        acc.load_state()


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("script", "checks"),
    [
        # Process 1's random-state file is damaged: both fail, nothing changes, then it loads.
        ("ckpt_failed_load.py", ("nothing_changed", "repaired_loads")),
        # Each process passes its own folder: both refuse before writing; a shared one works.
        ("ckpt_folders_differ.py", ("refused", "shared")),
    ],
)
def test_two_process_checkpoint_refusals(tmp_path, script, checks):
    result = run_distributed(
        SCRIPTS / script,
        str(tmp_path),
        num_processes=2,
        timeout=300,
        env={"ACCEL_CHECKPOINT_TIMEOUT": "60"},
    )
    for check in checks:
        for rank in (0, 1):
            assert f"PASSED check_{check} rank={rank}" in result.stdout, (
                result.stdout + result.stderr
            )
