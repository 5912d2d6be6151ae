"""DeepSpeed Ulysses sequence parallelism: 2 launched processes against the unsplit model, and
the checks that refuse what it cannot split (one process)."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from accel_state import DeepSpeedPlugin
from accel_state.testing import free_port, reset_state, run_command

from accel import Accelerator
from accel._engines.deepspeed import _ulysses as ulysses
from accel.utils import ParallelismConfig, sequence_parallel_loss

SCRIPT = Path(__file__).parent / "scripts" / "ulysses_checks.py"
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)
NEEDS_DEEPSPEED = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None
    or importlib.util.find_spec("transformers") is None,
    reason="needs deepspeed and transformers: pip install 'accel-torch[deepspeed]' transformers",
)


@NEEDS_DEEPSPEED
@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sp2_matches_the_unsplit_model_on_two_processes(tmp_path):
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--num_processes", "2", "--main_process_port", str(free_port())]
    flags = ["--use_deepspeed", "--zero_stage", "1", "--parallelism_config_sp_size", "2"]
    flags += ["--parallelism_config_sp_backend", "deepspeed"]
    flags += ["--parallelism_config_sp_attn_implementation", "sdpa"]
    result = run_command(
        [*command, *flags, str(SCRIPT), str(tmp_path / "checkpoint")],
        timeout=840,
        env={"TORCH_EXTENSIONS_DIR": EXTENSIONS},
    )
    assert "RESULT failed=[]" in result.stdout, result.stdout + result.stderr


def _llama_config(**overrides):
    values = {"num_attention_heads": 4, "num_key_value_heads": 4, "_attn_implementation": "sdpa"}
    values.update(overrides)
    return SimpleNamespace(**values)


def _model(**overrides):
    model = torch.nn.Linear(1, 1)
    model.config = _llama_config(**overrides)
    return model


def test_models_ulysses_cannot_split_are_refused():
    assert ulysses.check_model(_model(), 2, None) == "sdpa"
    assert ulysses.check_model(_model(num_key_value_heads=1), 2, "sdpa") == "sdpa"
    with pytest.raises(ValueError, match="without a config holding num_attention_heads"):
        ulysses.check_model(torch.nn.Linear(1, 1), 2, None)
    with pytest.raises(ValueError, match=r"num_attention_heads=6, .* sp_size=4"):
        ulysses.check_model(_model(num_attention_heads=6), 4, None)
    with pytest.raises(ValueError, match=r"num_key_value_heads=3 and sp_size=2"):
        ulysses.check_model(_model(num_key_value_heads=3), 2, None)
    with pytest.raises(ValueError, match=r"\['linear_attention'\]"):
        ulysses.check_model(_model(layer_types=["full_attention", "linear_attention"]), 2, None)
    with pytest.raises(ValueError, match="got attention implementation 'eager'"):
        ulysses.check_model(_model(_attn_implementation="eager"), 2, None)
    with pytest.raises(ValueError, match="sp_attn_implementation='flash_attention_2' and a model"):
        ulysses.check_model(_model(), 2, "flash_attention_2")


def test_recurrent_layers_are_refused_at_the_reference_path():
    from accel.big_modeling import (
        _refuse_recurrent_layers_under_sequence_parallelism,
        refuse_recurrent_layers_under_sequence_parallelism,
    )

    assert _refuse_recurrent_layers_under_sequence_parallelism is (
        refuse_recurrent_layers_under_sequence_parallelism
    )
    with pytest.raises(ValueError, match=r"\['linear_attention'\] in Linear"):
        refuse_recurrent_layers_under_sequence_parallelism(
            _model(layer_types=["full_attention", "linear_attention"])
        )
    refuse_recurrent_layers_under_sequence_parallelism(_model(layer_types=["full_attention"]))
    refuse_recurrent_layers_under_sequence_parallelism(_model())  # no layer_types
    refuse_recurrent_layers_under_sequence_parallelism(torch.nn.Linear(1, 1))  # no config
    text = SimpleNamespace(layer_types=["linear_attention"])
    wrapper = SimpleNamespace(config=SimpleNamespace(get_text_config=lambda: text))
    with pytest.raises(ValueError, match="linear_attention"):
        refuse_recurrent_layers_under_sequence_parallelism(wrapper)


def test_batches_ulysses_cannot_split_are_refused():
    ids = torch.zeros(1, 6, dtype=torch.long)
    ulysses.check_batch({"input_ids": ids, "position_ids": ids}, 2, None)
    with pytest.raises(ValueError, match=r"got a batch of \['input_ids'\]"):
        ulysses.check_batch({"input_ids": ids}, 2, None)
    with pytest.raises(ValueError, match="got a batch of tuple"):
        ulysses.check_batch((ids,), 2, None)
    with pytest.raises(ValueError, match="sp_size=4 equal parts; got sequence length 6"):
        ulysses.check_batch({"input_ids": ids, "position_ids": ids}, 4, None)
    with pytest.raises(ValueError, match="sp_seq_length=8; got a batch of length 6"):
        ulysses.check_batch({"input_ids": ids, "position_ids": ids}, 2, 8)


def test_layouts_ulysses_cannot_run_are_refused():
    assert ulysses.check_layout(2, 4) == 2
    with pytest.raises(ValueError, match=r"sp_size=2 processes, .* got 3 process\(es\)"):
        ulysses.check_layout(2, 3)
    ulysses.check_deepspeed_config({"sequence_parallel_size": "auto"}, 2)
    with pytest.raises(ValueError, match="sequence_parallel_size=4 and sp_size=2"):
        ulysses.check_deepspeed_config({"sequence_parallel_size": 4}, 2)
    # Built on one process: sp_size=2 cannot divide it; without DeepSpeed, or with context
    # parallelism, the layout is refused before anything runs.
    with pytest.raises(ValueError, match=r"got 1 process\(es\)"):
        Accelerator(
            cpu=True,
            deepspeed_plugin=DeepSpeedPlugin(),
            parallelism_config=ParallelismConfig(sp_size=2),
        )
    reset_state()
    with pytest.raises(ValueError, match="got no DeepSpeed plugin"):
        Accelerator(cpu=True, parallelism_config=ParallelismConfig(sp_size=2))
    with pytest.raises(ValueError, match="not both"):
        ParallelismConfig(sp_size=2, cp_size=2)
    config = {"sequence_parallel_size": 2, "zero_optimization": {"stage": 1}}
    reset_state()
    with pytest.raises(ValueError, match="sequence_parallel_size=2 and sp_size=1"):
        Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=config))


def test_the_loss_is_unchanged_without_sequence_parallelism():
    loss = torch.tensor(2.5, requires_grad=True)
    assert sequence_parallel_loss(loss, torch.zeros(1, 4)) is loss
    loader = [1, 2]
    assert Accelerator(cpu=True).deepspeed_ulysses_dl_adapter(loader, None) is loader


def test_split_loader_positions_skips_and_refusals():
    pytest.importorskip("torchdata", reason='needs torchdata: pip install "accel-data[stateful]"')
    from accel_data import prepare_data_loader, skip_first_batches

    data = torch.utils.data.DataLoader(list(range(4)), batch_size=1)
    base = prepare_data_loader(data, num_processes=1, process_index=0, put_on_device=False)
    stateful = prepare_data_loader(
        data, num_processes=1, process_index=0, put_on_device=False, use_stateful_dataloader=True
    )
    size = ulysses.SP_STATE.size
    ulysses.SP_STATE.size = 2
    try:
        split = ulysses.SequenceParallelLoader(base, torch.device("cpu"), None)
        next(iter(base))  # one batch of the wrapped loader read, one slice of it yielded
        split._split.in_group = 1
        state = split.state_dict()
        assert (state["batches_yielded"], state["sequence_parallel_offset"]) == (0, 1)
        split.load_state_dict(state)
        assert (split._split.pending, base.state_dict()["epoch"]) == (1, 0)
        with pytest.raises(ValueError, match="after 1 of 4 slices and sp_size=2"):
            split.load_state_dict({**state, "sequence_parallel_size": 4})
        # 3 slices: the wrapped loader skips 1 whole group, the next pass drops 1 slice.
        skipped = skip_first_batches(split, 3)
        assert (skipped.base_dataloader.skip_batches, skipped._first_drop) == (1, 1)
        assert skipped._split is split._split and split._first_drop is None
        split = ulysses.SequenceParallelLoader(stateful, torch.device("cpu"), None)
        next(iter(stateful))
        split._split.in_group = 1
        with pytest.raises(ValueError, match="save after 1 slice"):
            split.state_dict()
    finally:
        ulysses.SP_STATE.size = size
