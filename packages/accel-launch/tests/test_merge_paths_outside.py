"""``accel merge-weights`` reads only the files inside the checkpoint: a ``.metadata`` whose
storage entry names ``../secret`` (built only from allowed classes) is refused, and nothing
of the outside file reaches the output."""

import pickle
import subprocess
import sys

import pytest
import torch
import torch.distributed.checkpoint as dcp
from accel_bigmodel import PathOutsideCheckpointError

from accel_launch import merge_weights


def _checkpoint_reading(tmp_path, relative_path):
    ckpt = tmp_path / "pytorch_model_fsdp_0"
    dcp.save({"model": {"w": torch.zeros(4), "b": torch.zeros(4)}}, checkpoint_id=str(ckpt))
    secret = tmp_path / "secret.pt"
    secret.write_bytes(b"S" * 4096)  # 4 floats' worth of an outside file, and more
    with open(ckpt / ".metadata", "rb") as handle:
        metadata = pickle.load(handle)
    index = next(i for i in metadata.storage_data if i.fqn.endswith("w"))
    info = metadata.storage_data[index]
    info.relative_path = relative_path
    info.offset = 0
    with open(ckpt / ".metadata", "wb") as handle:
        pickle.dump(metadata, handle)
    return ckpt


@pytest.mark.parametrize("escape", ["../secret.pt", "SECRET_ABSOLUTE", "sub/../../secret.pt"])
def test_a_storage_entry_outside_the_folder_is_refused(tmp_path, escape):
    target = str(tmp_path / "secret.pt") if escape == "SECRET_ABSOLUTE" else escape
    ckpt = _checkpoint_reading(tmp_path, target)
    with pytest.raises(PathOutsideCheckpointError) as caught:
        merge_weights(ckpt, tmp_path / "out")
    text = str(caught.value)
    assert "model.w" in text and repr(target) in text and ".metadata" in text
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    ckpt = _checkpoint_reading(tmp_path, "link.distcp")
    (ckpt / "link.distcp").symlink_to(tmp_path / "secret.pt")
    with pytest.raises(PathOutsideCheckpointError, match="link.distcp"):
        merge_weights(ckpt, tmp_path / "out")


def test_the_command_exits_non_zero_naming_the_entry(tmp_path):
    ckpt = _checkpoint_reading(tmp_path, "../secret.pt")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from accel_launch.cli import main; sys.exit(main())",
            "merge-weights",
            str(ckpt),
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "'../secret.pt'" in done.stderr and "inside" in done.stderr
    assert not (tmp_path / "o" / "model.safetensors").exists()
