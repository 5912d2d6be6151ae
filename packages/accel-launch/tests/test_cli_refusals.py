"""Command-line refusals that need no torch come before torch is imported, and long work says
what it does (issue 42)."""

from __future__ import annotations

import pytest

from .conftest import accel
from .test_unbounded_inputs import _no_torch_run


def _checkpoint(folder):
    import torch
    import torch.distributed.checkpoint as dcp

    with pytest.warns(UserWarning):  # dcp's "assuming the intent is to save in a single process"
        dcp.save({"model": {"w": torch.arange(6.0).reshape(2, 3)}}, checkpoint_id=str(folder))
    return folder


def test_merge_weights_refuses_an_output_holding_weights_before_torch(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".metadata").write_bytes(b"")
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"keep")
    r = _no_torch_run(["merge-weights", str(tmp_path / "ckpt"), str(out)])
    assert r.returncode == 2 and "does not overwrite merged weights" in r.stderr, r.stderr
    assert "NO TORCH" in r.stdout and (out / "model.safetensors").read_bytes() == b"keep"


def test_merge_weights_refuses_removing_a_folder_holding_the_output_before_torch(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / ".metadata").write_bytes(b"")
    r = _no_torch_run(["merge-weights", str(ckpt), str(ckpt / "inside"), "--remove_checkpoint_dir"])
    assert r.returncode == 2 and "would be deleted too" in r.stderr, r.stderr
    assert "NO TORCH" in r.stdout and ckpt.is_dir() and not (ckpt / "inside").exists()


def test_merge_weights_says_what_it_reads_and_writes_without_torch_warnings(tmp_path):
    ckpt = _checkpoint(tmp_path / "ckpt")
    r = accel("merge-weights", str(ckpt), str(tmp_path / "out"), "--max_shard_size", "10B")
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith(f"accel merge-weights: reading {ckpt} (1 tensor"), r.stderr
    assert "1 safetensors file(s) in" in lines[0], r.stderr
    assert lines[1] == "accel merge-weights: [1/1] model.safetensors: read and wrote 24 B"
    assert len(lines) == 2 and "Warning" not in r.stderr, r.stderr
    assert (
        r.stdout.strip() == f"accel merge-weights: wrote {tmp_path / 'out' / 'model.safetensors'}"
    )


def test_the_progress_line_draws_only_on_a_terminal():
    import io

    from accel_launch._status import ByteProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, drawn in ((io.StringIO(), False), (Tty(), True)):
        bar = ByteProgress("merging", 4 << 30, stream, interval=0)
        bar.update(1 << 30)
        bar.update(3 << 30)
        bar.close()
        text = stream.getvalue()
        assert ("25% of 4.0 GiB" in text and "100% of 4.0 GiB" in text) is drawn, text
        assert text.endswith("\r\033[K") is drawn
