"""Context parallelism: ring attention over 2 gloo processes against the unsplit model, and
the checks that refuse what it cannot split."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from accel_state.testing import run_distributed

from accel._engines.fsdp._context_parallel import check_buffers, drop_attention_masks

SCRIPT = Path(__file__).parent / "scripts" / "cp_checks.py"


@pytest.mark.multiprocess
@pytest.mark.timeout(600)
def test_cp2_matches_the_unsplit_model_on_two_processes(tmp_path):
    result = run_distributed(SCRIPT, str(tmp_path / "ckpt"), num_processes=2, timeout=540)
    assert "RESULT type=FSDP mesh=('cp',) failed=[]" in result.stdout, result.stdout + result.stderr


def test_buffers_that_cannot_be_split_are_refused():
    ids = torch.zeros(2, 6)
    check_buffers([ids], [1], {ids}, cp_size=2)
    check_buffers(None, None, None, cp_size=1)
    with pytest.raises(ValueError, match="got no buffers"):
        check_buffers(None, None, None, cp_size=2)
    with pytest.raises(ValueError, match=r"same sequence length.*\[\(2, 6\), \(2, 4\)\]"):
        check_buffers([ids, torch.zeros(2, 4)], [1, 1], None, cp_size=2)
    with pytest.raises(ValueError, match=r"cp_size=4 equal parts; got sequence length 6"):
        check_buffers([ids], [1], None, cp_size=4)
    with pytest.raises(ValueError, match="must be a subset of buffers"):
        check_buffers([ids], [1], {torch.zeros(2, 6)}, cp_size=2)


class _Attention(torch.nn.Module):
    def forward(self, x: torch.Tensor, attention_mask=None, is_causal=False):
        return x, attention_mask, is_causal


class _Model(torch.nn.Module):
    def __init__(self, config: object) -> None:
        super().__init__()
        self.config = config
        self.self_attn = _Attention()


def test_attention_masks_are_dropped_for_causal_ring_attention():
    model = _Model(SimpleNamespace(layer_types=["full_attention"] * 2))
    drop_attention_masks(model)
    x = torch.ones(1)
    _, mask, causal = model.self_attn(x, attention_mask=torch.ones(1, 1))
    assert mask is None and causal is True
    assert model.self_attn(x)[1:] == (None, False)  # no mask given: nothing changes
    for config in (
        SimpleNamespace(layer_types=["full_attention", "sliding_attention"]),
        SimpleNamespace(sliding_window=128),
    ):
        with pytest.raises(ValueError, match=r"\['sliding_attention'\], whose mask"):
            drop_attention_masks(_Model(config))


def test_sequence_splits_are_checked_when_the_accelerator_is_built():
    from accel import Accelerator
    from accel.utils import ParallelismConfig

    with pytest.raises(ValueError, match=r"sp_size=2 .* got no DeepSpeed plugin"):
        Accelerator(cpu=True, parallelism_config=ParallelismConfig(sp_size=2))
    with pytest.raises(ValueError, match=r"cp_size \* sp_size \* tp_size to equal the number"):
        Accelerator(cpu=True, parallelism_config=ParallelismConfig(cp_size=2))
    # Without context parallelism the context leaves the buffers whole.
    acc = Accelerator(cpu=True, parallelism_config=ParallelismConfig())
    ids = torch.arange(6).reshape(1, 6)
    with acc.maybe_context_parallel(buffers=[ids], buffer_seq_dims=[1]):
        assert ids.shape == (1, 6)
