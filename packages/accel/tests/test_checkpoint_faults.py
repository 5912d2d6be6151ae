"""Faults around saving: a full disk, a save into the working directory, and an asynchronous
save still writing when the script ends. Nothing written by a failed save stays, earlier
checkpoints are kept, and a save in flight at a normal exit is committed (or the exit fails,
naming it)."""

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from accel_state import AcceleratorState, GradientState

from accel import Accelerator
from accel.utils import ProjectConfiguration

MANIFEST = "accel_checkpoint.json"


@pytest.fixture
def small_disk(tmp_path):
    """A real 24 MB file system (tmpfs) that a save fills up; needs root to mount."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk is simulated with a tmpfs mount, which needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _prepared(project_dir, width=1024):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    acc = Accelerator(project_config=ProjectConfiguration(project_dir=str(project_dir)))
    model = torch.nn.Linear(width, width)
    optimizer = torch.optim.AdamW(model.parameters())
    model, optimizer = acc.prepare(model, optimizer)
    model(torch.randn(2, width)).sum().backward()
    optimizer.step()
    return acc, model


def test_full_disk_names_the_file_removes_the_partial_save_and_keeps_the_last(small_disk):
    acc, model = _prepared(small_disk)  # about 12.6 MB a checkpoint: the second one cannot fit
    first = Path(acc.save_state(small_disk / "first"))
    free_after_first = shutil.disk_usage(small_disk).free
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(OSError) as caught:
        acc.save_state(small_disk / "second")
    error = caught.value
    assert error.errno == errno.ENOSPC
    text = str(error)
    assert str(small_disk / "second") in text and "bytes free" in text
    assert any(name in text for name in ("model.safetensors", "optimizer.bin")), text
    assert "Free space on that disk" in text
    assert sorted(os.listdir(small_disk)) == ["first"]  # no .partial folder is left
    assert shutil.disk_usage(small_disk).free == free_after_first
    acc.load_state(first)
    for key, value in model.state_dict().items():
        assert torch.equal(value, saved[key]), key


def test_a_disk_with_no_byte_left_fails_at_the_first_file_and_leaves_no_staging(small_disk):
    # Found by the chaos soak (seed 95): with 0 bytes free, the staging folder can still be
    # made but its marker cannot be written; that failure must read like any other full disk.
    acc, _ = _prepared(small_disk, width=4)
    filler = small_disk / "filler.bin"
    with open(filler, "wb", buffering=0) as handle:
        for chunk in (1 << 20, 4096):  # megabytes, then the last pages
            with contextlib.suppress(OSError):
                while handle.write(b"\0" * chunk):
                    pass
    assert shutil.disk_usage(small_disk).free < 4096
    with pytest.raises(OSError) as caught:
        acc.save_state(small_disk / "ckpt")
    error = caught.value
    assert error.errno == errno.ENOSPC
    text = str(error)
    assert str(small_disk / "ckpt") in text and "Free space on that disk" in text, text
    assert sorted(os.listdir(small_disk)) == ["filler.bin"]  # no .partial folder is left


def test_full_disk_during_an_asynchronous_write_reads_as_one_sentence_per_cause(small_disk):
    from accel.utils import AsyncSaveError

    acc, _ = _prepared(small_disk)
    acc.save_state(small_disk / "first")
    handle = acc.save_state(small_disk / "second", async_save=True)
    with pytest.raises(AsyncSaveError) as caught:
        handle.wait()
    text = str(caught.value)
    assert any(name in text for name in ("model.safetensors", "optimizer.bin")), text
    assert "Free space on that disk" in text
    assert ".." not in text.replace(str(small_disk), ""), text  # no doubled full stop
    assert sorted(os.listdir(small_disk)) == ["first"]


def test_save_into_the_working_directory_is_refused_and_keeps_it(tmp_path, monkeypatch):
    acc, _ = _prepared(tmp_path, width=4)
    here = tmp_path / "run"
    (here / "sub").mkdir(parents=True)
    for cwd, target in ((here, "."), (here / "sub", str(here))):
        monkeypatch.chdir(cwd)
        with pytest.raises(ValueError, match="working directory of this process") as caught:
            acc.save_state(target)
        assert "Save into a subfolder" in str(caught.value)
        assert os.getcwd() == str(cwd)
    assert sorted(os.listdir(tmp_path)) == ["run"]  # nothing staged beside it
    monkeypatch.chdir(here)
    assert Path(acc.save_state("checkpoint")).name == "checkpoint"  # a subfolder is fine


SCRIPT = """
import sys, torch
from accel import Accelerator
from accel.utils import ProjectConfiguration
acc = Accelerator(project_config=ProjectConfiguration(project_dir=sys.argv[1]))
model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(3)])
optimizer = torch.optim.AdamW(model.parameters())
model, optimizer = acc.prepare(model, optimizer)
model(torch.randn(2, 2048)).sum().backward()
optimizer.step()
handle = acc.save_state(sys.argv[2], async_save=True)
print("returned while writing:", not handle.done(), flush=True)
{ending}
"""


def _run_script(tmp_path, project_dir, target, ending):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.format(ending=textwrap.dedent(ending)))
    return subprocess.run(
        [sys.executable, str(path), str(project_dir), str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "ending", ["", "sys.exit(0)", "raise SystemExit"], ids=["falls off the end", "exit", "raise"]
)
def test_async_save_in_flight_is_committed_at_normal_exit(tmp_path, ending):
    target = tmp_path / "ckpt"
    done = _run_script(tmp_path, tmp_path, target, ending)
    assert done.returncode == 0, done.stderr
    assert "returned while writing: True" in done.stdout  # the exit really had to wait
    assert (target / MANIFEST).is_file(), done.stderr
    assert not (tmp_path / ".ckpt.partial").exists()
    assert "failed" not in done.stderr


def test_async_save_failing_at_exit_names_it_and_exits_non_zero(tmp_path, small_disk):
    target = small_disk / "ckpt"  # 150 MB of weights and optimizer state into 24 MB
    done = _run_script(tmp_path, tmp_path, target, "")
    assert done.returncode == 1, done.stderr
    assert f"asynchronous save_state of {str(target)!r} failed" in done.stderr
    assert "No space left on device" in done.stderr
    assert os.listdir(small_disk) == []


@pytest.mark.parametrize("world_size", [10**7, 10**9, 2])
def test_a_world_size_the_files_do_not_back_is_refused_before_anything_is_built(
    tmp_path, world_size
):
    import json
    import tracemalloc

    from accel.utils import CheckpointIntegrityError

    acc, model = _prepared(tmp_path, width=4)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["world_size"] = world_size
    (out / MANIFEST).write_text(json.dumps(manifest))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tracemalloc.start()
    with pytest.raises(CheckpointIntegrityError, match=f"'world_size' is {world_size} but"):
        acc.load_state(out)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20  # nothing was built from the count
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize("algorithm", ["sha256", "blake2b"])
def test_a_strong_checksum_and_a_pinned_digest_refuse_a_forged_file(tmp_path, algorithm):
    import hashlib
    import json

    from accel.utils import CheckpointIntegrityError, checkpoint_digest

    acc, model = _prepared(tmp_path, width=8)
    out = Path(acc.save_state(tmp_path / "ckpt", checksum=algorithm))
    manifest = json.loads((out / MANIFEST).read_text())
    digest = hashlib.new(algorithm, (out / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["checksums"]["model.safetensors"] == f"{algorithm}:{digest}"
    pinned = checkpoint_digest(str(out))
    acc.load_state(out, expected_digest=pinned)  # intact: loads

    # A forger rewrites a file and recomputes its entry: the checksum alone cannot tell...
    before = {k: v.clone() for k, v in model.state_dict().items()}
    data = bytearray((out / "model.safetensors").read_bytes())
    data[-4:] = b"\x00\x00\x80\x7f"  # the last float becomes +inf
    (out / "model.safetensors").write_bytes(bytes(data))
    manifest["checksums"]["model.safetensors"] = (
        f"{algorithm}:{hashlib.new(algorithm, bytes(data)).hexdigest()}"
    )
    (out / MANIFEST).write_text(json.dumps(manifest))
    # ... but the manifest's pinned digest does, and nothing changes.
    with pytest.raises(CheckpointIntegrityError, match="manifest digest recorded"):
        acc.load_state(out, expected_digest=pinned)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_pinned_digest_needs_strong_checksums(tmp_path):
    from accel.utils import CheckpointIntegrityError, checkpoint_digest

    acc, _ = _prepared(tmp_path, width=4)
    out = acc.save_state(tmp_path / "ckpt")  # CRC-32
    with pytest.raises(CheckpointIntegrityError, match="checksum='sha256'"):
        acc.load_state(out, expected_digest=checkpoint_digest(out))
    with pytest.raises(ValueError, match="got 'md5'"):
        acc.save_state(tmp_path / "other", checksum="md5")
    assert not (tmp_path / "other").exists()
