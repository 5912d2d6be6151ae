"""DeepSpeed Ulysses sequence parallelism inside the DeepSpeed engine.

With ``ParallelismConfig(sp_size=N, sp_backend="deepspeed")`` every group of ``N`` consecutive
processes trains on the same batches, each process holding ``1/N`` of every sequence. DeepSpeed's
``UlyssesSPAttentionHF`` replaces the model's ``transformers`` attention function: an all-to-all
turns the sequence split into a head split before attention and back after it. DeepSpeed's
``UlyssesSPDataLoaderAdapter`` gathers one batch from each process of the group and hands each
process its slice of every one of them, with ``shift_labels`` (the labels shifted before the
split). [`sequence_parallel_loss`][accel.utils.sequence_parallel_loss] averages the loss over the group's tokens.

Everything here runs on CPU with gloo; on CUDA the same DeepSpeed calls run with NCCL and the
process's GPU (the lines marked ``CUDA``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

IGNORE_INDEX = -100
"""Label of tokens left out of the loss (the convention of ``transformers`` and DeepSpeed)."""
_UNSUPPORTED_ATTENTION = ("eager", "paged|eager", "flex_attention")


@dataclass
class _SequenceParallelGroup:
    """This process's sequence-parallel group (one per process, like DeepSpeed's own)."""

    size: int = 1
    rank: int = 0
    group: Any = None
    mpu: Any = None
    """DeepSpeed's groups object, once the attention of a model is registered."""


SP_STATE = _SequenceParallelGroup()


def setup_groups(sp_size: int) -> None:
    """Make the process groups of ``sp_size`` consecutive ranks (every process takes part in
    creating each group) and remember this process's."""
    import torch.distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    if SP_STATE.group is not None and SP_STATE.size == sp_size:
        return
    for first in range(0, world, sp_size):
        ranks = list(range(first, first + sp_size))
        group = dist.new_group(ranks)
        if rank in ranks:
            SP_STATE.size, SP_STATE.rank, SP_STATE.group = sp_size, rank - first, group


def check_layout(sp_size: int, num_processes: int) -> int:
    """Check that ``sp_size`` processes split each sequence; return the data-parallel size.

    Raises:
        ValueError: when ``sp_size`` does not divide the number of processes.
    """
    if num_processes % sp_size:
        raise ValueError(
            f"Ulysses sequence parallelism splits each sequence over groups of sp_size={sp_size} "
            f"processes, so sp_size must divide the number of processes; got {num_processes} "
            f"process(es). Launch a multiple of {sp_size} processes, or change sp_size."
        )
    return num_processes // sp_size


def check_deepspeed_config(config: Mapping[str, Any], sp_size: int) -> None:
    """Refuse a DeepSpeed config whose ``sequence_parallel_size`` disagrees with ``sp_size``.

    Raises:
        ValueError: naming both values and where to set the size.
    """
    size = config.get("sequence_parallel_size", "auto")
    if size in ("auto", None) or int(size) == sp_size:
        return
    raise ValueError(
        "the DeepSpeed config's sequence_parallel_size and ParallelismConfig.sp_size must be "
        f"one number; got sequence_parallel_size={size!r} and sp_size={sp_size}. Set the size "
        "in ParallelismConfig(sp_size=..., sp_backend='deepspeed') (or accel launch "
        "--parallelism_config_sp_size) and remove it from the DeepSpeed config."
    )


def refuse_recurrent_layers_under_sequence_parallelism(model: Any) -> None:
    """Refuse a model whose layers carry a state along the sequence, before Ulysses splits it.

    Ulysses gathers each sequence around attention only. A linear-attention layer (a
    ``layer_types`` entry of the model's text config containing ``"linear"``, e.g.
    ``"linear_attention"``) runs its recurrence in the model's own code, so each process would
    restart the state at its shard and the gradients would be silently wrong. A model without a
    config, or whose config has no ``layer_types``, passes.

    Args:
        model: The model about to be prepared for sequence parallelism.

    Raises:
        ValueError: naming the recurrent layer types found.
    """
    config: Any = getattr(model, "config", None)
    text = (
        config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
    )
    recurrent = sorted({t for t in getattr(text, "layer_types", None) or [] if "linear" in t})
    if recurrent:
        raise ValueError(
            "Ulysses sequence parallelism splits sequences only around attention; layers that "
            "carry a state along the sequence would restart it on every process; got layers of "
            f"type {recurrent} in {type(model).__name__}. Use a model with attention layers "
            "only, or sp_size=1."
        )


_refuse_recurrent_layers_under_sequence_parallelism = (
    refuse_recurrent_layers_under_sequence_parallelism
)
"""The reference's private name of
[`refuse_recurrent_layers_under_sequence_parallelism`][accel._engines.deepspeed._ulysses.refuse_recurrent_layers_under_sequence_parallelism]."""


def check_model(model: torch.nn.Module, sp_size: int, attn_implementation: str | None) -> str:
    """Check that Ulysses can take over the attention of ``model``; return the attention
    implementation to register.

    Args:
        model: The user's model (a ``transformers`` model, or one with its ``config``).
        sp_size: Number of processes each sequence is split over.
        attn_implementation: ``DeepSpeedSequenceParallelConfig.sp_attn_implementation`` (None:
            the model's own).

    Raises:
        ValueError: for a model without a ``transformers`` config, attention heads that
            ``sp_size`` does not divide, layers with a recurrent state, or an attention
            implementation that cannot be split (``eager``) or differs from the model's.
    """
    config: Any = getattr(model, "config", None)
    text = (
        config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
    )
    heads = getattr(text, "num_attention_heads", None)
    if not isinstance(heads, int):
        raise ValueError(
            "Ulysses sequence parallelism replaces the attention function of a transformers "
            f"model, found through model.config; got a {type(model).__name__} without a config "
            "holding num_attention_heads. Prepare a transformers model (PreTrainedModel), or "
            "use sp_size=1."
        )
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    if heads % sp_size or (kv_heads % sp_size and sp_size % kv_heads):
        raise ValueError(
            "Ulysses gives each process of a sequence-parallel group an equal share of the "
            f"attention heads; got num_attention_heads={heads}, num_key_value_heads={kv_heads} "
            f"and sp_size={sp_size} (sp_size must divide the heads, and divide or be a multiple "
            "of the key/value heads). Choose an sp_size that divides the head counts."
        )
    refuse_recurrent_layers_under_sequence_parallelism(model)
    own = getattr(config, "_attn_implementation", None)
    wanted = attn_implementation or own
    if wanted in _UNSUPPORTED_ATTENTION or wanted is None:
        raise ValueError(
            "Ulysses attends over the gathered sequence with position_ids and no attention mask; "
            f"got attention implementation {wanted!r}, which needs a mask. Load the model with "
            "attn_implementation='sdpa' (or a flash-attention kernel) and set "
            "DeepSpeedSequenceParallelConfig(sp_attn_implementation=...) to the same value."
        )
    if own is not None and wanted != own:
        raise ValueError(
            "Ulysses wraps the attention function the model calls, so it must be the model's; "
            f"got sp_attn_implementation={wanted!r} and a model loaded with {own!r}. Load the "
            f"model with attn_implementation={wanted!r}, or set sp_attn_implementation={own!r}."
        )
    return str(wanted)


def check_batch(batch: Any, sp_size: int, seq_length: int | None) -> None:
    """Check one batch before it is split along the sequence.

    Raises:
        ValueError: when the batch is not a mapping with ``input_ids`` and ``position_ids``,
            or its sequence length is not a multiple of ``sp_size`` (or not the fixed
            ``seq_length``).
    """
    if not isinstance(batch, Mapping) or "input_ids" not in batch or "position_ids" not in batch:
        keys = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
        raise ValueError(
            "Ulysses splits dictionary batches along the sequence and rebuilds causal attention "
            f"from position_ids; got a batch of {keys}. Yield dicts with input_ids, "
            "position_ids (torch.arange(seq_len) per sample) and labels."
        )
    length = int(batch["input_ids"].shape[1])
    if length % sp_size:
        raise ValueError(
            f"Ulysses splits each sequence into sp_size={sp_size} equal parts; got sequence "
            f"length {length}. Pad the batches to a multiple of {sp_size} (labels with "
            f"{IGNORE_INDEX}), e.g. DataCollatorWithPadding(pad_to_multiple_of={sp_size})."
        )
    if seq_length is not None and length != seq_length:
        raise ValueError(
            "DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=False) fixes the "
            f"sequence length to sp_seq_length={seq_length}; got a batch of length {length}. "
            "Pad every batch to that length, or set sp_seq_length_is_variable=True."
        )


def register_attention(
    model: torch.nn.Module, sp_size: int, handler: Any, micro_batch_size: int
) -> Any:
    """Route the attention of ``model`` through Ulysses; return DeepSpeed's groups object for
    ``deepspeed.initialize(mpu=...)``.

    DeepSpeed replaces the attention function in ``transformers``' table for the whole
    process, so one model per process can be registered.

    Raises:
        ValueError: from `check_model`.
        RuntimeError: for a second model in the same process.
    """
    attn = check_model(model, sp_size, handler.sp_attn_implementation)
    if SP_STATE.mpu is not None:
        raise RuntimeError(
            "Ulysses replaces the attention function of transformers for the whole process, "
            "sized for the first model prepared; got a second model to prepare under "
            f"sp_size={sp_size}. Prepare one sequence-parallel model per process (an "
            "evaluation model can share the prepared one)."
        )
    import deepspeed
    import torch.distributed as dist
    from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPAttentionHF

    if not deepspeed.comm.is_initialized():  # DeepSpeed's view of the existing process group
        deepspeed.init_distributed(dist_backend=dist.get_backend())
    SP_STATE.mpu = UlyssesSPAttentionHF.register_with_transformers(
        model_name_or_path=model,
        core_attn_implementation=attn,
        sequence_parallel_size=sp_size,
        micro_batch_size=micro_batch_size,
        seq_length=handler.sp_seq_length,
        seq_length_is_variable=bool(handler.sp_seq_length_is_variable),
    )
    return SP_STATE.mpu


class _CheckedBatches:
    """The prepared loader, with every batch checked before DeepSpeed gathers it."""

    def __init__(self, loader: Any, sp_size: int, seq_length: int | None) -> None:
        self.loader, self.sp_size, self.seq_length = loader, sp_size, seq_length

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            check_batch(batch, self.sp_size, self.seq_length)
            yield batch


@dataclass
class _SplitPosition:
    """Where a sequence-split loader stands inside a group of ``sp_size`` slices."""

    in_group: int = 0
    """Slices of the current group yielded so far (0: at a group boundary)."""
    pending: int = 0
    """Slices of the first group that the next pass drops (a loaded mid-group position)."""


_SIZE_KEY, _OFFSET_KEY = "sequence_parallel_size", "sequence_parallel_offset"
_WORKER_STATE_KEY = "dataloader_state"  # a stateful prepared loader's worker state


class SequenceParallelLoader:
    """A prepared loader whose batches are this process's slice of the sequence.

    Each ``sp_size`` consecutive steps, the group reads one batch on each of its processes and
    every process gets its slice of each of those batches in turn (so ``len`` is ``sp_size``
    times the loader's). Labels become ``shift_labels`` (shifted before the split, ``-100``
    after the last token). Other attributes are the wrapped loader's.

    Its ``state_dict`` is the wrapped loader's position in whole groups (``batches_yielded``
    counts the wrapped loader's batches whose slices were all yielded) plus
    ``sequence_parallel_offset``, the slices of the next group already yielded; a loader that
    loads it re-reads that group and drops those slices, so a run resumed mid-group sees the
    slices of the uninterrupted run.
    """

    def __init__(self, loader: Any, device: torch.device, seq_length: int | None) -> None:
        self.__dict__["base_dataloader"] = loader
        self.device = device
        self.seq_length = seq_length
        self._split = _SplitPosition()
        self._first_drop: int | None = None

    def __len__(self) -> int:
        return len(self.base_dataloader) * SP_STATE.size

    def __iter__(self) -> Iterator[Any]:
        from accel_collectives import send_to_device
        from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPDataLoaderAdapter

        checked = _CheckedBatches(self.base_dataloader, SP_STATE.size, self.seq_length)
        # DeepSpeed gathers sequence lengths on ``device`` (CPU with gloo; CUDA: the GPU of the
        # process, for NCCL) and leaves each slice on the CPU; the slices then go to ``device``.
        adapter = UlyssesSPDataLoaderAdapter(
            checked,
            sp_rank=SP_STATE.rank,
            sp_group=SP_STATE.group,
            sp_world_size=SP_STATE.size,
            device=self.device,
        )
        split = self._split
        drop, split.pending, split.in_group = split.pending, 0, 0
        if self._first_drop is not None:  # from skip_first_batches: replaces a loaded position
            drop, self._first_drop = self._first_drop, None
        for index, batch in enumerate(adapter):
            split.in_group = (index + 1) % SP_STATE.size
            if index >= drop:
                yield send_to_device(batch, self.device)

    def skip_first_batches(self, num_batches: int) -> SequenceParallelLoader:
        """A loader like this one whose next pass starts after ``num_batches`` slices
        (``accel.skip_first_batches`` calls it): the wrapped loader skips the whole groups, and
        the slices already seen of the next group are dropped. It shares this loader's
        position, as a skipped prepared loader does.
        """
        from accel_data import skip_first_batches

        size = SP_STATE.size
        groups, offset = divmod(num_batches, size)
        clone = SequenceParallelLoader(
            skip_first_batches(self.base_dataloader, groups), self.device, self.seq_length
        )
        clone._split, clone._first_drop = self._split, offset
        return clone

    def state_dict(self) -> dict[str, Any]:
        """The position: the wrapped loader's, in whole groups, and the slices yielded of the
        current group.

        Raises:
            ValueError: mid-group, for a stateful wrapped loader (its workers' state is taken
                after the group's batch was read, so it cannot resume inside the group).
        """
        state = dict(self.base_dataloader.state_dict())
        offset = self._split.in_group
        if offset:
            if state.get(_WORKER_STATE_KEY) is not None:
                raise ValueError(
                    "a stateful loader's worker state is taken after each batch it reads, and "
                    f"under Ulysses a batch is yielded in sp_size={SP_STATE.size} slices; got a "
                    f"save after {offset} slice(s) of a group. Save the state after a multiple "
                    f"of {SP_STATE.size} steps, or prepare the loader without "
                    "use_stateful_dataloader (it resumes by position, inside a group too)."
                )
            state["batches_yielded"] = int(state["batches_yielded"]) - 1
        state[_SIZE_KEY], state[_OFFSET_KEY] = SP_STATE.size, offset
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Continue from a position of `state_dict` (or of a loader without sequence
        parallelism, which stands at a group boundary).

        Raises:
            ValueError: for a position saved mid-group with another ``sp_size``.
        """
        size, offset = state_dict.get(_SIZE_KEY, SP_STATE.size), state_dict.get(_OFFSET_KEY, 0)
        if offset and size != SP_STATE.size:
            raise ValueError(
                "a loader position inside a group of slices resumes only with the same "
                f"sp_size; got a position after {offset} of {size} slices and sp_size="
                f"{SP_STATE.size}. Resume with sp_size={size}, or from a checkpoint saved "
                f"after a multiple of {size} steps."
            )
        inner = {k: v for k, v in state_dict.items() if k not in (_SIZE_KEY, _OFFSET_KEY)}
        self.base_dataloader.load_state_dict(inner)
        self._split.in_group, self._split.pending = 0, int(offset)

    def __getattr__(self, name: str) -> Any:
        if "base_dataloader" not in self.__dict__:  # while copying or unpickling
            raise AttributeError(name)
        return getattr(self.__dict__["base_dataloader"], name)


def sequence_parallel_loss(
    loss: torch.Tensor, shift_labels: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Average a loss over every token of the sequence-parallel group.

    Under Ulysses each process computes the mean loss of its slice of the sequence; the slices
    hold different numbers of counted tokens. This returns the mean over the whole sequences
    (the loss of the unsplit model) on every process of the group. Its gradient is this
    process's part only, so DeepSpeed's sum over the group gives the gradient of the unsplit
    model. Without sequence parallelism ``loss`` comes back unchanged.

    Args:
        loss: This process's mean loss over its counted tokens (a scalar).
        shift_labels: The batch's ``shift_labels`` (tokens equal to ``ignore_index`` are not
            counted).
        ignore_index: Label of the tokens left out.

    Returns:
        The mean loss over the counted tokens of the group.
    """
    import torch.distributed as dist

    if SP_STATE.group is None:
        return loss
    count = (shift_labels != ignore_index).sum().to(loss.device, torch.float32)
    # A slice without counted tokens has a NaN mean; it contributes nothing.
    local = torch.where(count > 0, loss.float() * count, torch.zeros_like(count))
    totals = torch.stack([local.detach(), count])
    dist.all_reduce(totals, group=SP_STATE.group)
    mean = (local + (totals[0] - local.detach())) / totals[1].clamp(min=1)
    return mean.to(loss.dtype)
