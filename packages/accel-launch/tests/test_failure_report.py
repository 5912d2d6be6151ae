"""The launcher's last line when processes fail, from torchrun's own failure records.

Each failure is a real ``ProcessFailure``: torchrun reads the error file a process wrote as it
raised, or makes a message up from the exit code or signal when there is none.
"""

import json
import signal
import time

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from accel_launch.launchers._processes import PEER_STOPPED, _report_failure


def _failure(tmp_path, rank, exitcode, message=None, timestamp=100):
    error_file = tmp_path / f"error_{rank}.json"
    if message is not None:
        error_file.write_text(
            json.dumps(
                {"message": {"message": message, "extraInfo": {"timestamp": str(timestamp)}}}
            )
        )
    return ProcessFailure(
        local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=str(error_file)
    )


def _last_line(capsys, failures):
    code = _report_failure(ChildFailedError("train.py", failures))
    return code, capsys.readouterr().err.strip().splitlines()[-1]


def test_the_rank_that_raised_is_named_over_the_peer_whose_collective_failed(tmp_path, capsys):
    failures = {
        0: _failure(tmp_path, 0, 1, PEER_STOPPED + "a collective failed", timestamp=90),
        1: _failure(tmp_path, 1, 1, "ValueError: bad batch", timestamp=95),
    }
    code, line = _last_line(capsys, failures)
    assert code == 1
    assert line == (
        "accel launch: process of global rank 1 failed with exit code 1 (ValueError: bad batch; "
        "its traceback is above, each line starting [rank 1]); every other process was stopped."
    )


def test_a_rank_that_raised_then_got_the_stop_signal_keeps_its_exception(tmp_path, capsys):
    # torchrun saw rank 0 (whose collective failed) first and sent SIGTERM to rank 1 while rank 1
    # was exiting after its exception: the exception is the cause, and its exit code is 1.
    failures = {
        0: _failure(tmp_path, 0, 1, PEER_STOPPED + "a collective failed", timestamp=90),
        1: _failure(tmp_path, 1, -signal.SIGTERM, "ValueError: bad batch", timestamp=95),
    }
    code, line = _last_line(capsys, failures)
    assert code == 1
    assert line == (
        "accel launch: process of global rank 1 failed with exit code 1 (ValueError: bad batch; "
        "its traceback is above, each line starting [rank 1]; signal 15 reached it as it "
        "exited); every other process was stopped."
    )


def test_a_process_killed_without_an_error_file_is_reported_as_killed(tmp_path, capsys):
    code, line = _last_line(capsys, {1: _failure(tmp_path, 1, -signal.SIGKILL)})
    assert code == 1
    assert line.startswith(
        "accel launch: process of global rank 1 failed with exit code -9 (killed by signal 9; "
        "Signal 9 (SIGKILL) received by PID 1001)"
    ), line


def test_the_rank_that_raised_is_named_over_one_stopped_in_the_same_second(tmp_path, capsys):
    # Rank 1 raised; torchrun then stopped rank 0 with SIGTERM. Both carry the same whole-second
    # timestamp, so the lower rank would win a tie on time alone.
    now = int(time.time())
    failures = {
        0: _failure(tmp_path, 0, -signal.SIGTERM),
        1: _failure(tmp_path, 1, 1, "RuntimeError: rank 1 failed on purpose", timestamp=now),
    }
    failures[0].timestamp = now
    code, line = _last_line(capsys, failures)
    assert code == 1
    assert line.startswith(
        "accel launch: process of global rank 1 failed with exit code 1 (RuntimeError: rank 1 "
        "failed on purpose;"
    ), line


def test_a_signal_other_than_the_stop_signal_is_named_before_the_stopped_ones(tmp_path, capsys):
    # Rank 1 was killed (the kernel's out-of-memory killer sends SIGKILL); torchrun then sent
    # SIGTERM to rank 0, earlier in the same second as far as the records go.
    failures = {
        0: _failure(tmp_path, 0, -signal.SIGTERM),
        1: _failure(tmp_path, 1, -signal.SIGKILL),
    }
    failures[0].timestamp = failures[1].timestamp - 1
    code, line = _last_line(capsys, failures)
    assert code == 1
    assert "global rank 1 failed with exit code -9 (killed by signal 9;" in line, line


def test_between_a_killed_process_and_one_that_raised_the_earlier_is_named(tmp_path, capsys):
    # Either can be the cause (an exception the collective check does not recognise as a
    # peer's stop, or a kill that made a peer raise): only torchrun's own SIGTERM is passed over.
    killed = _failure(tmp_path, 1, -signal.SIGKILL)
    raised = _failure(tmp_path, 0, 1, "OSError: disk full", timestamp=killed.timestamp + 1)
    code, line = _last_line(capsys, {0: raised, 1: killed})
    assert "global rank 1 failed with exit code -9 (killed by signal 9;" in line, line
    raised = _failure(tmp_path, 0, 1, "OSError: disk full", timestamp=killed.timestamp - 1)
    code, line = _last_line(capsys, {0: raised, 1: killed})
    assert "global rank 0 failed with exit code 1 (OSError: disk full;" in line, line
