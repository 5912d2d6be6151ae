"""Command-line refusals that need no torch come before torch is imported, and long work says
what it does (issue 42)."""

from __future__ import annotations

import pytest

from .conftest import accel
from .test_unbounded_inputs import _no_torch_run


def _checkpoint(folder):
    import torch
    import torch.distributed.checkpoint as dcp

    with pytest.warns(UserWarning):  # dcp's "assuming the intent is to save in a single process"
        dcp.save({"model": {"w": torch.arange(6.0).reshape(2, 3)}}, checkpoint_id=str(folder))
    return folder


def test_merge_weights_refuses_an_output_holding_weights_before_torch(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".metadata").write_bytes(b"")
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"keep")
    r = _no_torch_run(["merge-weights", str(tmp_path / "ckpt"), str(out)])
    assert r.returncode == 2 and "does not overwrite merged weights" in r.stderr, r.stderr
    assert "NO TORCH" in r.stdout and (out / "model.safetensors").read_bytes() == b"keep"


def test_merge_weights_refuses_removing_a_folder_holding_the_output_before_torch(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / ".metadata").write_bytes(b"")
    r = _no_torch_run(["merge-weights", str(ckpt), str(ckpt / "inside"), "--remove_checkpoint_dir"])
    assert r.returncode == 2 and "would be deleted too" in r.stderr, r.stderr
    assert "NO TORCH" in r.stdout and ckpt.is_dir() and not (ckpt / "inside").exists()


def test_merge_weights_says_what_it_reads_and_writes_without_torch_warnings(tmp_path):
    ckpt = _checkpoint(tmp_path / "ckpt")
    r = accel("merge-weights", str(ckpt), str(tmp_path / "out"), "--max_shard_size", "10B")
    importing, *lines = r.stderr.strip().splitlines()
    assert importing == "accel merge-weights: importing torch (seconds on a busy machine)"
    assert lines[0].startswith(f"accel merge-weights: reading {ckpt} (1 tensor"), r.stderr
    assert "1 safetensors file(s) in" in lines[0], r.stderr
    assert lines[1] == "accel merge-weights: [1/1] model.safetensors: read and wrote 24 B"
    assert len(lines) == 2 and "Warning" not in r.stderr, r.stderr
    assert (
        r.stdout.strip() == f"accel merge-weights: wrote {tmp_path / 'out' / 'model.safetensors'}"
    )


def test_the_progress_line_draws_only_on_a_terminal():
    import io

    from accel_launch.commands._status import ByteProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, drawn in ((io.StringIO(), False), (Tty(), True)):
        bar = ByteProgress("merging", 4 << 30, stream, interval=0)
        bar.update(1 << 30)
        bar.update(3 << 30)
        bar.close()
        text = stream.getvalue()
        assert ("25% of 4.0 GiB" in text and "100% of 4.0 GiB" in text) is drawn, text
        assert text.endswith("\r\033[K") is drawn


LLAMA = dict(  # a 4-layer Llama
    model_type="llama", hidden_size=256, intermediate_size=688, num_hidden_layers=4
)
LLAMA.update(num_attention_heads=4, vocab_size=32000)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": -5}, "hidden_size is a whole number >= 1 in a model config; got -5"),
        ({"vocab_size": "32k"}, "vocab_size is a whole number >= 1 in a model config; got '32k'"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers is a whole number >= 0"),
        (
            {"hidden_size": 1 << 20, "intermediate_size": 1 << 22, "num_hidden_layers": 10_000},
            "builds at most 1e+14",
        ),
        (
            {"model_type": "mixtral", "num_local_experts": 10_000, "num_hidden_layers": 100},
            "layers x experts is 100 x 10000 = 1000000",
        ),
        ({"model_type": None}, None),
    ],
)
def test_estimate_memory_refuses_numbers_no_model_has_before_torch(tmp_path, change, message):
    import json

    data = {**LLAMA, **change}
    if change == {"model_type": None}:
        del data["model_type"]
        message = "names its model_type; "
    (tmp_path / "config.json").write_text(json.dumps(data))
    r = _no_torch_run(["estimate-memory", str(tmp_path)])
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert str(tmp_path / "config.json") in r.stderr and "NO TORCH" in r.stdout, r.stdout


def test_estimate_memory_refuses_a_python_file_or_a_folder_without_config_before_torch(tmp_path):
    script = tmp_path / "model.py"
    script.write_text("print(1)\n")
    r = _no_torch_run(["estimate-memory", str(script)])
    assert r.returncode == 2 and "is not valid JSON" in r.stderr, r.stderr
    assert "'package.module:Class'" in r.stderr and "NO TORCH" in r.stdout, r.stderr
    r = _no_torch_run(["estimate-memory", str(tmp_path)])
    assert r.returncode == 2 and "holds none" in r.stderr and "NO TORCH" in r.stdout, r.stderr


def test_estimate_memory_still_answers_a_published_size_from_the_config():
    from accel_launch.configs._estimate_bounds import check_config_numbers

    # DeepSeek-V3's numbers (61 layers of 256 experts, 671 billion parameters) are accepted.
    check_config_numbers(
        {
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "n_routed_experts": 256,
            "num_hidden_layers": 61,
            "vocab_size": 129280,
            "num_key_value_heads": 128,
            "head_dim": None,
        },
        "config.json",
    )


@pytest.mark.parametrize("extra", [[], ["--command", "echo hi"]])
def test_tpu_config_errors_name_the_command(extra):
    r = accel("tpu-config", *extra, check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("accel tpu-config: error: accel tpu-config needs the TPU name")


def test_multi_gpu_against_use_cpu_names_the_config_file_and_key(tmp_path):
    config = tmp_path / "cpu.yaml"
    config.write_text("use_cpu: true\nnum_processes: 2\n")
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    r = accel("launch", "--config_file", str(config), "--multi_gpu", str(script), check=False)
    assert r.returncode == 2 and "ran" not in r.stdout, r.stderr
    assert f"but use_cpu: true (config file {config}) is set" in r.stderr, r.stderr
    assert f"or set use_cpu: false in {config}." in r.stderr and "--cpu is set" not in r.stderr
    r = accel("launch", "--cpu", "--multi_gpu", str(script), check=False)
    assert r.returncode == 2 and "but --cpu is set" in r.stderr, r.stderr


def test_gpu_ids_on_a_machine_without_gpus_is_named_in_a_warning(tmp_path):
    from accel_launch.configs._limits import local_accelerators

    if local_accelerators() > 0:
        pytest.skip("this machine has accelerators: gpu_ids is used")
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    r = accel("launch", "--gpu_ids", "0,1", str(script))
    assert r.stdout.strip() == "ran", r.stdout
    assert (
        "accel launch: warning: gpu_ids 0,1 (flag --gpu_ids) names GPUs, but this machine has "
        "none; the processes run on CPU and gpu_ids is not used." in r.stderr
    ), r.stderr


def test_a_refusal_after_a_gpu_warning_is_the_only_line(tmp_path):
    """The unused-gpu_ids warning is held back until nothing can refuse the launch: a launch
    refused later (here a torchrun option on a python launch) prints its one error line only."""
    from accel_launch.configs._limits import local_accelerators

    if local_accelerators() > 0:
        pytest.skip("this machine has accelerators: gpu_ids is used")
    r = accel(
        "launch", "--gpu_ids=no", "--rdzv_conf=a=b", "--explain", str(tmp_path / "s.py"),
        check=False,
    )  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("accel launch: error: --rdzv_conf are options of torchrun"), lines
    r = accel("launch", "--gpu_ids=0", "--explain", str(tmp_path / "s.py"))
    assert r.stderr.startswith("accel launch: warning: gpu_ids 0 (flag --gpu_ids)"), r.stderr


def test_accel_test_refuses_a_count_before_saying_the_processes_start():
    r = accel("test", "--num_processes", "500", check=False)
    assert r.returncode == 2 and "num_processes=500" in r.stderr, r.stderr
    assert "starting the processes" not in r.stdout + r.stderr, r.stdout


def test_to_fsdp2_writes_the_files_own_keys_as_the_reference_does(tmp_path):
    import yaml

    reference = pytest.importorskip("accelerate.commands.to_fsdp2")
    source = tmp_path / "fsdp1.yaml"
    source.write_text(
        "# my run\ncompute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
        "fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_use_orig_params: true\n"
        "  fsdp_offload_params: false\nnum_processes: 2\n"
    )
    accel("to-fsdp2", "--config_file", str(source), "--output_file", str(tmp_path / "out.yaml"))
    expected = reference.convert_config_to_fsdp2(reference.load_config(str(source)))
    written = (tmp_path / "out.yaml").read_text()
    assert yaml.safe_load(written) == expected and written.startswith("# my run\n"), written


def test_an_unknown_flag_is_blamed_on_the_subcommand_it_was_given_to(tmp_path):
    r = accel("launch", "--num_proceses", "2", str(tmp_path / "s.py"), check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(
        "accel launch: error: unrecognized arguments: --num_proceses (--num_proceses: did you "
        "mean --num_processes?)\nusage: accel launch --help lists its flags"
    ), r.stderr
