"""A real one-node SLURM cluster (slurmctld + slurmd + munge) for the tests of this folder.

The cluster is started once per session from ``tools/slurm_cluster.py`` in a temporary folder
and stopped at the end, also when a test fails.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cluster_module():
    spec = importlib.util.spec_from_file_location("slurm_cluster", ROOT / "tools/slurm_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A started cluster; its ``env`` points SLURM's commands at it."""
    tool = _cluster_module()
    missing = tool.missing_commands()
    if missing:
        pytest.skip(f"SLURM is not installed (missing {', '.join(missing)}). {tool.INSTALL_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root; these tests run as another user")
    cluster = tool.SlurmCluster(tmp_path_factory.mktemp("slurm-cluster"), cpus=2)
    with cluster:
        yield cluster


@pytest.fixture
def job_env(slurm_cluster, tmp_path):
    """Environment of a submitted job: this cluster, this interpreter's ``accel``, no config."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **slurm_cluster.env,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "ACCEL_CONFIG_HOME": str(tmp_path / "config-home"),
    }
