"""Runs on 2 processes: models built on meta, cut into stages, each stage loaded from a checkpoint.

Usage: ``stage_weights_worker.py <folder>``; the folder holds ``llama/`` and ``gpt2/`` (sharded
safetensors checkpoints) and ``expected.safetensors`` (the whole models' logits). Prints
``RANK <r> OK <check>`` per passed check and ``RANK <r> MEASURE <key> <value>`` per measurement.
"""

from __future__ import annotations

import gc
import resource
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

import psutil
from accel_bigmodel import init_empty_weights
from accel_state import PartialState
from hf_models import gpt2, llama, prompts
from safetensors.torch import load_file

from accel_pipeline import prepare_pippy

folder = Path(sys.argv[1])
expected = load_file(folder / "expected.safetensors")
state = PartialState()
rank = state.process_index


def ok(check: str) -> None:
    print(f"RANK {rank} OK {check}", flush=True)


def measure(key: str, value: float) -> None:
    print(f"RANK {rank} MEASURE {key} {value:.1f}", flush=True)


def live_tensor_bytes() -> int:
    """Bytes of the distinct CPU storages of every tensor the garbage collector can see."""
    storages: dict[int, int] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensors = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    for tensor in tensors:
        if tensor.device.type != "cpu":
            continue
        try:
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        except RuntimeError:  # fake tensors kept in traced graphs' metadata
            continue
    return sum(storages.values())


def whole_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


# 1. Llama built on meta, stage loaded from a sharded checkpoint: same logits, half the weights.
with init_empty_weights():
    model = llama().eval()
total = whole_bytes(model)
ids = prompts(model.config.vocab_size)
gc.collect()
before = live_tensor_bytes()
model = prepare_pippy(
    model, example_args=(ids,), checkpoint=folder / "llama", num_chunks=2, gather_output=True
)
logits = model(ids).logits
torch.testing.assert_close(logits, expected["llama"], atol=1e-5, rtol=1e-5)
weights = model.pippy_stage_weights
assert weights.stage_bytes <= 0.6 * total, (weights.stage_bytes, total)
stage_params = list(model.pippy_stage.submod.parameters())
assert all(0 not in p.stride() or p.numel() <= 1 for p in stage_params), "placeholder left"
assert all(p.device.type == "meta" for n, p in model.named_parameters() if n in weights.released)
assert weights.released and set(weights.released).isdisjoint(weights.kept)
gc.collect()
after = live_tensor_bytes()
assert after - before <= 0.6 * total, (after - before, total)
measure("whole_model_bytes", total)
measure("stage_bytes", weights.stage_bytes)
measure("live_tensor_bytes_added", after - before)
measure("rss_mb", psutil.Process().memory_info().rss / 2**20)
measure("peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
ok("llama_meta_checkpoint")

# 2. A model with real weights keeps only its stage: the rest is freed, not just unreferenced.
torch.manual_seed(0)
model = llama(num_hidden_layers=4).eval()
first = dict(model.named_parameters())
storages = {n: p.untyped_storage() for n, p in first.items()}
model = prepare_pippy(model, example_args=(ids,))
kept = set(model.pippy_stage_weights.kept)
for name, storage in storages.items():
    if name in kept:
        assert storage.nbytes() > 0, name
    else:
        assert storage.nbytes() == 0, (name, storage.nbytes())
ok("real_weights_released")

# 3. GPT-2 ties its output head to the token embedding: both stages hold that one tensor.
with init_empty_weights():
    model = gpt2().eval()
total = whole_bytes(model)
ids = prompts(model.config.vocab_size, seed=1)
model = prepare_pippy(model, example_args=(ids,), checkpoint=folder / "gpt2", gather_output=True)
torch.testing.assert_close(model(ids).logits, expected["gpt2"], atol=1e-5, rtol=1e-5)
embedding = model.config.vocab_size * model.config.n_embd * 4
held = model.pippy_stage_weights.stage_bytes
assert held <= total / 2 + embedding, (held, total, embedding)
ok("gpt2_tied")

# 4. A model on meta without a checkpoint is refused on every process before any tracing.
with init_empty_weights():
    model = gpt2().eval()
try:
    prepare_pippy(model, example_args=(ids,))
except ValueError as err:
    assert "meta device" in str(err) and "checkpoint=" in str(err), err
else:
    raise AssertionError("a meta model without a checkpoint was accepted")
ok("meta_without_checkpoint")

state.wait_for_everyone()
ok("done")
