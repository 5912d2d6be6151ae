"""Differential test: a config file written by the reference library (its ``ClusterConfig``,
as its ``accelerate config`` saves it) with TPU keys and a ``parallelism_config`` section is
imported by accel with every value kept."""

from __future__ import annotations

import pytest
import yaml

config_args = pytest.importorskip(
    "accelerate.commands.config.config_args",
    reason="the reference library is not installed (uv sync --group bench)",
)

from accel_launch._resolve import child_environment  # noqa: E402
from accel_launch.configs._config_import import import_config  # noqa: E402

TPU = {
    "tpu_name": "my-pod",
    "tpu_zone": "us-central2-b",
    "tpu_use_cluster": True,
    "tpu_use_sudo": True,
    "commands": ["pip install -r requirements.txt"],
    "tpu_vm": ["0", "1"],
    "tpu_env": ["XLA_FLAG=1"],
    "main_training_function": "train",
}
LAYOUT = {
    "parallelism_config_dp_replicate_size": 1,
    "parallelism_config_dp_shard_size": 2,
    "parallelism_config_tp_size": 1,
    "parallelism_config_cp_size": 2,
    "parallelism_config_cp_comm_strategy": "alltoall",
}


def _reference_file(path, **values) -> None:
    from accelerate.utils import ComputeEnvironment

    config_args.ClusterConfig(
        compute_environment=ComputeEnvironment.LOCAL_MACHINE,
        mixed_precision="no",
        use_cpu=True,
        debug=False,
        **values,
    ).to_yaml_file(str(path))


def test_reference_files_with_tpu_keys_and_a_layout_import_with_every_value(tmp_path):
    from accelerate.utils import DistributedType

    source = tmp_path / "tpu.yaml"
    _reference_file(source, distributed_type=DistributedType.XLA, num_processes=8, **TPU)
    target, config, _ = import_config(source, tmp_path / "accel-tpu.yaml")
    data = yaml.safe_load(target.read_text())
    assert {key: data[key] for key in TPU} == TPU
    assert data["distributed_type"] == "XLA" and data["downcast_bf16"] is False

    source = tmp_path / "layout.yaml"
    _reference_file(
        source, distributed_type=DistributedType.FSDP, num_processes=4, parallelism_config=LAYOUT
    )
    target, config, _ = import_config(source, tmp_path / "accel-layout.yaml")
    assert yaml.safe_load(target.read_text())["parallelism_config"] == LAYOUT
    env = child_environment(config)
    assert env["ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE"] == "2"
    assert env["ACCEL_PARALLELISM_CONFIG_CP_SIZE"] == "2"
    assert env["ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY"] == "alltoall"
