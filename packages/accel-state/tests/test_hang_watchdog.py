"""The hang watchdog's parts that need no second process: timeout precedence, the record of
each collective, and the report's verdict."""

import datetime

import pytest
import torch

from accel_state import hang_watchdog
from accel_state.hang_watchdog import collective, format_report, hang_timeout


def test_timeout_precedence(monkeypatch):
    monkeypatch.delenv("ACCEL_HANG_TIMEOUT", raising=False)
    assert hang_timeout() == pytest.approx(0.8 * 1800)
    assert hang_timeout(datetime.timedelta(seconds=10)) == pytest.approx(8.0)
    monkeypatch.setenv("ACCEL_HANG_TIMEOUT", "3")
    assert hang_timeout(datetime.timedelta(seconds=10)) == 3.0
    monkeypatch.setenv("ACCEL_HANG_TIMEOUT", "-1")
    with pytest.raises(ValueError, match="ACCEL_HANG_TIMEOUT"):
        hang_timeout()


def test_collective_records_operation_sequence_and_shapes():
    record = hang_watchdog._record
    before = record.sequence
    with collective("gather", {"a": torch.zeros(2, 3), "b": [torch.zeros(4)]}) as call:
        operation, sequence, payload, _ = record.current
        assert (operation, sequence) == ("gather", before + 1) == (call.operation, call.sequence)
        assert hang_watchdog._shapes(payload) == {"a": [2, 3], "b": [[4]]}
    assert record.current is None
    assert record.last[:2] == ("gather", before + 1)


def _where(rank, op=None, counts=None, seq=5):
    where = {"rank": rank, "counts": counts or {}, "stack": f'  File "train.py", line {rank}\n'}
    if op:
        where.update(op=op, seq=seq, shapes=[2], waited=11.0)
    else:
        where.update(last_op="gather", last_seq=4, idle=11.0)
    return where


def test_report_names_a_rank_outside_any_collective_and_one_that_never_answered():
    reports = {0: _where(0, "gather", {"gather": 5}), 1: _where(1, counts={"gather": 4})}
    text = format_report(reports, 3, alarmer=0, timeout=10)
    assert "rank 0 waited more than 10 s in gather #5 (shapes [2])" in text
    assert "STUCK: rank 1 is not in a collective (after gather #4)" in text
    assert "STUCK: rank 2 did not answer" in text
    assert 'File "train.py", line 1' in text and "exits with code 124" in text


def test_report_names_a_rank_in_another_collective():
    reports = {
        0: _where(0, "gather", {"gather": 4}),
        1: _where(1, "barrier", {"gather": 3, "barrier": 1}),
    }
    text = format_report(reports, 2, alarmer=0, timeout=10)
    assert "STUCK: rank 1 waits in barrier #5 while rank 0 waits in gather #5" in text
    assert "STUCK: rank 0" not in text and "same collective" not in text


def test_ranks_waiting_in_the_same_collective_are_not_named():
    reports = {r: _where(r, "gather", {"gather": 2}) for r in range(2)}
    text = format_report(reports, 2, alarmer=1, timeout=10)
    assert "STUCK:" not in text
    assert "every process waits in this same collective" in text


def _local_store():
    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)


def test_watchdog_thread_keeps_no_tensor_of_a_finished_collective():
    # A tensor whose last reference sits on the watchdog thread is freed there; if that happens
    # while the interpreter finalises, the thread is stopped inside torch's C++ and the process
    # aborts ("terminate called without an active exception").
    import gc
    import time
    import weakref

    watchdog = hang_watchdog._Watchdog(_local_store(), rank=0, world=2, timeout=60.0)
    watchdog.start()
    try:
        tensor = torch.zeros(3)
        alive = weakref.ref(tensor)
        with collective("all_reduce", tensor):
            time.sleep(2.5 * watchdog.poll)  # the thread looks at the record meanwhile
        del tensor
        gc.collect()
        assert alive() is None, "the watchdog thread still holds the collective's tensor"
    finally:
        watchdog.stopped.set()
        watchdog.join(10)


def test_stop_watchdog_waits_for_the_thread_to_end(monkeypatch):
    watchdog = hang_watchdog._Watchdog(_local_store(), rank=0, world=2, timeout=60.0)
    watchdog.start()
    monkeypatch.setattr(hang_watchdog, "_watchdog", watchdog)
    hang_watchdog.stop_watchdog()
    assert not watchdog.is_alive()
    assert hang_watchdog._watchdog is None
