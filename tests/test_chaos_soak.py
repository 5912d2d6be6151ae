"""The short chaos soak: one seeded run per fault kind of ``tools/chaos.py`` (a rank SIGKILLed
mid-step, the launcher stopped and started again, a kill inside a synchronous save, inside an
asynchronous save's background write, inside ``load_state``, a disk that fills up before a
save), each a 2-process ``accel-launch --max_restarts 2`` job that must end with weights,
optimizer state and data order bit-identical to an uninterrupted run and no ``.partial``
folder. The full soak (100 seeds) is ``benchmarks/fault_tolerance/bench_chaos.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_chaos():
    spec = importlib.util.spec_from_file_location("chaos", ROOT / "tools" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos"] = module
    spec.loader.exec_module(module)
    return module


chaos = _load_chaos()

SEEDS = {
    "rank-kill": 0,  # rank 0, after the update of step 4, before its checkpoint
    "launcher-sigterm": 1,  # SIGTERM 0.25 s after step 1 was logged; the same command again
    "sync-save-kill": 2,  # rank 0, once the staging folder of step 12's save holds 3 files
    "async-write-kill": 9,  # rank 0, as soon as step 6's background writer thread runs
    "load-kill": 4,  # rank 1 at step 10, then rank 1 in the restart's load_state pre-hook
    "disk-full": 5,  # 12 KiB left before the save of step 8 (asynchronous)
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chaos.run_baseline(tmp_path_factory.mktemp("uninterrupted"))


def test_every_kind_has_a_seed_and_seeds_draw_their_kind() -> None:
    assert set(SEEDS) == set(chaos.KINDS)
    for kind, seed in SEEDS.items():
        assert chaos.plan(seed).kind == kind
    assert chaos.plan(9) == chaos.plan(9)  # a seed always draws the same fault


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", list(SEEDS))
def test_run_hit_by_a_fault_ends_bit_identical(tmp_path: Path, baseline: Path, kind: str) -> None:
    fault = chaos.plan(SEEDS[kind])
    result = chaos.run_fault(fault, tmp_path / "run", baseline)
    if result.skipped:
        pytest.skip(result.skipped)
    report = chaos.report(result)
    assert chaos.hit(result), f"the fault did not hit as planned: {report}"
    assert not result.problems, report
    assert not result.strays, report
    if kind in ("launcher-sigterm", "disk-full"):
        assert result.launches == 2, report  # stopped, then the same command again
