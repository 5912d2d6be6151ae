"""`accel merge-weights` on a full disk and on a checkpoint whose files disagree: one line that
names the cause, and nothing of the failed merge left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

from .conftest import accel


@pytest.fixture
def small_disk(tmp_path):
    """A real 4 MB file system (tmpfs) that a merge fills up; needs root to mount."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk is simulated with a tmpfs mount, which needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _checkpoint(folder, width=1024):
    import torch.distributed.checkpoint as dcp

    weights = {"model.w": torch.ones(width, width), "model.b": torch.ones(width)}
    dcp.save(weights, checkpoint_id=str(folder), no_dist=True)


@pytest.mark.parametrize("shard", ["10GB", "2MB"], ids=["one-file", "shards"])
def test_a_merge_onto_a_full_disk_names_it_and_leaves_nothing(tmp_path, small_disk, shard):
    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt)  # 4 MB of weights: more than the disk holds
    free = shutil.disk_usage(small_disk).free
    out = small_disk / "merged"
    r = accel("merge-weights", str(ckpt), str(out), "--max_shard_size", shard, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = [line for line in r.stderr.splitlines() if "error:" in line]
    assert "No space left on device" in line and str(out) in line, line
    assert "Free space on that disk" in line and "this merge wrote was removed" in line, line
    assert not out.exists() or os.listdir(out) == [], os.listdir(out)
    assert shutil.disk_usage(small_disk).free == free


def test_a_shape_the_files_cannot_hold_is_refused_before_anything_is_allocated(tmp_path):
    import pickle
    import resource

    from accel_bigmodel import read_dcp_metadata_safely

    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt, width=4)
    metadata = read_dcp_metadata_safely(ckpt)
    metadata.state_dict_metadata["model.w"].size = torch.Size([1 << 20, 1 << 20])  # 4 TiB
    (ckpt / ".metadata").write_bytes(pickle.dumps(metadata))

    def capped() -> None:  # an attempt to allocate the shape fails here, not on the machine
        resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))

    out = tmp_path / "out"
    command = [sys.executable, "-m", "accel_launch.cli", "merge-weights", str(ckpt), str(out)]
    r = subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=capped)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = [line for line in r.stderr.splitlines() if "error:" in line]
    assert "'model.w'" in line and "[1048576, 1048576]" in line, line
    assert "4398046511104 bytes" in line and "inconsistent" in line, line
    assert not (out / "model.safetensors").exists()


def test_a_damaged_shard_file_is_one_line_naming_the_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt, width=64)
    (shard,) = ckpt.glob("*.distcp")
    shard.write_bytes(os.urandom(shard.stat().st_size))  # same size, damaged bytes
    out = tmp_path / "out"
    r = accel("merge-weights", str(ckpt), str(out), check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    (line,) = [line for line in r.stderr.splitlines() if "error:" in line]
    assert f"{str(ckpt)!r}" in line and "damaged" in line, line
    assert not (out / "model.safetensors").exists()
