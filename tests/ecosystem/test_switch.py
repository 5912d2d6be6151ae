"""``accel.install_as_accelerate()``: what ``import accelerate`` gives with the switch on and
off, the version gates it satisfies, and its refusals. Each case runs in a fresh interpreter
(the switch changes the import system of its process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def python(
    code: str, *, switch: str | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    if switch is not None:
        env["ACCEL_AS_ACCELERATE"] = switch
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def _reference_installed() -> bool:
    import importlib.machinery

    return importlib.machinery.PathFinder.find_spec("accelerate") is not None


def test_the_switch_maps_every_path_to_accel_and_reports_the_api_version() -> None:
    out = python(
        """
        import warnings, importlib.metadata, importlib.util, sys
        warnings.simplefilter("ignore")
        import accel
        accel.install_as_accelerate()
        accel.install_as_accelerate()  # a second call does nothing
        import accelerate
        from accelerate.utils.modeling import get_max_memory
        from accelerate.utils import set_seed
        import accelerate.state
        assert accelerate is not accel
        assert accelerate.__version__ == accel.ACCELERATE_API_VERSION == "1.15.0"
        assert accel.__version__ != accelerate.__version__
        assert importlib.metadata.version("accelerate") == accel.ACCELERATE_API_VERSION
        assert importlib.util.find_spec("accelerate") is not None
        assert accelerate.Accelerator is accel.Accelerator
        assert accelerate.state is accel.state
        assert sys.modules["accelerate.utils.modeling"] is sys.modules["accel.utils.modeling"]
        assert accel.utils.modeling.__spec__.name == "accel.utils.modeling"
        assert get_max_memory is accel.utils.modeling.get_max_memory
        assert set_seed is accel.utils.set_seed
        assert accel.is_installed_as_accelerate()
        try:
            import accelerate.no_such_module
        except ModuleNotFoundError as err:
            print(err)
        """
    )
    assert "accel has no 'accel.no_such_module'" in out.stdout
    assert "migration guide" in out.stdout


def test_transformers_version_gate_passes_under_the_switch() -> None:
    pytest.importorskip("transformers")
    python(
        """
        import warnings; warnings.simplefilter("ignore")
        import accel; accel.install_as_accelerate()
        from transformers.utils import is_accelerate_available
        assert is_accelerate_available(), "gate failed"
        assert is_accelerate_available("1.12.0")
        from transformers import TrainingArguments
        TrainingArguments(output_dir="unused", use_cpu=True, report_to=[])
        """
    )


def test_off_the_switch_nothing_is_claimed() -> None:
    out = python(
        """
        import importlib.metadata, importlib.util, sys
        import accel
        assert not accel.is_installed_as_accelerate()
        assert not any(getattr(f, "accel_as_accelerate", False) for f in sys.meta_path)
        spec = importlib.util.find_spec("accelerate")
        print(spec.origin if spec else None)
        try:
            print(importlib.metadata.version("accelerate"))
        except importlib.metadata.PackageNotFoundError:
            print("no distribution")
        """,
        switch="0",
    )
    origin, version = out.stdout.split()
    if _reference_installed():
        assert "accel" not in origin.replace("accelerate", "")
    else:
        assert origin == "None" and version == "no distribution"


def test_refused_when_the_reference_is_imported_first() -> None:
    if not _reference_installed():
        pytest.skip("the reference library is not installed (uv sync --group bench)")
    done = python(
        """
        import accelerate
        import accel
        accel.install_as_accelerate()
        """,
        check=False,
    )
    assert done.returncode != 0
    assert "AccelerateAlreadyImportedError" in done.stderr
    assert "must run before anything imports the reference 'accelerate'" in done.stderr
    assert "ACCEL_AS_ACCELERATE=1" in done.stderr


def test_says_once_that_accel_wins_over_an_installed_reference() -> None:
    if not _reference_installed():
        pytest.skip("the reference library is not installed (uv sync --group bench)")
    done = python("import accel; accel.install_as_accelerate(); accel.install_as_accelerate()")
    assert done.stderr.count("accel answers every 'accelerate' import") == 1, done.stderr


def test_the_environment_variable_turns_it_on_at_interpreter_start() -> None:
    code = """
        import sys
        print("accel" in sys.modules, any(getattr(f, "accel_as_accelerate", 0) for f in sys.meta_path))
        import accelerate
        print(accelerate.__version__, "/accel/" in accelerate.__file__)
        """
    assert python(code, switch="1").stdout.split() == ["True", "True", "1.15.0", "True"]
    for value in ("", "0", "false", "OFF"):
        off = python("import sys; print('accel' in sys.modules)", switch=value)
        assert off.stdout.strip() == "False", value  # off: the .pth line imports nothing


def test_a_bad_environment_value_is_refused_with_the_rule() -> None:
    done = python("print('ran')", switch="maybe", check=False)
    assert "ACCEL_AS_ACCELERATE must be a boolean" in done.stderr
    assert "'maybe'" in done.stderr
    # One line at each interpreter start (it used to be a 33-line traceback, printed twice):
    # the switch stays off and the program runs.
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and "switch stays off" in done.stderr, done.stderr
    assert done.returncode == 0 and done.stdout.strip() == "ran"


def test_accel_env_says_whether_the_switch_is_on() -> None:
    command = [sys.executable, "-m", "accel_launch.cli", "env"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    off = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    on = subprocess.run(
        command,
        env={**env, "ACCEL_AS_ACCELERATE": "1", "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "- accel as accelerate: off" in off.stdout
    assert "- accel as accelerate: on: `import accelerate` gives accel" in on.stdout


def test_launch_as_accelerate_reaches_the_processes(tmp_path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(
        "import accelerate, os\n"
        "print('RANK', os.environ.get('RANK'), accelerate.__version__, '/accel/' in accelerate.__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env["PYTHONWARNINGS"] = "ignore"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "accel_launch.cli",
            "launch",
            "--quiet",
            "--as_accelerate",
            "--cpu",
            "--num_processes",
            "2",
            str(script),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("RANK"))
    assert lines == ["RANK 0 1.15.0 True", "RANK 1 1.15.0 True"], done.stdout + done.stderr


_LOGGING_PROBE = """
    import logging, warnings
    warnings.simplefilter("ignore")
    import accel
    {switch}
    from accel.utils import convert_dict_to_env_variables

    class Keep(logging.Handler):
        def __init__(self):
            super().__init__()
            self.records = []

        def emit(self, record):
            self.records.append(record)

    root, reference = Keep(), Keep()
    logging.getLogger().addHandler(root)
    logging.getLogger("accelerate.utils.environment").addHandler(reference)
    convert_dict_to_env_variables({{"BAD": "<x"}})
    print(len(root.records), len(reference.records), root.records[0].name)
    logging.getLogger("accelerate.utils.environment").setLevel(logging.ERROR)
    convert_dict_to_env_variables({{"BAD": "<x"}})
    print(len(root.records))
"""


def test_under_the_switch_accel_logs_under_the_reference_logger_names() -> None:
    # Code written for the reference listens to (and silences) its own logger names.
    out = python(_LOGGING_PROBE.format(switch="accel.install_as_accelerate()"))
    assert out.stdout.split() == ["1", "1", "accelerate.utils.environment", "1"], out.stdout


def test_off_the_switch_accel_logs_under_its_own_names() -> None:
    out = python(_LOGGING_PROBE.format(switch="pass"))
    assert out.stdout.split() == ["1", "0", "accel_state.env", "2"], out.stdout
