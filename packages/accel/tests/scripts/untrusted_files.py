"""Tampered DeepSpeed / FSDP checkpoints are refused by ``load_state`` without running code.

Usage: untrusted_files.py OUT_DIR ENGINE, with ENGINE ``deepspeed`` (1 process or more) or
``fsdp`` (2 processes). Each malicious file is a pickle whose ``__reduce__`` would create a
marker file; the script checks that the marker never appears, that the error names the file,
the global and the opt-in, and that a trusted-but-unusual checkpoint loads with
``trust_pickles=True``. Prints ``PASSED check_<name>``.
"""

import datetime
import json
import os
import pickle
import shutil
import sys

import torch
import torch.distributed as dist
from accel_bigmodel import (
    PathOutsideCheckpointError,
    UntrustedPickleError,
    read_dcp_metadata_safely,
)
from accel_state import AcceleratorState, GradientState
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator, DeepSpeedPlugin, FullyShardedDataParallelPlugin
from accel._training_checkpoints.files._manifest import file_checksum

OUT, ENGINE = sys.argv[1], sys.argv[2]
OPT_IN = "load_state(..., trust_pickles=True)"


class Payload:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.lin(x))


def fresh(**kwargs):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    return Accelerator(**kwargs)


def trained(acc):
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block(), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
    model, opt, loader = acc.prepare(model, opt, DataLoader(data, batch_size=4))
    for x, y in loader:
        acc.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
        opt.zero_grad()
    return model, opt


def tampered_copy(acc, source, name, write):
    """A copy of checkpoint ``source`` whose file ``name`` is rewritten by ``write(path)``,
    with the manifest's size fixed (whoever can write the file can fix the manifest too)."""
    target = f"{source}_{name.replace('/', '_').replace('.', '_')}"
    if acc.is_main_process:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        path = os.path.join(target, name)
        write(path)
        manifest_path = os.path.join(target, "accel_checkpoint.json")
        with open(manifest_path) as handle:
            manifest = json.load(handle)
        if name in manifest["files"]:
            manifest["files"][name] = os.path.getsize(path)
            if name in manifest.get("checksums", {}):
                manifest["checksums"][name] = file_checksum(path)
        with open(manifest_path, "w") as handle:
            json.dump(manifest, handle)
    acc.wait_for_everyone()
    return target


def expect_refused(acc, folder, name, refused="posix.system"):
    marker = os.path.join(folder, "marker")
    try:
        acc.load_state(folder)
    except UntrustedPickleError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"{name}: a tampered file was loaded")
    assert not os.path.exists(marker), f"{name}: the payload ran"
    assert name in message and refused in message and OPT_IN in message, message
    acc.wait_for_everyone()


def payload_writer(folder):
    return lambda path: torch.save({"module": Payload(os.path.join(folder, "marker"))}, path)


def check_deepspeed():
    for stage in (2, 3):
        acc = fresh(deepspeed_plugin=DeepSpeedPlugin(zero_stage=stage))
        trained(acc)
        clean = acc.save_state(os.path.join(OUT, f"zero{stage}"))
        acc.load_state(clean)  # real ZeRO files pass the check
    print("PASSED check_deepspeed_real_checkpoints_load", flush=True)
    files = sorted(
        f"deepspeed_model_0/{n}" for n in os.listdir(os.path.join(clean, "deepspeed_model_0"))
    )
    assert len(files) >= 2, files
    for name in files:
        folder = f"{clean}_{name.replace('/', '_').replace('.', '_')}"
        tampered = tampered_copy(acc, clean, name, payload_writer(folder))
        expect_refused(acc, tampered, name)
        try:
            acc.engine.validate_model_state(tampered, 0)
        except UntrustedPickleError as exc:
            assert name in str(exc), exc
        else:
            raise AssertionError("validate_model_state accepted a tampered file")
    print("PASSED check_deepspeed_payloads_refused", flush=True)
    check_trusted(acc, clean, next(n for n in files if n.endswith("model_states.pt")))
    print("PASSED check_deepspeed_opt_in", flush=True)


def check_trusted(acc, clean, name):
    """A trusted file with an unusual object is refused, then loads when opted in."""

    def add_date(path):
        state = torch.load(path, weights_only=False)  # our own file, just written
        state["saved_on"] = datetime.date(2024, 5, 1)
        torch.save(state, path)

    unusual = tampered_copy(acc, clean, name, add_date)
    expect_refused(acc, unusual, name, refused="datetime.date")
    acc.load_state(unusual, trust_pickles=True)


def check_fsdp():
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        auto_wrap_policy="TRANSFORMER_BASED_WRAP",
        transformer_cls_names_to_wrap=["Block"],
        state_dict_type="SHARDED_STATE_DICT",
    )
    acc = fresh(fsdp_plugin=plugin)
    trained(acc)
    clean = acc.save_state(os.path.join(OUT, "fsdp_sharded"))
    acc.load_state(clean)
    for name in ("pytorch_model_fsdp_0/.metadata", "optimizer_fsdp_0/.metadata"):
        folder = f"{clean}_{name.replace('/', '_').replace('.', '_')}"
        marker = os.path.join(folder, "marker")
        write = lambda path, m=marker: open(path, "wb").write(pickle.dumps(Payload(m)))  # noqa: E731
        expect_refused(acc, tampered_copy(acc, clean, name, write), name)
    print("PASSED check_fsdp_metadata_payloads_refused", flush=True)

    def read_outside(path):
        """Point one storage entry at a file outside the checkpoint (allowed classes only)."""
        with open(os.path.join(os.path.dirname(os.path.dirname(path)), "..", "secret"), "wb") as f:
            f.write(b"S" * 4096)
        metadata = read_dcp_metadata_safely(os.path.dirname(path))
        first = next(iter(metadata.storage_data))
        metadata.storage_data[first].relative_path = "../../secret"
        with open(path, "wb") as handle:
            pickle.dump(metadata, handle)

    name = "pytorch_model_fsdp_0/.metadata"
    outside = tampered_copy(acc, clean, name, read_outside)
    before = [p.detach().full_tensor().clone() for p in acc._models[0].parameters()]
    try:
        acc.load_state(outside)
    except PathOutsideCheckpointError as exc:
        assert "'../../secret'" in str(exc) and name in str(exc), str(exc)
    else:
        raise AssertionError("a storage entry outside the checkpoint was read")
    after = [p.detach().full_tensor() for p in acc._models[0].parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after)), "weights changed"
    acc.wait_for_everyone()
    print("PASSED check_fsdp_path_outside_refused", flush=True)

    def add_date(path):
        metadata = read_dcp_metadata_safely(os.path.dirname(path))
        metadata.planner_data = {"saved_on": datetime.date(2024, 5, 1)}
        with open(path, "wb") as handle:
            pickle.dump(metadata, handle)

    name = "pytorch_model_fsdp_0/.metadata"
    unusual = tampered_copy(acc, clean, name, add_date)
    expect_refused(acc, unusual, name, refused="datetime.date")
    acc.load_state(unusual, trust_pickles=True)
    print("PASSED check_fsdp_opt_in", flush=True)
    acc.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    full = acc.save_state(os.path.join(OUT, "fsdp_full"))
    name = "optimizer_fsdp_0.bin"
    folder = f"{full}_{name.replace('.', '_')}"
    expect_refused(acc, tampered_copy(acc, full, name, payload_writer(folder)), name)
    print("PASSED check_fsdp_full_optimizer_payload_refused", flush=True)


if __name__ == "__main__":
    {"deepspeed": check_deepspeed, "fsdp": check_fsdp}[ENGINE]()
    if dist.is_initialized():
        dist.barrier()
