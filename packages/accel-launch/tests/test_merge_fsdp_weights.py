"""``merge_fsdp_weights``: the reference's function over ``accel merge-weights``."""

import pytest
import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file

from accel_launch import ConfigError, merge_fsdp_weights


def test_merge_fsdp_weights_writes_safetensors_and_removes_only_when_asked(tmp_path):
    ckpt = tmp_path / "pytorch_model_fsdp_0"
    weights = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3)}
    dcp.save({"model": weights}, checkpoint_id=str(ckpt))
    with pytest.raises(ConfigError, match="got safe_serialization=False"):
        merge_fsdp_weights(ckpt, tmp_path / "bin", safe_serialization=False)
    with pytest.raises(ConfigError, match="would be deleted too"):
        merge_fsdp_weights(ckpt, ckpt / "inside", remove_checkpoint_dir=True)
    assert not (tmp_path / "bin").exists() and not (ckpt / "inside").exists()
    written = merge_fsdp_weights(str(ckpt), str(tmp_path / "out"), True, True)
    assert [p.name for p in written] == ["model.safetensors"] and not ckpt.exists()
    merged = load_file(tmp_path / "out" / "model.safetensors")
    assert merged.keys() == weights.keys()
    assert all(torch.equal(merged[k], v) for k, v in weights.items())
