"""Files the commands read never run code: `accel merge-weights` on a tampered checkpoint and
a config file with a Python tag are refused (unless `--trust_pickles` is given by name)."""

from __future__ import annotations

import datetime
import os
import pickle

import pytest
import torch

from accel_launch import ConfigError, load_config_file
from accel_launch.cli import main


class Payload:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _checkpoint(folder):
    import torch.distributed.checkpoint as dcp

    weights = {"model.w": torch.arange(6.0).reshape(2, 3), "model.b": torch.ones(2), "step": 4}
    dcp.save(weights, checkpoint_id=str(folder), no_dist=True)


def test_merge_weights_refuses_a_payload_in_the_metadata(tmp_path, capsys):
    ckpt, marker = tmp_path / "ckpt", tmp_path / "marker"
    _checkpoint(ckpt)
    (ckpt / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    assert main(["merge-weights", str(ckpt), str(tmp_path / "out")]) == 2
    assert not marker.exists()
    err = capsys.readouterr().err
    assert str(ckpt / ".metadata") in err and "posix.system" in err and "--trust_pickles" in err
    assert not (tmp_path / "out" / "model.safetensors").exists()


@pytest.mark.parametrize("flag", ["--trust_pickles", "--trust-pickles"])
def test_merge_weights_loads_a_trusted_unusual_checkpoint_when_opted_in(tmp_path, capsys, flag):
    from accel_bigmodel import read_dcp_metadata_safely
    from safetensors.torch import load_file

    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt)
    metadata = read_dcp_metadata_safely(ckpt)
    metadata.planner_data = {"saved_on": datetime.date(2024, 5, 1)}
    (ckpt / ".metadata").write_bytes(pickle.dumps(metadata))
    assert main(["merge-weights", str(ckpt), str(tmp_path / "refused")]) == 2
    assert "datetime.date" in capsys.readouterr().err
    assert main(["merge-weights", str(ckpt), str(tmp_path / "out"), flag]) == 0
    merged = load_file(tmp_path / "out" / "model.safetensors")
    assert torch.equal(merged["w"], torch.arange(6.0).reshape(2, 3))
    assert sorted(merged) == ["b", "w"]


def test_a_config_file_with_a_python_tag_is_refused_without_running(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "config.yaml"
    path.write_text(f'compute_environment: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert not marker.exists()
    message = str(info.value)
    assert str(path) in message and "python/object/apply:os.system" in message
    assert "yaml.safe_load" in message and "Remove the `!!python/...` tag" in message
