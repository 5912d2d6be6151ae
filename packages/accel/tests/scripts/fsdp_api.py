"""Run on 2 processes: the reference's FSDP checkpoint functions (save_fsdp_model,
load_fsdp_model, save_fsdp_optimizer, load_fsdp_optimizer, merge_fsdp_weights) round-trip a
trained FSDP2 model and its optimizer in both layouts (with ``adapter_only=True``, ignored for a
model without PEFT adapters, as the reference does).

``python -m torch.distributed.run --nproc_per_node 2 fsdp_api.py OUT``
"""

import os
import sys
import time

import torch
import torch.distributed as dist
from accel_launch import ConfigError
from accel_state import AcceleratorState, GradientState
from safetensors.torch import load_file
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

from accel import Accelerator
from accel.utils import (
    FullyShardedDataParallelPlugin,
    load_fsdp_model,
    load_fsdp_optimizer,
    merge_fsdp_weights,
    save_fsdp_model,
    save_fsdp_optimizer,
)


def build(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def full_optimizer(model, opt):
    options = StateDictOptions(full_state_dict=True)
    return get_optimizer_state_dict(model, opt.optimizer, options=options)["state"]


def same(a, b):
    assert a.keys() == b.keys(), (sorted(a), sorted(b))
    for key, value in a.items():
        if isinstance(value, dict):
            same(value, b[key])
        else:
            assert torch.equal(value, b[key]), key


def main():
    out = sys.argv[1]
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    acc = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
    plugin = acc.state.fsdp_plugin
    model, opt = acc.prepare(*build(0))
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(acc.process_index))
    acc.backward(model(x).pow(2).mean())
    opt.step()
    expected_model = acc.get_state_dict(model)
    expected_opt = full_optimizer(model, opt)
    for kind in ("SHARDED_STATE_DICT", "FULL_STATE_DICT"):
        plugin.set_state_dict_type(kind)
        folder = os.path.join(out, kind)
        # adapter_only=True, as transformers' Trainer passes it: a model without PEFT adapters
        # is saved and loaded whole.
        save_fsdp_model(plugin, acc, model, folder, adapter_only=True)
        save_fsdp_optimizer(plugin, acc, opt, model, folder)
        if kind == "FULL_STATE_DICT":  # the reference's name, which transformers looks for
            assert os.path.isfile(os.path.join(folder, "optimizer.bin")), os.listdir(folder)
        other, other_opt = acc.prepare(*build(1))  # different weights, no optimizer state
        load_fsdp_model(plugin, acc, other, folder, adapter_only=True)
        load_fsdp_optimizer(plugin, acc, other_opt, other, folder, adapter_only=True)
        loaded = acc.get_state_dict(other)
        if acc.is_main_process:
            same(loaded, expected_model)
        same(full_optimizer(other, other_opt), expected_opt)
    print(f"PASSED check_round_trip rank {acc.process_index}", flush=True)

    shards = os.path.join(out, "SHARDED_STATE_DICT", "pytorch_model_fsdp_0")
    if acc.process_index == 1:
        # This process comes late, as on a loaded machine: the main process has written the
        # merged file by then, and the merge must not take it for an earlier one.
        time.sleep(2)
    written = merge_fsdp_weights(shards, os.path.join(out, "merged"))
    if acc.is_main_process:
        merged = load_file(written[0])
        same({f"{k}": v for k, v in merged.items()}, expected_model)
    else:
        assert written == []
    # A second merge into the same folder is refused on every process alike, not only on the
    # one that would write (which would leave the others waiting at the barrier).
    try:
        merge_fsdp_weights(shards, os.path.join(out, "merged"))
    except ConfigError as err:
        assert "does not overwrite" in str(err), err
    else:
        raise AssertionError("a second merge into the same folder was accepted")
    print(f"PASSED check_merge rank {acc.process_index}", flush=True)

    plugin.set_state_dict_type("SHARDED_STATE_DICT")
    for call, error in (
        (lambda: load_fsdp_model(plugin, acc, other, os.path.join(out, "none")), FileNotFoundError),
        (lambda: save_fsdp_model(plugin, acc, other, out, use_dcp=False), ValueError),
    ):
        try:
            call()
        except error as err:
            assert "got" in str(err) or "holds neither" in str(err), err
        else:
            raise AssertionError("accepted")
    dist.barrier()
    print(f"PASSED check_refusals rank {acc.process_index}", flush=True)


if __name__ == "__main__":
    main()
