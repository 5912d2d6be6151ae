"""A disk-offloaded model computes on its checkpoint's own pages under a read lease; a writer or
truncation from any process waits only until the lease is given up, tensors still using those
pages keep their bytes, and the model then reads with checked copies (a named error when the
file changed). Each scenario runs in a child process: a mistake would kill it with SIGBUS."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from accel_bigmodel.files._file_guard import FileGuard
from accel_bigmodel.files._leased_map import SUPPORTED, LeasedMap

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="read leases and mremap are Linux's")
SCENARIOS = os.path.join(os.path.dirname(__file__), "lease_scenarios.py")


def _scenario(name: str) -> dict:
    done = subprocess.run(
        [sys.executable, SCENARIOS, name], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-2000:]}"
    (case,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert case["first_ok"], case
    return case


def test_a_truncation_by_another_process_waits_for_the_lease_and_kept_weights_keep_their_bytes():
    case = _scenario("escaped")
    assert case["leased"] == [True] and case["mapped_modules"] > 0, case
    # The kept weight was a view of the checkpoint's pages; the lease was given up on request
    # (well before the kernel's 45 s lease-break time), after its pages became anonymous
    # memory with the same bytes.
    assert case["kept_mapped_from"].endswith("model.safetensors"), case
    assert case["truncate_waited_s"] < 20, case
    assert case["kept_same"] and case["kept_mapped_from_after"] == "", case
    assert case["after"] == "OffloadedFileChangedError", case
    assert "was truncated or extended" in case["after_message"], case


def test_this_process_opening_its_leased_file_for_writing_does_not_wait_for_the_kernel():
    case = _scenario("own-writer")
    assert case["leased"] == [True], case
    assert case["open_waited_s"] < 20, case  # the watching thread gave the lease up
    assert case["second_ok"], case  # nothing was written: the copies read the same bytes


def test_a_file_open_for_writing_elsewhere_gets_no_lease_and_is_read_with_copies():
    case = _scenario("writer-first")
    assert case["leased"] == [False] and case["mapped_modules"] == 0, case
    assert case["second_ok"], case


def test_no_lease_while_this_process_has_the_file_open_for_writing(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(range(256)) * 64)
    with open(path, "r+b"):
        assert FileGuard(str(path)).leased_map() is None
    guard = FileGuard(str(path))
    leased = guard.leased_map()
    assert leased is not None and leased.held()
    view = leased.view(256, 512, torch.int32, (8, 16))
    assert view is not None and view.view(torch.uint8).flatten().tolist() == list(range(256)) * 2
    assert leased.view(1, 8, torch.int32, (2,)) is None  # not at a multiple of 4 bytes
    guard.close()
    assert not leased.held() and guard.leased_map() is None


def test_giving_up_moves_only_views_still_in_use_off_the_file(tmp_path):
    path = tmp_path / "g.bin"
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        leased = LeasedMap.open(fd, 1 << 20, str(path))
        assert leased is not None
        kept = leased.view(8192, 65536, torch.uint8, (65536,))
        dropped = leased.view(4096 * 40, 4096, torch.uint8, (4096,))
        assert kept is not None and dropped is not None
        values = kept.clone()
        del dropped
        assert leased.give_up() == 65536  # only the kept view's bytes
        assert not leased.held() and leased.view(0, 16, torch.uint8, (16,)) is None
        os.truncate(path, 0)
        assert torch.equal(kept, values)
    finally:
        os.close(fd)


@pytest.mark.parametrize("how", ["close", "collect"])
def test_a_guard_closed_or_collected_moves_views_in_use_off_the_file_first(tmp_path, how):
    import gc

    path = tmp_path / "c.bin"
    path.write_bytes(os.urandom(1 << 20))
    guard = FileGuard(str(path))
    leased = guard.leased_map()
    assert leased is not None
    kept = leased.view(4096, 8192, torch.float32, (2048,))
    assert kept is not None
    values = kept.clone()
    if how == "close":
        guard.close()
    else:
        del guard, leased
        gc.collect()
    os.truncate(path, 0)  # no lease left to wait for; the view's pages are the process's own
    assert torch.equal(kept.view(torch.uint8), values.view(torch.uint8))  # (random bytes: NaNs)
