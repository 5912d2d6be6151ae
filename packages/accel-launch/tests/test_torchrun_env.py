"""``prepare_multi_gpu_env``: torchrun's rendezvous arguments and the processes' environment
from the reference's parsed launch arguments."""

from __future__ import annotations

import argparse
import socket

import pytest

from accel_launch import ConfigError, prepare_multi_gpu_env


def _args(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "num_processes": 2,
        "num_machines": 1,
        "main_process_ip": "127.0.0.1",
        "main_process_port": 0,
        "machine_rank": 0,
        "module": False,
        "no_python": False,
        "debug": False,
        "gpu_ids": "all",
        "mixed_precision": "bf16",
        "dynamo_backend": "NO",
        "use_fsdp": False,
        "fsdp_reshard_after_forward": False,
        "fsdp_offload_params": False,
        "fsdp_version": None,
        "use_megatron_lm": False,
        "megatron_lm_tp_degree": 1,
    }
    values.update(overrides)
    return argparse.Namespace(**values)


def test_port_zero_picks_a_free_port_and_settings_reach_the_environment():
    args = _args()
    env = prepare_multi_gpu_env(args)
    assert args.master_port.isdigit() and args.master_port != "0"
    assert args.main_process_port == int(args.master_port)
    assert args.nproc_per_node == "2"
    assert env["ACCEL_MIXED_PRECISION"] == "bf16"
    assert env["ACCEL_DISTRIBUTED_TYPE"] in ("MULTI_GPU", "MULTI_CPU")
    assert "ACCEL_USE_FSDP" not in env
    assert "PATH" in env  # this process's environment, extended


def test_several_machines_get_a_rendezvous_endpoint():
    args = _args(num_processes=4, num_machines=2, machine_rank=1, main_process_port=1234)
    prepare_multi_gpu_env(args)
    assert (args.nproc_per_node, args.nnodes, args.node_rank) == ("2", "2", 1)
    assert args.rdzv_endpoint == "127.0.0.1:1234"
    same = _args(num_processes=4, num_machines=2, machine_rank=1, same_network=True)
    prepare_multi_gpu_env(same)
    assert (same.master_addr, same.master_port) == ("127.0.0.1", same.master_port)
    assert same.master_port.isdigit()


def test_fsdp_settings_reach_the_environment():
    env = prepare_multi_gpu_env(_args(use_fsdp=True, fsdp_offload_params=True))
    assert env["ACCEL_USE_FSDP"] == "1"


def test_a_taken_port_is_refused():
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ConfigError, match=f"main_process_port {port} is already in use"):
            prepare_multi_gpu_env(_args(main_process_port=port))


def test_module_and_no_python_exclude_each_other():
    with pytest.raises(ValueError, match="got both"):
        prepare_multi_gpu_env(_args(module=True, no_python=True))


def test_bad_mixed_precision_is_refused():
    with pytest.raises(ValueError, match="fp7"):
        prepare_multi_gpu_env(_args(mixed_precision="fp7"))
