"""Helpers that match the reference's surface: probes, environment tools, logging, enums."""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import os
import platform
import sys
import time
from pathlib import Path

import pytest
import torch

import accel_state as s
from accel_state import AcceleratorState, GradientState, PartialState
from accel_state.testing import reset_state, run_command, run_distributed

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(autouse=True)
def fresh_state():
    reset_state()
    yield
    reset_state()


def test_reset_state_forgets_every_shared_state():
    AcceleratorState(cpu=True, mixed_precision="bf16")
    GradientState()
    assert PartialState._shared_state and GradientState._shared_state
    reset_state()
    assert not AcceleratorState._shared_state and not PartialState._shared_state
    assert not GradientState._shared_state
    assert AcceleratorState(cpu=True).mixed_precision == "no"


def test_enum_members_of_the_reference():
    for name in ("MULTI_HPU", "MULTI_MUSA", "MULTI_NEURON", "MULTI_SDAA"):
        assert s.DistributedType[name] == name
    for name in ("AOT_TORCHXLA_TRACE_ONCE", "TORCHXLA_TRACE_ONCE", "HPU_BACKEND", "NEURON"):
        assert s.DynamoBackend(name).name == name
    for name in ("sdaa", "musa", "hpu", "neuron"):
        assert s.RNGType(name).value == name


def test_library_probes_answer_from_installed_metadata():
    numpy_version = importlib.metadata.version("numpy")
    assert s.is_numpy_available() is True
    assert s.is_numpy_available(min_version=numpy_version) is True
    assert s.is_numpy_available(min_version="999.0") is False
    assert s.is_pytest_available() is True
    assert s.is_torch_distributed_available() is torch.distributed.is_available()
    assert s.is_weights_only_available() is True
    assert s.is_bnb_available(min_version="0.0.1") is s.is_bnb_available()
    assert s.is_mps_available(min_version="999.0") is False
    for probe in (s.is_mlu_available, s.is_musa_available, s.is_sdaa_available):
        assert probe() is False and probe(check_device=True) is False
    assert s.is_neuron_available(check_device=True) is False
    assert s.is_hpu_available() is False and s.is_habana_gaudi1() is False
    assert s.check_cuda_fp8_capability() is False  # no CUDA device here
    assert s.is_rocm_available() is (torch.version.hip is not None and torch.cuda.is_available())


def test_library_probes_do_not_import_the_library():
    code = (
        "import sys, accel_state as s; s.is_numpy_available(); "
        "names = ('pandas', 'matplotlib', 'torchvision', 'timm', 'peft', 'boto3'); "
        "before = {m for m in names if m in sys.modules}; "
        "[getattr(s, f'is_{m}_available')() for m in names]; "
        "print(sorted({m for m in names if m in sys.modules} - before))"
    )
    result = run_command([sys.executable, "-c", code], timeout=120).stdout.strip()
    assert result == "[]"


def test_every_probe_has_the_reference_parameters():
    expected = {
        "is_bnb_available": {"min_version": None},
        "is_mps_available": {"min_version": "1.12"},
        "is_numpy_available": {"min_version": "1.25.0"},
        "is_xpu_available": {"check_device": False},
        "is_npu_available": {"check_device": False},
        "is_mlu_available": {"check_device": False},
        "is_hpu_available": {"init_hccl": False},
    }
    for name, params in expected.items():
        signature = inspect.signature(getattr(s, name))
        assert {k: v.default for k, v in signature.parameters.items()} == params, name


def test_convert_dict_to_env_variables_skips_unsafe_entries(caplog):
    env = {"ACCEL_DEBUG_MODE": "1", "BAD": "<script", "EMPTY": "", "OTHER": "2", "A B": "x"}
    with caplog.at_level(logging.WARNING):
        lines = s.convert_dict_to_env_variables(env)
    assert lines == ["ACCEL_DEBUG_MODE=1\n", "OTHER=2\n"]
    assert "BAD" in caplog.text and "EMPTY" in caplog.text and "A B" in caplog.text


def test_purge_restores_the_library_variables(monkeypatch):
    monkeypatch.setenv("ACCEL_KEEP", "before")
    monkeypatch.setenv("ACCELERATE_GONE", "1")
    monkeypatch.setenv("UNRELATED", "1")

    @s.purge_accelerate_environment
    def change():
        os.environ["ACCEL_KEEP"] = "changed"
        os.environ["ACCEL_NEW"] = "1"
        del os.environ["ACCELERATE_GONE"]
        os.environ["UNRELATED"] = "2"
        return "result"

    assert change() == "result"
    assert os.environ["ACCEL_KEEP"] == "before"
    assert "ACCEL_NEW" not in os.environ
    assert os.environ["ACCELERATE_GONE"] == "1"
    assert os.environ["UNRELATED"] == "2"


def test_purge_wraps_test_methods_of_a_class_and_its_subclasses(monkeypatch):
    monkeypatch.delenv("ACCEL_FROM_TEST", raising=False)

    @s.purge_accel_environment
    class Base:
        def test_sets(self):
            os.environ["ACCEL_FROM_TEST"] = "1"

        def helper(self):
            os.environ["ACCEL_FROM_TEST"] = "kept"

    class Child(Base):
        def test_child(self):
            os.environ["ACCEL_FROM_TEST"] = "2"

    Base().test_sets()
    Child().test_child()
    assert "ACCEL_FROM_TEST" not in os.environ
    Base().helper()
    assert os.environ.pop("ACCEL_FROM_TEST") == "kept"


def test_check_os_kernel_warns_only_on_an_old_linux_kernel(monkeypatch, caplog):
    def uname(release: str, system: str = "Linux"):
        return platform.uname_result(system, "host", release, "", "x86_64")

    monkeypatch.setattr(platform, "uname", lambda: uname("4.15.0-generic"))
    with caplog.at_level(logging.WARNING):
        s.check_os_kernel()
    assert "4.15.0" in caplog.text and "5.5.0" in caplog.text
    # The record's own text holds the version (code written for the reference reads .msg).
    (record,) = caplog.records
    assert "4.15.0" in record.msg and "5.5.0" in record.msg
    caplog.clear()
    monkeypatch.setattr(platform, "uname", lambda: uname("6.8.0-45-generic"))
    s.check_os_kernel()
    monkeypatch.setattr(platform, "uname", lambda: uname("4.0.0", system="Darwin"))
    s.check_os_kernel()
    assert caplog.text == ""


def test_get_logger_needs_the_state_first():
    logger = s.get_logger("accel.test.nostate")
    with pytest.raises(RuntimeError, match=r"PartialState\(\) or Accelerator\(\)"):
        logger.info("too early")


def test_get_logger_logs_on_the_main_process(caplog):
    PartialState(cpu=True)
    logger = s.get_logger("accel.test.main", log_level="INFO")
    assert logger.logger.level == logging.INFO
    with caplog.at_level(logging.INFO, logger="accel.test.main"):
        logger.info("hello %s", "world")
        logger.info("everyone", main_process_only=False, in_order=True)
        logger.warning_once("once")
        logger.warning_once("once")
        logger.debug("hidden")
    assert [r.getMessage() for r in caplog.records] == ["hello world", "everyone", "once"]
    assert caplog.records[0].funcName == "test_get_logger_logs_on_the_main_process"


def test_get_logger_reads_the_level_from_the_environment(monkeypatch):
    monkeypatch.setenv("ACCELERATE_LOG_LEVEL", "error")
    assert s.get_logger("accel.test.env1").logger.level == logging.ERROR
    monkeypatch.setenv("ACCEL_LOG_LEVEL", "debug")
    assert s.get_logger("accel.test.env2").logger.level == logging.DEBUG
    with pytest.raises(ValueError, match="got 'loud'"):
        s.get_logger("accel.test.env3", log_level="loud")
    logging.getLogger().setLevel(logging.WARNING)


@pytest.mark.multiprocess
def test_logger_and_wait_for_everyone_on_two_processes():
    result = run_distributed(SCRIPTS / "logging_checks.py", num_processes=2, timeout=150)
    lines = [line for line in result.stderr.splitlines() if line.startswith("LOG ")]
    assert lines.count("LOG main only") == 1, result.stderr
    assert [line for line in lines if "in order" in line] == ["LOG in order 0", "LOG in order 1"]
    assert "rank 0 OK" in result.stdout and "rank 1 OK" in result.stdout


@pytest.mark.multiprocess
def test_debug_launcher_runs_a_function_on_two_cpu_processes(tmp_path):
    result = run_command(
        [sys.executable, str(SCRIPTS / "debug_launcher_checks.py"), str(tmp_path)], timeout=180
    )
    assert result.stdout.strip().endswith("OK"), result.stdout
    assert [(tmp_path / f"rank{r}").read_text() for r in range(2)] == ["3.0", "3.0"]


def test_debug_launcher_refuses_a_bad_process_count():
    with pytest.raises(ValueError, match="positive integer; got 0"):
        s.debug_launcher(print, num_processes=0)


def test_str_to_bool_returns_ints_unless_asked_for_bools():
    assert s.str_to_bool("yes") == 1 and type(s.str_to_bool("yes")) is int
    assert s.str_to_bool("off", to_bool=True) is False
    with pytest.raises(ValueError, match="got 'maybe'"):
        s.str_to_bool("maybe")


def test_get_int_from_env_takes_the_first_set_key(monkeypatch):
    monkeypatch.delenv("ACCEL_TEST_A", raising=False)
    monkeypatch.setenv("ACCEL_TEST_B", "7")
    assert s.get_int_from_env(env_keys=["ACCEL_TEST_A", "ACCEL_TEST_B"], default=1) == 7
    assert s.get_int_from_env(["ACCEL_TEST_A"], 3) == 3


def test_find_executable_batch_size_uses_the_given_reduction():
    tried = []

    def smaller() -> int:
        return tried[-1] - 10

    @s.find_executable_batch_size(starting_batch_size=32, reduce_batch_size_fn=smaller)
    def train(batch_size):
        tried.append(batch_size)
        if batch_size > 15:
            raise RuntimeError("CUDA out of memory.")
        return batch_size

    assert train() == 12 and tried == [32, 22, 12]


def test_object_helpers():
    class Outer:
        class Inner:
            pass

    assert s.get_pretty_name(Outer.Inner) == "test_object_helpers.<locals>.Outer.Inner"
    assert s.get_pretty_name(torch.nn.Linear(1, 1)) == "Linear"
    assert s.get_pretty_name(3) == "int"
    dest = {"a": {"x": 1, "y": 2}, "b": 1}
    assert s.merge_dicts({"a": {"y": 3, "z": 4}, "c": 5}, dest) is dest
    assert dest == {"a": {"x": 1, "y": 3, "z": 4}, "b": 1, "c": 5}
    model = torch.nn.Sequential(torch.nn.Linear(1, 2))
    assert s.recursive_getattr(model, "0.weight") is model[0].weight
    with pytest.raises(AttributeError, match="nope"):
        s.recursive_getattr(model, "0.nope")


def test_ports():
    import socket

    port = s.get_free_port()
    assert not s.is_port_in_use(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("localhost", 0))
        server.listen(1)
        assert s.is_port_in_use(server.getsockname()[1])


def test_required_decorators():
    @s.deepspeed_required
    def needs_deepspeed():
        return "ran"

    assert needs_deepspeed() == "ran"  # no state yet: nothing to check
    AcceleratorState(cpu=True)
    with pytest.raises(ValueError, match="needs a DeepSpeed run"):
        needs_deepspeed()

    @s.torchao_required
    def needs_torchao():
        return "ran"

    if s.is_torchao_available():
        assert needs_torchao() == "ran"
    else:
        with pytest.raises(ImportError, match="pip install"):
            needs_torchao()


def test_constants_and_state_probes():
    assert "MULTI_CPU" in s.TORCH_DISTRIBUTED_OPERATION_TYPES
    assert set(s.CUDA_DISTRIBUTED_TYPES) < set(s.TORCH_DISTRIBUTED_OPERATION_TYPES)
    assert s.STR_OPERATION_TO_FUNC[">="](2, 1) and not s.STR_OPERATION_TO_FUNC["<"](2, 1)
    assert "max-autotune" in s.TORCH_DYNAMO_MODES
    assert s.do_nothing(1, key=2) is None
    assert not s.is_initialized()
    AcceleratorState(cpu=True)
    assert s.is_initialized()


def test_a_failed_command_reports_the_end_of_stderr_first_without_warnings():
    code = (
        "import sys, warnings\n"
        "for i in range(50): warnings.warn(f'noise {i}', FutureWarning)\n"
        "sys.exit('the real cause')\n"
    )
    with pytest.raises(AssertionError) as failure:
        run_command([sys.executable, "-c", code], timeout=60)
    head = str(failure.value).split("--- end of stderr")[1].split("--- stdout ---")[0]
    assert "the real cause" in head and "noise" not in head, head


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("Z", "X")  # a zombie runs nothing
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the process tree through /proc")
def test_a_timed_out_command_shows_every_stack_and_leaves_no_process(tmp_path):
    # Like torchrun: the command's child runs in a session of its own, out of the command's
    # process group, so killing the group alone would leave it running.
    child = "import time\ndef waiting_child():\n    time.sleep(600)\nwaiting_child()\n"
    code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {child!r}], start_new_session=True)\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(child.pid))\n"
        "def waiting_parent():\n    time.sleep(600)\n"
        "waiting_parent()\n"
    )
    with pytest.raises(AssertionError, match="timed out after 8s") as failure:
        run_command([sys.executable, "-c", code], timeout=8)
    message = str(failure.value)
    assert "in waiting_parent" in message and "in waiting_child" in message, message
    pid = int((tmp_path / "pid").read_text())
    for _ in range(100):
        if _ended(pid):
            break
        time.sleep(0.05)
    assert _ended(pid), f"the command's child {pid} still runs"
