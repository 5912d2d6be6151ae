"""accel.test_utils: the skip decorators seen skipping and running, the launch command launching
two real processes, the command runner's failures and timeout, the unittest bases, and the
example comparison."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import unittest
from pathlib import Path

import pytest
import torch
from accel_state import is_deepspeed_available

import accel
from accel.test_utils import (
    get_launch_command,
    path_in_accelerate_package,
    require_cpu,
    require_cuda,
    require_multi_device,
    require_non_cpu,
    require_single_device,
    require_torch_min_version,
    skip,
    slow,
    torch_device,
)
from accel.test_utils.examples import compare_against_test
from accel.test_utils.testing import (
    AccelerateTestCase,
    SubprocessCallException,
    TempDirTestCase,
    assert_exception,
    capture_call_output,
    execute_subprocess_async,
    get_torch_dist_unique_port,
    pytest_xdist_worker_id,
    require_deepspeed,
    require_transformers,
    run_command,
)

SCRIPTS = Path(__file__).parent / "scripts"


def outcome(decorator, **kwargs) -> tuple[str, str]:
    """Run one test decorated with ``decorator`` through unittest: ("ran" | "skipped", reason)."""

    class Probe(unittest.TestCase):
        @decorator
        def test_it(self) -> None:
            pass

    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(Probe).run(result)
    assert not result.errors and not result.failures, result.errors + result.failures
    if result.skipped:
        return "skipped", result.skipped[0][1]
    return "ran", ""


def test_the_device_decorators_skip_exactly_where_the_device_is_missing() -> None:
    on_cpu = torch_device == "cpu"
    assert outcome(require_cpu)[0] == ("ran" if on_cpu else "skipped")
    state, reason = outcome(require_non_cpu)
    assert state == ("skipped" if on_cpu else "ran")
    if on_cpu:
        assert reason.startswith("test requires a hardware accelerator")
        assert "run on cpu" in reason  # says what this machine has
    state, reason = outcome(require_cuda)
    assert state == ("ran" if torch.cuda.is_available() else "skipped")
    if state == "skipped":
        assert "CUDA GPU" in reason
    many = torch.cuda.device_count() > 1
    assert outcome(require_multi_device)[0] == ("ran" if many else "skipped")
    single = not on_cpu and accel.test_utils.device_count == 1
    assert outcome(require_single_device)[0] == ("ran" if single else "skipped")


def test_a_library_decorator_names_the_missing_library_and_its_install_command() -> None:
    state, reason = outcome(require_deepspeed)
    assert state == ("ran" if is_deepspeed_available() else "skipped")
    if state == "skipped":
        assert "DeepSpeed" in reason and "pip install" in reason
    # transformers is importable in the test environment (it is in the ecosystem group) or not:
    # the decorator follows the import, either way.
    try:
        import transformers  # noqa: F401
    except ImportError:
        assert outcome(require_transformers) == (
            "skipped",
            "test requires the transformers library: not installed here: pip install transformers",
        )
    else:
        assert outcome(require_transformers) == ("ran", "")


def test_the_torch_version_marker_compares_with_the_installed_torch() -> None:
    assert outcome(require_torch_min_version(version="1.0"))[0] == "ran"
    state, reason = outcome(require_torch_min_version(version="99.0"))
    assert state == "skipped" and "torch version >= 99.0" in reason and torch.__version__ in reason
    with pytest.raises(ValueError, match="require_torch_min_version.*version=None"):
        require_torch_min_version(lambda: None)


def test_slow_runs_only_with_run_slow_and_skip_always_skips(monkeypatch) -> None:
    monkeypatch.delenv("RUN_SLOW", raising=False)
    assert outcome(slow) == ("skipped", "test is slow: set RUN_SLOW=1 to run it")
    monkeypatch.setenv("RUN_SLOW", "yes")
    assert outcome(slow) == ("ran", "")
    monkeypatch.setenv("RUN_SLOW", "maybe")
    with pytest.raises(ValueError, match="RUN_SLOW"):
        slow(lambda: None)
    assert outcome(skip) == ("skipped", "Test was skipped")


def test_get_launch_command_launches_two_real_processes() -> None:
    command = get_launch_command(num_processes=2, cpu=True, monitor_interval=0.1, debug=False)
    assert command[-3:] == ["--num_processes=2", "--cpu", "--monitor_interval=0.1"]
    assert "--debug" not in " ".join(command)
    result = execute_subprocess_async(
        [*command, SCRIPTS / "launched_by_test_utils.py"], timeout=240, quiet=True, echo=False
    )
    # The two ranks share the launcher's stdout, so their lines may run into one another.
    found = re.findall(r"ROW (\{[^}]*\})", "".join(result.stdout))
    rows = sorted((json.loads(text) for text in found), key=lambda row: row["rank"])
    assert rows == [{"rank": 0, "world": 2, "sum": 3.0}, {"rank": 1, "world": 2, "sum": 3.0}], (
        "\n".join(result.stderr)
    )


def test_get_launch_command_keeps_the_switch_on_in_the_launched_processes() -> None:
    code = (
        "import warnings, json; warnings.simplefilter('ignore'); import accel; "
        "accel.install_as_accelerate(); "
        "from accelerate.test_utils import get_launch_command; "
        "from accelerate.accelerator import Accelerator; "
        "print(json.dumps([get_launch_command(num_processes=2), Accelerator is accel.Accelerator]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    command, same = json.loads(done.stdout.strip().splitlines()[-1])
    assert command[-2:] == ["--num_processes=2", "--as_accelerate"] and same is True
    assert "--as_accelerate" not in get_launch_command(num_processes=2)


def test_execute_subprocess_async_fails_with_the_stderr_of_a_failing_command() -> None:
    script = "import sys; print('out line'); print('the cause', file=sys.stderr); sys.exit(3)"
    with pytest.raises(RuntimeError, match=r"failed with returncode 3[\s\S]*the cause"):
        execute_subprocess_async([sys.executable, "-c", script], quiet=True, echo=False)
    result = execute_subprocess_async(
        [sys.executable, "-c", "print('a'); print('b')"], quiet=True, echo=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, ["a", "b"], [])


def test_execute_subprocess_async_stops_a_hung_command_and_its_children(tmp_path) -> None:
    marker = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(marker)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(120)
        """
    )
    with pytest.raises(TimeoutError, match="ran past its timeout of 3 seconds"):
        execute_subprocess_async([sys.executable, "-c", script], timeout=3, quiet=True)
    child = int(marker.read_text())
    # The grandchild was killed with its parent: it is gone (or a zombie awaiting its reaper).
    # A killed process shows as running until the kernel schedules it to exit, which on a busy
    # machine can take a moment: give it 20 s.
    status = Path(f"/proc/{child}/status")
    deadline = time.monotonic() + 20
    while status.exists() and "zombie" not in status.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not status.exists() or "zombie" in status.read_text()


def test_run_command_returns_the_output_or_raises_with_it() -> None:
    assert run_command([sys.executable, "-c", "print('hello')"], return_stdout=True) == "hello\n"
    assert run_command([sys.executable, "-c", "pass"]) is None
    with pytest.raises(SubprocessCallException, match="boom"):
        run_command([sys.executable, "-c", "raise SystemExit('boom')"])


def test_ports_and_paths(monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert (pytest_xdist_worker_id(), get_torch_dist_unique_port()) == (3, 29503)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert (pytest_xdist_worker_id(), get_torch_dist_unique_port()) == (0, 29500)
    script = path_in_accelerate_package("test_utils", "scripts", "test_script.py")
    assert script.is_file() and script.parents[2] == Path(accel.__file__).parent


def test_assert_exception_and_capture_call_output() -> None:
    with assert_exception(ValueError, "bad value"):
        raise ValueError("a bad value")
    with pytest.raises(AssertionError, match="ran without issue"):
        with assert_exception(ValueError):
            pass
    with pytest.raises(AssertionError, match="but got <class 'KeyError'>"):
        with assert_exception(ValueError):
            raise KeyError("x")
    with pytest.raises(AssertionError, match="Expected message 'other'"):
        with assert_exception(ValueError, "other"):
            raise ValueError("a bad value")
    assert capture_call_output(print, "a", "b", sep="-") == "a-b\n"


def test_the_test_case_bases_reset_state_and_empty_the_folder() -> None:
    seen: dict[str, object] = {}

    class Folder(TempDirTestCase):
        def test_1_write(self) -> None:
            (self.tmpdir / "sub").mkdir()
            (self.tmpdir / "sub" / "f.txt").write_text("x")
            seen["folder"] = self.tmpdir

        def test_2_empty_again(self) -> None:
            seen["left"] = sorted(p.name for p in self.tmpdir.iterdir())

    class State(AccelerateTestCase):
        def test_makes_an_accelerator(self) -> None:
            accel.Accelerator(cpu=True)
            from accel_state import AcceleratorState

            seen["during"] = AcceleratorState._shared_state != {}

    result = unittest.TestResult()
    for case in (Folder, State):
        unittest.defaultTestLoader.loadTestsFromTestCase(case).run(result)
    assert result.wasSuccessful(), result.errors + result.failures
    assert seen["left"] == [] and not Path(str(seen["folder"])).exists()
    from accel_state import AcceleratorState

    assert seen["during"] is True and AcceleratorState._shared_state == {}


def test_compare_against_test_names_what_the_complete_example_lacks(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").mkdir()

    def script(body: str) -> str:
        lines = [
            "def training_function(config, args):",
            *body.split(";"),
            "def main():",
            "    pass",
        ]
        return "\n".join(lines) + "\nif __name__ == '__main__':\n    main()\n"

    (tmp_path / "examples" / "nlp_example.py").write_text(
        script("    model = build();    train(model)")
    )
    feature = tmp_path / "feature.py"
    feature.write_text(
        script(
            "    model = build();    # a comment;    if os.environ.get('TESTING_MOCKED_DATALOADERS'):"
            ";        config['num_epochs'] = 2;    accelerator.save_state(out);    train(model)"
        )
    )
    complete = tmp_path / "complete.py"
    complete.write_text(script("    model = build();    train(model)"))
    assert compare_against_test(complete, feature, parser_only=False) == [
        "    accelerator.save_state(out)\n"
    ]
    complete.write_text(
        script("    model = build();    accelerator.save_state(out);    train(model)")
    )
    assert compare_against_test(complete, feature, parser_only=False) == []
    with pytest.raises(ValueError, match="has no function 'training_function'"):
        (tmp_path / "empty.py").write_text("x = 1\n")
        compare_against_test(tmp_path / "empty.py", feature, parser_only=False)


def test_the_module_paths_are_the_reference_helpers_names() -> None:
    import accel.test_utils.testing as testing

    assert accel.test_utils.testing is testing
    assert testing.require_cpu is accel.test_utils.require_cpu
    command = accel.test_utils.DEFAULT_LAUNCH_COMMAND
    assert command[:2] == ["accel", "launch"] or command[1:4] == [
        "-m",
        "accel_launch.cli",
        "launch",
    ]
    assert command[-2:] == [
        f"--num_processes={accel.test_utils.device_count}",
        "--monitor_interval=0.1",
    ]
