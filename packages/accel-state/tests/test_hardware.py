"""Hardware diagnostics: CPU ranks from launcher variables, NUMA pinning (Linux), the
accelerator type, nvidia-smi facts."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from accel_state import (
    CPUInformation,
    are_libraries_initialized,
    check_cuda_p2p_ib_support,
    get_cpu_distributed_information,
    get_current_device_type,
    get_driver_version,
    get_gpu_info,
    override_numa_affinity,
    patch_environment,
)
from accel_state._machine._hardware import NUMA_NODES_DIR, numa_nodes, parse_cpu_list
from accel_state.testing import run_command

_RANK_VARS = [
    "RANK",
    "PMI_RANK",
    "OMPI_COMM_WORLD_RANK",
    "WORLD_SIZE",
    "PMI_SIZE",
    "LOCAL_RANK",
    "MPI_LOCALRANKID",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
]


def test_cpu_information_from_launcher_variables(monkeypatch) -> None:
    for name in _RANK_VARS:
        monkeypatch.delenv(name, raising=False)
    assert get_cpu_distributed_information() == CPUInformation(0, 1, 0, 1)
    with patch_environment(
        pmi_rank="3", pmi_size="8", mpi_localrankid="1", ompi_comm_world_local_size="4"
    ):
        assert get_cpu_distributed_information() == CPUInformation(3, 8, 1, 4)
    with patch_environment(rank="5", pmi_rank="3", world_size="6"):
        assert get_cpu_distributed_information().rank == 5  # torchrun's variable first


def test_parse_cpu_list_and_numa_nodes(tmp_path) -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    for number, cpus in ((0, "0-1"), (1, "2,3"), (2, "")):
        (tmp_path / f"node{number}").mkdir()
        (tmp_path / f"node{number}" / "cpulist").write_text(cpus + "\n")
    (tmp_path / "possible").write_text("0-2\n")
    assert numa_nodes(str(tmp_path)) == [[0, 1], [2, 3]]  # a node without CPUs is left out
    assert numa_nodes(str(tmp_path / "absent")) == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux-only")
def test_override_numa_affinity_pins_a_process_to_its_node() -> None:
    code = textwrap.dedent(
        """
        import os
        from accel_state import override_numa_affinity, set_numa_affinity
        from accel_state._machine._hardware import numa_nodes
        allowed = os.sched_getaffinity(0)
        nodes = numa_nodes()
        for index in range(3):
            override_numa_affinity(index, verbose=True)
            expected = set(nodes[index % len(nodes)]) & allowed if nodes else allowed
            assert os.sched_getaffinity(0) == (expected or allowed), (index, os.sched_getaffinity(0))
            os.sched_setaffinity(0, allowed)
        set_numa_affinity(0)
        set_numa_affinity(0)
        assert set_numa_affinity.cache_info().hits == 1
        print("AFFINITY OK", len(nodes))
        """
    )
    result = run_command([sys.executable, "-c", code], timeout=120)
    assert "AFFINITY OK" in result.stdout
    if os.path.isdir(NUMA_NODES_DIR):
        assert "AFFINITY OK 0" not in result.stdout


def test_override_numa_affinity_refuses_a_negative_index() -> None:
    with pytest.raises(ValueError, match="local_process_index"):
        override_numa_affinity(-1)


def test_current_device_type_without_initialising_a_device() -> None:
    import torch

    device, distributed = get_current_device_type()
    assert (device, distributed) in {
        ("cpu", "MULTI_CPU"),
        ("cuda", "MULTI_GPU"),
        ("xpu", "MULTI_XPU"),
        ("npu", "MULTI_NPU"),
        ("mlu", "MULTI_MLU"),
        ("sdaa", "MULTI_SDAA"),
        ("musa", "MULTI_MUSA"),
        ("hpu", "MULTI_HPU"),
        ("neuron", "MULTI_NEURON"),
    }
    if shutil.which("nvidia-smi") is None and not os.path.exists("/dev/nvidiactl"):
        if not os.path.exists("/dev/kfd"):
            assert device != "cuda"
    assert not torch.cuda.is_initialized()


def test_are_libraries_initialized() -> None:
    assert are_libraries_initialized("os", "surely_not_a_module_name", "sys") == ["os", "sys"]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a real nvidia-smi is here")
def test_without_nvidia_smi_the_facts_are_clear() -> None:
    with pytest.raises(FileNotFoundError, match="nvidia-smi"):
        get_gpu_info()
    with pytest.raises(FileNotFoundError, match="nvidia-smi"):
        get_driver_version()
    assert check_cuda_p2p_ib_support() is True


def _fake_nvidia_smi(folder, names: list[str], driver: str) -> None:
    """An executable that answers the two queries as nvidia-smi does (the real one needs an
    NVIDIA driver, absent here)."""
    script = folder / "nvidia-smi"
    lines = "\\n".join(names)
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=name) printf '{lines}\\n' ;;\n"
        f"  --query-gpu=driver_version) printf '{driver}\\n{driver}\\n' ;;\n"
        "  *) exit 2 ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize(
    ("names", "driver", "supported"),
    [
        (["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"], "535.104.05", False),
        (["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"], "550.54.14", True),
        (["NVIDIA GeForce RTX 4090"], "535.104.05", True),
        (["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"], "470.1", True),
    ],
)
def test_p2p_check_reads_nvidia_smi(tmp_path, monkeypatch, names, driver, supported) -> None:
    _fake_nvidia_smi(tmp_path, names, driver)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert get_gpu_info() == (names, len(names))
    assert get_driver_version() == driver
    assert check_cuda_p2p_ib_support() is supported


def test_failing_nvidia_smi_is_reported(tmp_path, monkeypatch) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(subprocess.CalledProcessError):
        get_gpu_info()
    assert check_cuda_p2p_ib_support() is True
