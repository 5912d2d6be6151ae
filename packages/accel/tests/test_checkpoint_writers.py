"""Two runs saving into one folder at once: one writes, the other is refused naming it; a lock
left by a killed run is taken over. A kill in the middle of a rotation leaves nothing that later
rotations keep forever."""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

MANIFEST = "accel_checkpoint.json"

SAVER = textwrap.dedent(
    """
    import os, sys, time
    import torch
    from accel import Accelerator

    target, inside, go = sys.argv[1:4]
    accelerator = Accelerator()
    model = accelerator.prepare(torch.nn.Linear(64, 64))

    def hold(models, weights, output_dir):
        # The save has begun (its staging folder is open): let the other run try, then go on.
        if inside != "-":
            open(inside, "w").close()
            deadline = time.time() + 60
            while not os.path.exists(go) and time.time() < deadline:
                time.sleep(0.05)

    accelerator.register_save_state_pre_hook(hold)
    try:
        accelerator.save_state(target)
    except Exception as exc:
        print(f"REFUSED {type(exc).__name__}: {exc}", flush=True)
        sys.exit(3)
    print("SAVED", flush=True)
    """
)


def _start(tmp_path, target, inside="-", go="-"):
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(script), str(target), str(inside), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_second_run_saving_into_the_same_folder_is_refused_and_the_first_commits(tmp_path):
    target = tmp_path / "ckpt"
    inside, go = tmp_path / "inside", tmp_path / "go"
    first = _start(tmp_path, target, inside, go)
    try:
        deadline = time.time() + 120
        while not inside.exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert inside.exists(), first.communicate(timeout=60)
        second = _start(tmp_path, target)
        out, err = second.communicate(timeout=120)
    finally:
        go.touch()
        first_out, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_out + first_err
    assert "SAVED" in first_out
    assert second.returncode == 3, out + err
    assert "CheckpointLockedError" in out
    assert f"process {first.pid} on host {socket.gethostname()!r}" in out
    assert (target / MANIFEST).is_file()
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "go", "inside", "saver.py"]


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    lock = tmp_path / ".ckpt.lock"
    record = {"host": socket.gethostname(), "pid": dead.pid, "since": time.time()}
    lock.write_text(json.dumps(record))
    saver = _start(tmp_path, tmp_path / "ckpt")
    out, err = saver.communicate(timeout=120)
    assert saver.returncode == 0, out + err
    assert (tmp_path / "ckpt" / MANIFEST).is_file()
    assert not lock.exists()


def test_a_lock_of_a_live_writer_on_another_host_is_refused_with_the_fix(tmp_path):
    lock = tmp_path / ".ckpt.lock"
    lock.write_text(json.dumps({"host": "elsewhere", "pid": 1, "since": time.time()}))
    saver = _start(tmp_path, tmp_path / "ckpt")
    out, err = saver.communicate(timeout=120)
    assert saver.returncode == 3, out + err
    assert "process 1 on host 'elsewhere'" in out
    assert "delete the lock file" in out
    assert sorted(os.listdir(tmp_path)) == [".ckpt.lock", "saver.py"]


ROTATE = textwrap.dedent(
    """
    import os, sys
    import torch
    from accel import Accelerator
    from accel.utils import ProjectConfiguration

    project, kill_at = sys.argv[1], int(sys.argv[2])
    config = ProjectConfiguration(
        project_dir=project, automatic_checkpoint_naming=True, total_limit=1
    )
    accelerator = Accelerator(project_config=config)
    model = accelerator.prepare(torch.nn.Linear(8, 8))
    accelerator.load_state("latest")
    if kill_at >= 0:
        original = {name: getattr(os, name) for name in ("unlink", "remove")}

        def killing(name):
            def remove(path, *args, **kwargs):
                original[name](path, *args, **kwargs)
                if os.fspath(path).endswith("accel_checkpoint.json"):
                    os._exit(9)  # killed in the middle of removing a checkpoint
            return remove

        for name in original:
            setattr(os, name, killing(name))
    accelerator.save_state()
    """
)


def _rotate(tmp_path, kill_at):
    script = tmp_path / "rotate.py"
    script.write_text(ROTATE)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "project"), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def test_a_kill_during_rotation_leaves_nothing_later_rotations_keep(tmp_path):
    assert _rotate(tmp_path, -1).returncode == 0
    killed = _rotate(tmp_path, 0)  # saves checkpoint_1, killed while removing checkpoint_0
    assert killed.returncode == 9, killed.stderr
    folder = tmp_path / "project" / "checkpoints"
    assert (folder / "checkpoint_1" / MANIFEST).is_file()
    for _ in range(2):
        done = _rotate(tmp_path, -1)
        assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(folder)) == ["checkpoint_3"]


@pytest.mark.parametrize("leftover", ["empty", "files"])
def test_rotation_never_removes_a_hidden_folder_it_did_not_write(tmp_path, leftover):
    folder = tmp_path / "project" / "checkpoints"
    assert _rotate(tmp_path, -1).returncode == 0
    mine = folder / ".checkpoint_7.removing"
    mine.mkdir()
    if leftover == "files":
        (mine / "notes.txt").write_text("not accel's")
    assert _rotate(tmp_path, -1).returncode == 0
    assert mine.exists() == (leftover == "files")
