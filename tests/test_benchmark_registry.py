"""benchmarks/run.py knows every benchmark: each ``bench_*.py`` is in its registry, each flag the
registry passes is one its script defines, ``--list`` works, and the shared page helpers
(the ``Run`` stamp, the generated sections) keep what they do not own. No benchmark runs here.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


runner = _load("run")  # puts benchmarks/ on sys.path and imports the two modules below
registry = sys.modules["_registry"]
machine = sys.modules["_machine"]


def test_every_benchmark_script_is_in_the_registry() -> None:
    scripts = {path.relative_to(BENCHMARKS).as_posix() for path in BENCHMARKS.rglob("bench_*.py")}
    registered: set[str] = set()
    for benchmark in registry.BENCHMARKS:
        registered |= {benchmark.script, *benchmark.covers}
    assert scripts - registered == set(), "add these scripts to benchmarks/_registry.py"
    assert {s for s in registered if not (BENCHMARKS / s).is_file()} == set()
    names = [benchmark.name for benchmark in registry.BENCHMARKS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("benchmark", registry.BENCHMARKS, ids=lambda b: b.name)
def test_every_flag_passed_is_defined_by_its_script(benchmark: object) -> None:
    script = BENCHMARKS / benchmark.script  # type: ignore[attr-defined]
    source = script.read_text(encoding="utf-8")
    # A flag may be defined by a module of the script's own folder that it imports (shared
    # page arguments of the CLI benchmarks).
    for local in re.findall(r"^from (\w+) import", source, flags=re.M):
        if (script.parent / f"{local}.py").is_file():
            source += (script.parent / f"{local}.py").read_text(encoding="utf-8")
    arguments = [*benchmark.full, *(benchmark.short or ()), benchmark.out_flag or ""]  # type: ignore[attr-defined]
    flags = {argument for argument in arguments if argument.startswith("--")}
    assert {flag for flag in flags if f'"{flag}"' not in source} == set()
    if benchmark.short is None:  # type: ignore[attr-defined]
        assert benchmark.full_only  # type: ignore[attr-defined]  # the reason is shown


def test_list_prints_every_benchmark_and_how_it_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "--list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for benchmark in registry.BENCHMARKS:
        assert benchmark.name in done.stdout
    assert "full mode only (" in done.stdout
    assert "short: --runs 1" in done.stdout


def test_a_mode_is_required_and_unknown_names_are_refused(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as raised:
        runner.main([])
    assert raised.value.code == 2
    assert "choose --short" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no_such_bench is not one. Known: .*import_time"):
        runner.main(["--short", "--only", "import_time,no_such_bench"])


def test_skip_reasons() -> None:
    full_only = registry.by_name()["bigmodel"]
    assert runner.skip_reason(full_only, short=True).startswith("full mode only: ")
    assert "without --out" in runner.skip_reason(full_only, short=False, custom_out=True)
    short = runner.command(registry.by_name()["collectives"], True, Path("/tmp/x.md"))
    assert short[1:3] == ["-m", "torch.distributed.run"]
    assert short[-4:] == ["--sizes", "1 KB", "--out", "/tmp/x.md"]


def test_stamp_replaces_its_own_line_and_keeps_the_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nHand-written text.\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n")
    line = machine.run_line("one", "python x.py", 3.0, 1.5, 2.5, ("no-such-dist",))
    assert line.startswith("Run `one` (`python x.py`): ")
    assert "Python 3." in line and "torch " in line and "load average 1.5 at start, 2.5" in line
    assert "no-such-dist" not in line  # absent distributions are left out
    machine.stamp(page, "one", line)
    machine.stamp(page, "two", "Run `two` (`y`): first")
    machine.stamp(page, "two", "Run `two` (`y`): second")
    lines = page.read_text().splitlines()
    assert lines[:5] == ["# Title", "", line, "Run `two` (`y`): second", ""]
    assert lines[5:] == ["Hand-written text.", "", "| a | b |", "| --- | --- |", "| 1 | 2 |"]


def test_generated_section_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nAnalysis written by hand.\n")
    machine.write_section(page, "k", "Title", "## Latest\n\nfirst")
    machine.write_section(page, "other", "Title", "## Other\n\nkept")
    machine.write_section(page, "k", "Title", "## Latest\n\nsecond")
    text = page.read_text()
    assert text.startswith("# Title\n\nAnalysis written by hand.\n")
    assert "second" in text and "first" not in text and "kept" in text
    assert text.count("<!-- generated: k -->") == 1
    fresh = tmp_path / "new.md"
    machine.write_section(fresh, "k", "New page", "body")
    assert fresh.read_text().startswith("# New page\n\n<!-- generated: k -->\nbody\n")


def test_a_timed_out_benchmark_is_stopped_with_all_its_processes(tmp_path: Path) -> None:
    # torchrun starts its workers in sessions of their own: the process group is not enough
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the test's processes did not start"
            time.sleep(0.02)
        child = int(pid_file.read_text())
        runner._kill_tree(parent.pid)
        assert parent.wait(timeout=10) == -9
        while _alive(child):
            assert time.monotonic() < deadline, f"process {child} outlived the kill"
            time.sleep(0.02)
    finally:
        if parent.poll() is None:
            parent.kill()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_failure_reports_its_last_error_line_and_keeps_the_output(tmp_path: Path) -> None:
    script = tmp_path / "bench_broken.py"
    script.write_text(
        "import sys\nprint('working')\n"
        "if sys.argv[1] == 'fail':\n    sys.exit('ValueError: the size must be positive')\n"
    )
    failing = registry.Benchmark("broken", str(script), "p.md", short=("fail",))
    outcome = runner.run_one(failing, short=True, out=tmp_path, timeout=60, logs=tmp_path)
    assert outcome.status == "failed"
    assert outcome.detail.startswith("exit 1: ValueError: the size must be positive (output: ")
    log = Path(outcome.detail.rsplit("(output: ", 1)[1].rstrip(")"))
    assert log.read_text().startswith("working\n")
    silent = registry.Benchmark("silent", str(script), "p.md", short=("ok",))
    outcome = runner.run_one(silent, short=True, out=tmp_path, timeout=60, logs=tmp_path)
    assert outcome.status == "failed" and "was not written" in outcome.detail


def test_kept_blocks_survive_a_script_that_rewrites_its_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    block = "<!-- kept -->\n## Reading\n\nBy hand.\n<!-- end kept -->"
    page.write_text(f"# Old\n\n| a |\n| --- |\n| 1 |\n\n{block}\n")
    kept = machine.kept_blocks(page)
    assert kept == [block]
    page.write_text("# New\n\n| a |\n| --- |\n| 2 |\n")  # what the script writes
    machine.restore_kept(page, kept)
    machine.restore_kept(page, kept)  # once only
    assert page.read_text() == f"# New\n\n| a |\n| --- |\n| 2 |\n\n{block}\n"
    assert machine.kept_blocks(tmp_path / "missing.md") == []


def test_pipeline_page_scripts_each_replace_only_their_own_section(tmp_path: Path) -> None:
    # bench_pipeline.py and bench_stage_memory.py write one page
    pipeline = _load("pipeline/bench_pipeline")
    stage_memory = _load("pipeline/bench_stage_memory")
    page = tmp_path / "pipeline.md"
    page.write_text((BENCHMARKS / "results" / "pipeline.md").read_text())
    times = {"accel": [0.2, 0.21, 0.21, 0.22, 0.22], "schedule": [0.2] * 5, "floor": [0.2] * 5}
    rows = [
        {"mode": "whole", "threads": 1, "seconds": 0.4},
        {"mode": "interleaved", "chunks": 2, "times": times, "split_points": ["transformer.h.4"]}
        | {"diff_floor": 0.0, "diff_schedule": 0.0, "diff_whole": 1e-7, "same_operations": True}
        | {"check_us": 50.0, "broadcast_us": 350.0},
    ]
    rows.append({**rows[1], "chunks": 4, "times": {side: [0.3] * 4 for side in times}})
    pipeline.write_table(rows, {"batch": "RuntimeError: shape"}, 5, page)
    text = page.read_text()
    assert "## Memory per process: stage-only loading vs the whole model (8 layers)" in text
    assert "accel prepare_pippy(checkpoint=...), 2 processes" in text
    assert "| 2 chunks of 8 | 210 (210-220) | 200 (200-200) | 200 (200-200) " in text
    assert "| 1.050x (1.050-1.100) | 10.00 | accel slower, beyond the spread |" in text
    assert "accel's schedule, called directly | 2 x 1 | 2 | 8 | 200 |" in text
    assert "| 4 chunks of 4 | 300 (300-300) " in text and "too few rounds to tell" in text
    assert "accel's stages run the same operations" in text and "(350 µs)" in text
    assert "At 2 chunks accel is slower beyond the spread, by 5.0%; " in text
    assert "accounts for 0.20 points of it" in text
    assert "| floor: torch.distributed.pipelining by hand | 2 x 1 | 1 |" not in text  # old rows
    stage_memory.write_page(page, [stage_memory._heading(), "", "New stage memory text."])
    text = page.read_text()
    assert "New stage memory text." in text and "Reading the table" not in text
    assert "| 1.050x (1.050-1.100) |" in text
    assert text.count("<!-- generated: ") == 2
    assert [line for line in text.splitlines() if line.startswith("![")] == [
        "![accel-pipeline: pipelined inference throughput on 2 processes](pipeline_1.png)",
        "![accel against the floor, call by call in one launch](pipeline_2.png)",
    ]
