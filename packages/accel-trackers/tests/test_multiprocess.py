"""Two real OS processes of one job log to the same directory: one run lands, not two."""

import glob
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorboardX") is None
        or importlib.util.find_spec("tensorboard") is None,
        reason="tensorboardX and tensorboard are needed to write and read the run",
    ),
]

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from accel_trackers import init_trackers

    rank = int(os.environ["RANK"])
    trackers = init_trackers(
        "tensorboard", "job", config={"lr": 0.1, "rank": rank}, logging_dir=sys.argv[1]
    )
    for step in range(3):
        trackers.log({"loss": 1.0 + rank, "rank": rank}, step=step)
    tb = trackers.get("tensorboard")
    tb.tracker.add_scalar("direct", 1.0)  # a no-op on rank 1, a real call on rank 0
    trackers.finish()
    trackers.finish()
    print(type(tb).__name__)
    """
)


def test_two_ranks_give_one_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    logdir = tmp_path / "logs"
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2"}
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(logdir)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (_out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
    assert outputs[0][0].split() == ["TensorBoardTracker"]
    assert outputs[1][0].split() == ["NoOpTracker"]

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert os.listdir(logdir) == ["job"]
    assert len(glob.glob(str(logdir / "job" / "events.out.tfevents.*"))) == 1
    acc = EventAccumulator(str(logdir / "job"))
    acc.Reload()
    # Only rank 0's values, once per step.
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(0, 1.0), (1, 1.0), (2, 1.0)]
    assert {e.value for e in acc.Scalars("rank")} == {0.0}
    assert len(acc.Scalars("direct")) == 1
