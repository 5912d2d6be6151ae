"""Each process holds only its pipeline stage; models built on meta load only their stage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the stage tests use transformers models")
pytest.importorskip("psutil", reason="the stage tests measure memory with psutil")

from accel_bigmodel import init_empty_weights  # noqa: E402
from accel_state.testing import run_distributed  # noqa: E402
from hf_models import gpt2, llama, prompts  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from accel_pipeline import prepare_pippy  # noqa: E402

CHECKS = [
    "llama_meta_checkpoint",
    "real_weights_released",
    "gpt2_tied",
    "meta_without_checkpoint",
    "done",
]


def _save(model: torch.nn.Module, folder: Path, ids: torch.Tensor) -> torch.Tensor:
    model.eval().save_pretrained(folder, max_shard_size="200KB")
    with torch.no_grad():
        return model(ids, use_cache=False).logits.contiguous()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pipeline_checkpoints")
    torch.manual_seed(0)
    model = llama()
    expected = {"llama": _save(model, folder / "llama", prompts(model.config.vocab_size))}
    torch.manual_seed(1)
    model = gpt2()
    expected["gpt2"] = _save(model, folder / "gpt2", prompts(model.config.vocab_size, seed=1))
    save_file(expected, folder / "expected.safetensors")
    assert len(list((folder / "llama").glob("*.safetensors"))) > 1, "checkpoint not sharded"
    return folder


@pytest.mark.multiprocess
def test_each_process_loads_and_keeps_only_its_stage(checkpoints: Path) -> None:
    script = Path(__file__).parent / "scripts" / "stage_weights_worker.py"
    result = run_distributed(script, str(checkpoints), num_processes=2, timeout=500)
    for check in CHECKS:
        for rank in (0, 1):
            assert f"RANK {rank} OK {check}" in result.stdout, result.stdout
    # Memory is recorded, not asserted: the test's report shows each process's numbers.
    for line in re.findall(r"RANK \d MEASURE .*", result.stdout):
        print(line)


def test_single_process_loads_the_whole_checkpoint(checkpoints: Path) -> None:
    from safetensors.torch import load_file

    with init_empty_weights():
        model = llama().eval()
    ids = prompts(model.config.vocab_size)
    model = prepare_pippy(model, example_args=(ids,), checkpoint=checkpoints / "llama")
    expected = load_file(checkpoints / "expected.safetensors")["llama"]
    torch.testing.assert_close(model(ids).logits, expected, atol=1e-5, rtol=1e-5)


def test_meta_model_without_checkpoint_is_refused() -> None:
    with init_empty_weights():
        model = gpt2().eval()
    with pytest.raises(ValueError, match=r"on the meta device.*checkpoint="):
        prepare_pippy(model, example_args=(prompts(300),))


def test_missing_checkpoint_is_refused_before_tracing(tmp_path: Path) -> None:
    with init_empty_weights():
        model = gpt2().eval()
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        prepare_pippy(model, example_args=(prompts(300),), checkpoint=missing)
    assert all(p.device.type == "meta" for p in model.parameters()), "model changed"


def test_checkpoint_must_be_a_path() -> None:
    with init_empty_weights():
        model = gpt2().eval()
    with pytest.raises(TypeError, match="must be the path"):
        prepare_pippy(model, example_args=(prompts(300),), checkpoint={"w": 1})  # type: ignore[arg-type]
