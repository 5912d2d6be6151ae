"""Differential tests: ``accel launch``'s command line against the reference's
(``accelerate.commands.launch.launch_command_parser``), fed the same words.

Every option of the reference parser must be accepted by accel with the same spellings and the
same value types and choices; command lines written for the reference must parse to the same
values and resolve to the settings they ask for. Flags of features this version does not have
must stop with a message naming the flag. The Megatron-LM family is compared elsewhere. Deliberate differences are listed in ``docs/migration-cli.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
from typing import Any

import pytest

launch_module = pytest.importorskip(
    "accelerate.commands.launch",
    reason="the reference library is not installed (uv sync --group bench)",
)

from accel_launch import convert_to_fsdp2, resolve  # noqa: E402
from accel_launch.cli import build_parser, main, parse_args  # noqa: E402

OTHER_FAMILIES = ("megatron",)
OTHER_OPTIONS: tuple[str, ...] = ()
"""Reference options of families handled by another change (the Megatron-LM family)."""

SAMPLES = {
    "rdzv_backend": "c10d",
    "offload_optimizer_device": "cpu",
    "offload_param_device": "cpu",
    "deepspeed_multinode_launcher": "standard",
    "fsdp_sharding_strategy": "SHARD_GRAD_OP",
    "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    "fsdp_backward_prefetch": "BACKWARD_PRE",
    "fsdp_state_dict_type": "SHARDED_STATE_DICT",
    "gpu_ids": "0,1",
    "tee": "3",
    "fp8_override_linear_precision": "false,false,true",
    "config_file": "c.yaml",
    "zero3_init_flag": "true",
    "zero3_save_16bit_model": "true",
    "parallelism_config_sp_seq_length": "256",
    "parallelism_config_sp_seq_length_is_variable": "true",
    "parallelism_config_cp_comm_strategy": "alltoall",
    "parallelism_config_sp_attn_implementation": "sdpa",
}
"""A meaningful value for a string option whose values are checked by one of the parsers."""

REFUSED = (
    "enable_cpu_affinity",
    "deepspeed_moe_layer_cls_names",
    "fsdp_activation_checkpointing_offload",
    "fp8_",
    "aws_",
)
"""Reference options (or families) accel refuses: see docs/migration-cli.md."""


def _reference_options() -> list[argparse.Action]:
    parser = launch_module.launch_command_parser()
    return [
        a
        for a in parser._actions
        if a.option_strings
        and a.dest != "help"
        and a.dest not in OTHER_OPTIONS
        and not any(word in a.dest for word in OTHER_FAMILIES)
    ]


def _accel_launch_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["launch"]


def _sample(action: argparse.Action) -> str:
    if action.dest in SAMPLES:
        return SAMPLES[action.dest]
    if action.type is int:
        return "3"
    if action.type is float:
        return "0.5"
    return "true" if str(action.default).lower() in ("true", "false") else "value"


def _same(value: Any) -> str:
    """A value as text, booleans (and the reference's 1/0 for them) as true/false."""
    if isinstance(value, tuple):
        return ",".join(_same(v) for v in value)
    text = str(value).lower()
    return {"1": "true", "0": "false"}.get(text, text)


def _both(words: list[str]) -> tuple[argparse.Namespace, argparse.Namespace]:
    reference = launch_module.launch_command_parser().parse_args(words)
    return reference, parse_args(["launch", *words])


def test_every_reference_option_has_the_same_spellings_in_accel():
    options = _accel_launch_parser()._option_string_actions
    reference = _reference_options()
    assert len(reference) > 80
    missing = [o for a in reference for o in a.option_strings if o not in options]
    assert missing == []
    for action in reference:  # the spellings of one option land on one setting
        assert len({options[o].dest for o in action.option_strings}) == 1, action.option_strings


@pytest.mark.parametrize("action", _reference_options(), ids=lambda a: a.dest)
def test_each_option_takes_the_same_values(action):
    if action.nargs == 0:  # a switch: must not swallow the script name
        for spelling in action.option_strings:
            reference, ours = _both([spelling, "train.py", "--lr", "1"])
            assert ours.training_script == reference.training_script == "train.py"
            assert ours.training_script_args == reference.training_script_args == ["--lr", "1"]
            got = getattr(ours, _accel_dest(spelling))
            if action.const is False:  # --no_tpu_cluster sets the setting off
                assert got is False
            else:
                assert got not in (None, False)
        return
    values = list(action.choices) if action.choices else [_sample(action)]
    for spelling in action.option_strings:
        for value in values:
            reference, ours = _both([spelling, value, "train.py"])
            assert _same(getattr(ours, _accel_dest(spelling))) == _same(
                getattr(reference, action.dest)
            ), (spelling, value)
            assert ours.training_script == "train.py"


def _accel_dest(spelling: str) -> str:
    return _accel_launch_parser()._option_string_actions[spelling].dest


@pytest.mark.parametrize(
    "line",
    [
        "--cpu --num_processes 2 train.py --lr 1e-3",
        "--num-processes=4 --mixed-precision bf16 --cpu -m pkg.train --epochs 2",
        "--use_deepspeed --zero_stage 2 --gradient_accumulation_steps 4 --num_processes 2 "
        "--offload_optimizer_device cpu train.py",
        "--use_fsdp --fsdp_sharding_strategy FULL_SHARD --fsdp_offload_params true "
        "--fsdp_state_dict_type SHARDED_STATE_DICT --num_processes 2 --cpu train.py",
        "--num_machines 2 --machine_rank 1 --main_process_ip 10.0.0.1 "
        "--main_process_port 29501 --num_processes 8 --cpu train.py",
        "-q --dynamo_backend inductor --dynamo_mode max-autotune --num_cpu_threads_per_process 2 "
        "train.py",
        "-t 3 --log_dir logs --role trainer --rdzv_conf timeout=60 --max_restarts 1 "
        "--monitor_interval 0.5 --num_processes 2 --cpu train.py",
    ],
)
def test_reference_command_lines_resolve_to_what_they_ask(line, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_CONFIG_HOME", str(tmp_path))
    words = shlex.split(line)
    reference, ours = _both(words)
    given = {a.dest for a in _reference_options() if set(a.option_strings) & _spellings(words)}
    for dest in given:
        assert _same(getattr(ours, dest)) == _same(getattr(reference, dest)), dest
    assert ours.training_script == reference.training_script
    assert ours.training_script_args == reference.training_script_args
    assert bool(ours.module) == bool(reference.module)
    config = resolve(ours).config
    for dest in given:  # every setting the line names reaches the plan
        section = next(
            (
                s
                for s in ("deepspeed_config", "fsdp_config", "dynamo_config")
                if dest in getattr(config, s).keys()
            ),
            None,
        )
        plan = getattr(getattr(config, section), dest) if section else getattr(config, dest, ...)
        if plan is not ...:
            assert _same(plan) == _same(getattr(reference, dest)), dest
    if "num_processes" in given:
        expected = "MULTI_CPU" if reference.num_processes > 1 else "NO"
        engine = {"use_deepspeed": "DEEPSPEED", "use_fsdp": "FSDP"}
        expected = next((e for f, e in engine.items() if getattr(reference, f)), expected)
        assert config.distributed_type == expected


def _spellings(words: list[str]) -> set[str]:
    return {w.split("=", 1)[0] for w in words if w.startswith("-")}


@pytest.mark.parametrize(
    "action",
    [a for a in _reference_options() if a.dest.startswith(REFUSED)],
    ids=lambda a: a.dest,
)
def test_options_of_missing_features_are_refused_by_name(action, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_CONFIG_HOME", str(tmp_path))
    (tmp_path / "train.py").write_text("raise SystemExit('must not run')\n")
    value = (
        [] if action.nargs == 0 else [_sample(action) if not action.choices else action.choices[0]]
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["launch", action.option_strings[-1], *value, str(tmp_path / "train.py")])
    assert code == 2
    message = err.getvalue()
    assert f"--{action.dest} is not supported by accel launch" in message
    assert "drop" in message.lower() and "Got --" in message


def _subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize(
    ("module", "factory", "ours"),
    [
        ("accelerate.commands.estimate", "estimate_command_parser", "estimate-memory"),
        ("accelerate.commands.merge", "merge_command_parser", "merge-weights"),
        ("accelerate.commands.to_fsdp2", "to_fsdp2_command_parser", "to-fsdp2"),
    ],
)
def test_other_subcommands_have_the_reference_options(module, factory, ours):
    import importlib

    reference = getattr(importlib.import_module(module), factory)()
    options = _subcommand(ours)._option_string_actions
    for action in reference._actions:
        missing = [o for o in action.option_strings if o not in options]
        assert missing == [], (ours, missing)
        if action.choices and action.option_strings:
            accepted = options[action.option_strings[0]].choices
            assert set(action.choices) <= set(accepted), (ours, action.dest)


FSDP1_CONFIGS = [
    {"fsdp_sharding_strategy": strategy, "fsdp_backward_prefetch": "BACKWARD_PRE"}
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD")
] + [
    {
        "fsdp_version": 1,
        "fsdp_reshard_after_forward": "SHARD_GRAD_OP",
        "fsdp_use_orig_params": True,
        "fsdp_sync_module_states": True,
        "fsdp_forward_prefetch": False,
        "fsdp_state_dict_type": "FULL_STATE_DICT",
        "fsdp_transformer_layer_cls_to_wrap": "Block",
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    },
    {"fsdp_version": 2, "fsdp_reshard_after_forward": True},
    {},
]


@pytest.mark.parametrize("fsdp", FSDP1_CONFIGS)
def test_to_fsdp2_converts_like_the_reference(fsdp):
    import copy

    from accelerate.commands.to_fsdp2 import convert_config_to_fsdp2

    config = {"distributed_type": "FSDP", "num_processes": 2, "fsdp_config": fsdp}
    theirs = convert_config_to_fsdp2(copy.deepcopy(config))
    ours, _ = convert_to_fsdp2(copy.deepcopy(config))
    assert ours == theirs
