"""Flags and subcommands a command line written for the reference launcher uses: torchrun's
output options, ``to-fsdp2``, and the extra options of ``estimate-memory`` and
``merge-weights``."""

import importlib.util
import json
import os

import pytest
import yaml

from accel_launch import load_config_file
from accel_launch.cli import main

from .conftest import accel

RANKS = "import os\nprint('rank', os.environ['RANK'], 'role', os.environ['ROLE_NAME'])\n"


@pytest.mark.multiprocess
def test_tee_log_dir_and_role_reach_torchrun(tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    logs = tmp_path / "logs"
    r = accel(
        "launch",
        "--cpu",
        "--num-processes",
        "2",
        "-t",
        "3",
        "--log-dir",
        str(logs),
        "--role",
        "trainer",
        "--rdzv_conf",
        "timeout=60",
        str(script),
        timeout=150,
    )
    assert "rank 0 role trainer" in r.stdout and "rank 1 role trainer" in r.stdout
    copies = sorted(p.read_text() for p in logs.rglob("stdout.log"))
    assert copies == ["rank 0 role trainer\n", "rank 1 role trainer\n"]


def test_torchrun_options_need_torchrun_and_tee_needs_log_dir(tmp_path, capsys):
    script = tmp_path / "x.py"
    script.write_text("raise SystemExit('must not run')\n")
    assert main(["launch", "--log_dir", str(tmp_path), str(script)]) == 2
    err = capsys.readouterr().err
    assert "--log_dir are options of torchrun" in err and "python" in err
    assert main(["launch", "--num_processes", "2", "--cpu", "--tee", "3", str(script)]) == 2
    assert "got --tee 3 without --log_dir. Add --log_dir" in capsys.readouterr().err
    bad = ["launch", "--num_processes", "2", "--cpu", "--log_dir", str(tmp_path), "--tee"]
    assert main([*bad, "4\r", str(script)]) == 2
    err = capsys.readouterr().err.strip()
    assert "got --tee '4\\r'. Write e.g. --tee 3" in err and len(err.splitlines()) == 1
    assert main([*bad, "0:3,1:1", "--explain", str(script)]) == 0


def test_dash_and_short_spellings_parse_like_the_snake_case_ones(tmp_path, capsys):
    assert main(["launch", "--num-processes", "3", "--cpu", "-q", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "flag --num_processes" in out and "MULTI_CPU" in out


FSDP1 = """\
# training on two machines
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_version: 1
  # keep memory low
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_use_orig_params: true
  fsdp_sync_module_states: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_offload_params: false
"""


def test_to_fsdp2_rewrites_the_fsdp_section(tmp_path, capsys):
    source, target = tmp_path / "fsdp1.yaml", tmp_path / "fsdp2.yaml"
    source.write_text(FSDP1)
    assert main(["to-fsdp2", "--config_file", str(source), "--output_file", str(target)]) == 0
    assert "fsdp_sharding_strategy: FULL_SHARD -> fsdp_reshard_after_forward: True" in (
        capsys.readouterr().out
    )
    fsdp = yaml.safe_load(target.read_text())["fsdp_config"]
    assert fsdp == {
        "fsdp_version": 2,
        "fsdp_reshard_after_forward": True,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_offload_params": False,
    }
    assert "# keep memory low" in target.read_text()  # comments carried over
    assert load_config_file(target).fsdp_config.fsdp_version == 2
    assert source.read_text() == FSDP1  # the input is untouched without --overwrite


def test_to_fsdp2_onto_a_folder_is_refused_and_writes_nothing(tmp_path, capsys):
    source, folder = tmp_path / "fsdp1.yaml", tmp_path / "adir"
    source.write_text(FSDP1)
    folder.mkdir()
    argv = ["to-fsdp2", "--config_file", str(source), "--output_file", str(folder), "--overwrite"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"--output_file {str(folder)!r} is a folder" in err, err
    assert sorted(os.listdir(tmp_path)) == ["adir", "fsdp1.yaml"]  # no adir.tmp left


def test_to_fsdp2_refuses_to_lose_a_file(tmp_path, capsys):
    source = tmp_path / "fsdp1.yaml"
    source.write_text(FSDP1)
    assert main(["to-fsdp2", "--config_file", str(source)]) == 2
    assert "got neither --output_file nor --overwrite" in capsys.readouterr().err
    taken = tmp_path / "taken.yaml"
    taken.write_text("keep: me\n")
    assert main(["to-fsdp2", "--config_file", str(source), "--output_file", str(taken)]) == 2
    assert "already exists and --overwrite is not set" in capsys.readouterr().err
    assert taken.read_text() == "keep: me\n"
    assert main(["to-fsdp2", "--config_file", str(tmp_path / "none.yaml"), "--overwrite"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["to-fsdp2", "--config_file", str(source), "--overwrite"]) == 0
    assert yaml.safe_load(source.read_text())["fsdp_config"]["fsdp_version"] == 2


def _dcp_checkpoint(path):
    import torch
    import torch.distributed.checkpoint as dcp

    weights = {"model": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3)}}
    dcp.save(weights, checkpoint_id=str(path))
    return weights["model"]


def test_merge_weights_removes_the_checkpoint_only_when_asked_and_safe(tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    ckpt = tmp_path / "ckpt"
    weights = _dcp_checkpoint(ckpt)
    inside = ckpt / "merged"
    assert main(["merge-weights", str(ckpt), str(inside), "--remove_checkpoint_dir"]) == 2
    assert "would be deleted too" in capsys.readouterr().err
    assert (ckpt / ".metadata").is_file() and not inside.exists()
    assert main(["merge-weights", str(ckpt), str(tmp_path / "out"), "--unsafe-serialization"]) == 2
    assert "writes safetensors only" in capsys.readouterr().err
    assert main(["merge-weights", str(ckpt), str(tmp_path / "out"), "--remove-checkpoint-dir"]) == 0
    merged = load_file(tmp_path / "out" / "model.safetensors")
    assert all(torch.equal(merged[k], v) for k, v in weights.items()) and len(merged) == 2
    assert not ckpt.exists()


CONFIG_CODE = """
from transformers import PretrainedConfig


class ShippedConfig(PretrainedConfig):
    model_type = "shipped-test"

    def __init__(self, width=16, **kwargs):
        self.width = width
        super().__init__(**kwargs)
"""
MODEL_CODE = """
from torch import nn
from transformers import PreTrainedModel

from .configuration_shipped import ShippedConfig


class ShippedModel(PreTrainedModel):
    config_class = ShippedConfig

    def __init__(self, config):
        super().__init__(config)
        self.layer = nn.Linear(config.width, config.width)
"""


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)
def test_estimate_memory_runs_shipped_model_code_only_with_trust_remote_code(tmp_path):
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "configuration_shipped.py").write_text(CONFIG_CODE)
    (folder / "modeling_shipped.py").write_text(MODEL_CODE + "\nopen(__file__ + '.ran', 'w')\n")
    auto_map = {
        "AutoConfig": "configuration_shipped.ShippedConfig",
        "AutoModel": "modeling_shipped.ShippedModel",
    }
    config = {"model_type": "shipped-test", "width": 16, "auto_map": auto_map}
    (folder / "config.json").write_text(json.dumps(config))
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    r = accel("estimate-memory", str(folder), check=False, env=env)
    assert r.returncode == 2 and "Pass --trust_remote_code" in r.stderr
    assert not list(tmp_path.rglob("*.ran"))  # the shipped code never ran
    out = accel("estimate-memory", str(folder), "--trust-remote-code", "--json", env=env).stdout
    assert (json.loads(out)[0]["total_size"]) == (16 * 16 + 16) * 4
    assert list(tmp_path.rglob("*.ran"))  # it ran when asked to


def test_estimate_memory_refuses_timm_by_name(capsys):
    assert main(["estimate-memory", "x:Y", "--library_name", "timm"]) == 2
    assert "got --library_name timm" in capsys.readouterr().err
