"""DDP communication hooks (``DistributedDataParallelKwargs.comm_hook`` / ``comm_wrapper``)."""

from pathlib import Path

import pytest
from accel_state.testing import run_distributed

from accel.utils import DDPCommunicationHookType, DistributedDataParallelKwargs

SCRIPTS = Path(__file__).parent / "scripts"
CHECKS = [
    "no_hook_is_exact_mean",
    "fp16_hook",
    "bf16_hook",
    "power_sgd_is_low_rank",
    "batched_power_sgd_and_wrappers",
]


@pytest.mark.multiprocess
def test_comm_hooks_on_two_processes():
    result = run_distributed(SCRIPTS / "ddp_comm_hooks.py", num_processes=2, timeout=240)
    for name in CHECKS:
        assert f"PASSED check_{name}" in result.stdout, result.stdout + result.stderr


def test_defaults_and_parsing():
    kwargs = DistributedDataParallelKwargs()
    assert kwargs.comm_hook is DDPCommunicationHookType.NO
    assert kwargs.comm_wrapper is DDPCommunicationHookType.NO
    assert kwargs.to_kwargs() == {}
    parsed = DistributedDataParallelKwargs(comm_hook="POWER_SGD", comm_wrapper="bf16")
    assert parsed.comm_hook is DDPCommunicationHookType.POWER_SGD
    assert parsed.comm_wrapper is DDPCommunicationHookType.BF16
    assert DistributedDataParallelKwargs(bucket_cap_mb=5, comm_hook="fp16").to_kwargs() == {
        "bucket_cap_mb": 5
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"comm_hook": "fp32"}, "comm_hook must be one of"),
        ({"comm_hook": "power_sgd", "comm_wrapper": "power_sgd"}, "comm_wrapper must be one of"),
        ({"comm_wrapper": "fp16"}, "comm_hook is 'no'"),
        ({"comm_hook": "fp16", "comm_state_option": {"a": 1}}, "stateless"),
    ],
)
def test_invalid_combinations_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DistributedDataParallelKwargs(**kwargs)


def test_hook_function_state_option_needs_a_class():
    kwargs = DistributedDataParallelKwargs(comm_hook=print, comm_state_option={"rank": 1})
    with pytest.raises(ValueError, match="needs 'state_class'"):
        kwargs.register_comm_hook(object())
