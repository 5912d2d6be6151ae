"""save_state never destroys what it did not write."""

import json
import os
from pathlib import Path

import pytest
import torch

from accel import Accelerator
from accel._training_checkpoints.files._folders import STAGING_MARKER, prepare_staging, staging_dir
from accel.utils import CheckpointIntegrityError, ProjectConfiguration


class Counter:
    def __init__(self, value=0):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def _accelerator(tmp_path, **config):
    acc = Accelerator(project_config=ProjectConfiguration(project_dir=str(tmp_path), **config))
    counter = Counter(1)
    acc.register_for_checkpointing(counter)
    return acc, counter


def test_a_regular_file_is_refused_before_anything_is_written(tmp_path):
    acc, _ = _accelerator(tmp_path)
    target = tmp_path / "results"
    target.write_text("precious")
    for _ in range(2):
        with pytest.raises(
            NotADirectoryError, match="never replaces a file.*'.*results' is a file"
        ):
            acc.save_state(target)
    assert target.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_a_symlink_is_refused(tmp_path):
    acc, _ = _accelerator(tmp_path)
    real = Path(acc.save_state(tmp_path / "real"))
    link = tmp_path / "latest"
    link.symlink_to(real)
    with pytest.raises(FileExistsError, match="never replaces a symlink"):
        acc.save_state(link)
    assert link.is_symlink() and (real / "accel_checkpoint.json").exists()


def test_user_files_survive_saving_over_a_checkpoint(tmp_path):
    acc, counter = _accelerator(tmp_path)
    acc.prepare(torch.nn.Linear(2, 2))
    out = Path(acc.save_state(tmp_path / "latest"))
    (out / "eval_results.json").write_text('{"acc": 0.9}')
    (out / "plots").mkdir()
    (out / "plots" / "loss.png").write_bytes(b"\x89PNG")
    (out / "empty").mkdir()
    counter.value = 2
    assert acc.save_state(out) == str(out)
    assert (out / "eval_results.json").read_text() == '{"acc": 0.9}'
    assert (out / "plots" / "loss.png").read_bytes() == b"\x89PNG"
    assert (out / "empty").is_dir()
    manifest = json.loads((out / "accel_checkpoint.json").read_text())
    assert "eval_results.json" not in manifest["files"]  # still the user's, not accel's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]
    counter.value = 0
    acc.load_state(out)  # files accel did not write are not read
    assert counter.value == 2


def test_a_user_file_named_like_a_new_checkpoint_file_is_refused(tmp_path):
    acc, _ = _accelerator(tmp_path)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    (out / "config.json").write_text("mine")

    def hook(models, weights, output_dir):
        Path(output_dir, "config.json").write_text("{}")

    acc.register_save_state_pre_hook(hook)
    with pytest.raises(FileExistsError, match=r"\['config.json'\].*nothing was replaced"):
        acc.save_state(out)
    assert (out / "config.json").read_text() == "mine"
    assert (out / "accel_checkpoint.json").exists()


def test_only_accel_staging_folders_are_cleaned(tmp_path):
    acc, _ = _accelerator(tmp_path)
    target = tmp_path / "ckpt"
    stage = Path(prepare_staging(str(target)))  # what a save killed mid-write leaves
    assert (stage / STAGING_MARKER).exists()
    (stage / "model.safetensors").write_bytes(b"half")
    acc.save_state(target)
    assert not stage.exists()
    assert sorted(os.listdir(target)) == ["accel_checkpoint.json", "custom_checkpoint_0.pkl"] + [
        "random_states_0.pkl"
    ]

    other = Path(staging_dir(str(tmp_path / "other")))
    other.mkdir()
    (other / "notes.txt").write_text("not accel's")
    with pytest.raises(FileExistsError, match="was not made by accel"):
        acc.save_state(tmp_path / "other")
    assert (other / "notes.txt").read_text() == "not accel's"
    assert not (tmp_path / "other").exists()


def test_rotation_keeps_staging_folders_accel_did_not_make(tmp_path):
    acc, _ = _accelerator(tmp_path, automatic_checkpoint_naming=True, total_limit=1)
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    foreign = folder / ".checkpoint_9.partial"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    ours = Path(prepare_staging(str(folder / "checkpoint_7")))
    acc.save_state()
    acc.save_state()
    assert (foreign / "notes.txt").read_text() == "mine"
    assert not ours.exists()


def test_an_unreadable_manifest_is_refused_before_saving_over_it(tmp_path):
    acc, _ = _accelerator(tmp_path)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    (out / "accel_checkpoint.json").write_text("{not json")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointIntegrityError, match="keeps the files.*cannot be read"):
        acc.save_state(out)
    assert (out / "notes.txt").read_text() == "mine"


def test_a_crash_between_the_renames_keeps_user_files(tmp_path):
    acc, _ = _accelerator(tmp_path)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    (out / "notes.txt").write_text("mine")
    # The old checkpoint was moved aside and the new one put in place, then the run died.
    replaced = tmp_path / ".ckpt.replaced"
    os.replace(out, replaced)
    os.replace(acc.save_state(tmp_path / "new"), out)
    assert not (out / "notes.txt").exists()
    acc.save_state(out)  # the next save finishes the interrupted replacement first
    assert (out / "notes.txt").read_text() == "mine"
    assert not replaced.exists()


def test_an_existing_empty_folder_takes_the_checkpoint(tmp_path):
    acc, counter = _accelerator(tmp_path)
    target = tmp_path / "made_by_the_user"
    target.mkdir()
    for value in (2, 3):  # the first save fills the empty folder, the second replaces it
        counter.value = value
        acc.save_state(str(target))
        assert json.loads((target / "accel_checkpoint.json").read_text())["files"]
    counter.value = 0
    acc.load_state(str(target))
    assert counter.value == 3
    assert not any(p.name.startswith(".made_by_the_user") for p in tmp_path.iterdir())


def test_an_empty_staging_folder_left_by_a_failed_save_is_removed(tmp_path):
    # A save that failed on a full disk: one process removed the stage (its marker first)
    # while another still wrote a file, then removed that file; the folder stayed, empty.
    acc, _ = _accelerator(tmp_path)
    target = tmp_path / "ckpt"
    Path(staging_dir(str(target))).mkdir()
    acc.save_state(target)
    assert not Path(staging_dir(str(target))).exists()
    assert (target / "accel_checkpoint.json").exists()


def test_a_stage_removed_while_another_process_writes_keeps_its_marker_until_empty(tmp_path):
    import threading
    import time

    from accel._training_checkpoints.files._folders import remove_staging

    target = str(tmp_path / "ckpt")
    for attempt in range(5):
        stage = Path(prepare_staging(target))
        for k in range(20):
            (stage / f"part_{k}.bin").write_bytes(b"x" * 100)
        stop = time.monotonic() + 0.2
        done = threading.Event()

        def write(stage=stage, stop=stop, done=done):  # the other process, still writing
            n = 0
            while time.monotonic() < stop:
                try:
                    (stage / f"late_{n}.bin").write_bytes(b"y")
                except OSError:
                    pass  # the folder is gone for the moment
                n += 1
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        remove_staging(target)
        writer.join()
        # Gone, or still marked as accel's, or empty: never a folder of files without marker.
        if stage.exists():
            left = os.listdir(stage)
            assert not left or STAGING_MARKER in left, (attempt, left)
        prepare_staging(target)  # the next save takes its place either way
        remove_staging(target)
        assert not stage.exists()
