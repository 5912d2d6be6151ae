"""The script behind ``accel test`` (``python -m accel_launch.test_script``).

It checks the state, process control, splitting and every collective on however many
processes it was launched with, and prints a clear verdict."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable

import torch
from accel_collectives import (
    broadcast,
    broadcast_object_list,
    gather,
    gather_object,
    pad_across_processes,
    reduce,
)
from accel_state import PartialState

CHECKS: list[tuple[str, Callable[[PartialState], None]]] = []


def check(function: Callable[[PartialState], None]) -> Callable[[PartialState], None]:
    CHECKS.append((function.__name__, function))
    return function


@check
def state(s: PartialState) -> None:
    assert 0 <= s.process_index < s.num_processes
    assert s.is_main_process == (s.process_index == 0)
    assert s.is_last_process == (s.process_index == s.num_processes - 1)
    expected = "NO" if s.num_processes == 1 else ("MULTI_CPU" if s.device.type == "cpu" else None)
    if expected:
        assert s.distributed_type.value == expected, s.distributed_type


@check
def process_control(s: PartialState) -> None:
    ran: list[int] = []
    s.on_main_process(lambda: ran.append(0))()
    s.on_last_process(lambda: ran.append(-1))()
    s.on_process(process_index=s.process_index)(lambda: ran.append(s.process_index))()
    want = ([0] if s.is_main_process else []) + ([-1] if s.is_last_process else [])
    assert ran == [*want, s.process_index], ran
    with s.main_process_first():
        pass
    s.wait_for_everyone()


@check
def split_between_processes(s: PartialState) -> None:
    items = list(range(2 * s.num_processes + 1))
    with s.split_between_processes(items, apply_padding=True) as mine:
        got = gather_object(mine)
    assert sorted(set(got)) == items, got
    assert len(got) == s.num_processes * len(mine)


@check
def collectives(s: PartialState) -> None:
    n, r = s.num_processes, s.process_index
    t = torch.tensor([float(r)], device=s.device)
    assert gather(t).tolist() == [float(i) for i in range(n)]
    assert reduce(t, reduction="sum").item() == sum(range(n))
    assert abs(reduce(t, reduction="mean").item() - sum(range(n)) / n) < 1e-6
    assert broadcast(t.clone() + 10).item() == 10.0
    assert broadcast_object_list([r])[0] == 0
    ragged = torch.ones(r + 1, device=s.device)
    padded = pad_across_processes(ragged)
    assert padded.shape[0] == n and padded.sum().item() == r + 1
    assert gather_object({"rank": r}) == [{"rank": i} for i in range(n)]
    nested = gather({"a": t, "b": [t * 2]})
    assert nested["b"][0].tolist() == [2.0 * i for i in range(n)]


def main() -> int:
    s = PartialState()
    if s.is_main_process:
        print(
            f"accel test: {s.num_processes} process(es) ready ({s.distributed_type.value}, "
            f"{s.device}); {len(CHECKS)} checks",
            flush=True,
        )
    failures = []
    for name, function in CHECKS:
        start = time.perf_counter()
        try:
            function(s)
        except Exception:
            failures.append(name)
            traceback.print_exc()
        # A check passes when it passed on every process; the main process names it.
        passed = gather_object([name not in failures])
        if s.is_main_process:
            status = "ok  " if all(passed) else "FAIL"
            seconds = time.perf_counter() - start
            print(f"accel test: {status} {name} ({seconds:.2f}s)", flush=True)
    if s.is_main_process or failures:
        verdict = "FAIL " + ", ".join(failures) if failures else "all checks passed"
        print(
            f"[process {s.process_index}/{s.num_processes}, {s.distributed_type.value}, "
            f"{s.device}] {verdict}",
            flush=True,
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
