"""``mocked_dataloaders`` and ``mocked_dataloaders_for_autoregressive_models``: small train and
evaluation dataloaders of sentence pairs for testing training scripts, built offline.

The reference library's versions read two CSV files of its source tree and download a tokenizer
from the Hugging Face Hub; these use built-in sentence pairs and a word-level tokenizer made
from them unless given a tokenizer (any transformers tokenizer) or CSV files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from accel_state import DistributedType
from torch.utils.data import DataLoader

from ._sentences import WordTokenizer, built_in_pairs, numbered_labels, read_pairs

_XLA_LENGTH = 128  # on TPUs every batch gets one length, so the graph compiles once


def _splits(data_files: Mapping[str, str | Path] | None) -> dict[str, list[dict[str, Any]]]:
    if data_files is None:
        return {name: built_in_pairs(name) for name in ("train", "validation")}
    missing = {"train", "validation"} - set(data_files)
    if missing:
        raise ValueError(
            "mocked dataloaders need a 'train' and a 'validation' file; got data_files with "
            f"the keys {sorted(data_files)}, missing {sorted(missing)}. Pass "
            "data_files={'train': 'train.csv', 'validation': 'dev.csv'}."
        )
    splits = {name: read_pairs(data_files[name]) for name in ("train", "validation")}
    numbered_labels(splits)
    return splits


def _as_dataset(rows: list[dict[str, Any]]) -> Any:
    """A list of samples is a map-style dataset (``len`` and indexing)."""
    return rows


def _check_batch_size(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"mocked dataloaders: batch_size must be a positive integer; got {batch_size!r}. "
            "Pass e.g. batch_size=2."
        )
    return batch_size


def mocked_dataloaders(
    accelerator: Any,
    batch_size: int = 16,
    *,
    tokenizer: Any = None,
    data_files: Mapping[str, str | Path] | None = None,
) -> tuple[DataLoader[Any], DataLoader[Any]]:
    """Train and evaluation dataloaders of a sentence-pair classification task (paraphrase
    or not), for testing a training script of a sequence-classification model offline.

    Each batch is a dict of tensors: ``input_ids``, ``token_type_ids``, ``attention_mask``
    (``[batch, length]``, padded to the longest pair of the batch, or to 128 under XLA) and
    ``labels`` (``[batch]``, 0 or 1). The train loader shuffles; the evaluation loader does not.

    Args:
        accelerator: The ``Accelerator`` of the script (its distributed type picks the padding).
        batch_size: Samples per batch of both loaders.
        tokenizer: A transformers tokenizer to encode the pairs with; default a word-level
            tokenizer over the built-in pairs (every id below 256).
        data_files: ``{"train": path, "validation": path}`` of CSV files with the columns
            ``sentence1``, ``sentence2`` and ``label`` (the reference library's
            ``tests/test_samples/MRPC`` files have them); default the built-in pairs (32 train,
            16 evaluation).

    Returns:
        ``(train_dataloader, eval_dataloader)``, ready for ``accelerator.prepare``.

    Raises:
        ValueError: ``batch_size`` is not a positive integer, or ``data_files`` lacks a split
            or a column.
    """
    batch_size = _check_batch_size(batch_size)
    splits = _splits(data_files)
    if tokenizer is None:
        texts = [
            row[key]
            for rows in splits.values()
            for row in rows
            for key in ("sentence1", "sentence2")
        ]
        tokenizer = WordTokenizer(texts)

    def encode(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        encoded = tokenizer(
            [row["sentence1"] for row in rows], [row["sentence2"] for row in rows], truncation=True
        )
        return [
            {**{key: values[i] for key, values in encoded.items()}, "labels": int(row["label"])}
            for i, row in enumerate(rows)
        ]

    def collate(examples: list[dict[str, Any]]) -> Any:
        if accelerator.distributed_type == DistributedType.XLA:
            return tokenizer.pad(
                examples, padding="max_length", max_length=_XLA_LENGTH, return_tensors="pt"
            )
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    train: DataLoader[Any] = DataLoader(
        _as_dataset(encode(splits["train"])),
        shuffle=True,
        collate_fn=collate,
        batch_size=batch_size,
    )
    evaluation: DataLoader[Any] = DataLoader(
        _as_dataset(encode(splits["validation"])),
        shuffle=False,
        collate_fn=collate,
        batch_size=batch_size,
    )
    return train, evaluation


def mocked_dataloaders_for_autoregressive_models(
    accelerator: Any,
    batch_size: int = 16,
    *,
    tokenizer: Any = None,
    data_files: Mapping[str, str | Path] | None = None,
) -> tuple[DataLoader[Any], DataLoader[Any]]:
    """Train and evaluation dataloaders of next-token prediction on single sentences, for
    testing a training script of a causal language model offline.

    Each batch is a dict of ``input_ids`` and ``labels`` (``[batch, length]``): ``labels`` is
    ``input_ids`` shifted by one token, with padding positions set to -100 (ignored by the
    loss). The length is that of the longest sentence of the batch (128 under XLA), rounded up
    to a multiple of 8 in fp16/bf16 and of 16 in fp8 mixed precision. Neither loader shuffles.

    Args:
        accelerator: The ``Accelerator`` of the script (its distributed type and mixed
            precision pick the padding). Tokenization runs on the main process first.
        batch_size: Samples per batch of both loaders.
        tokenizer: A transformers tokenizer (its end-of-sequence token pads when it has no pad
            token); default a word-level tokenizer over the built-in sentences, padding with
            its ``<eos>`` token (every id below 256).
        data_files: ``{"train": path, "validation": path}`` of CSV files with the columns
            ``sentence1``, ``sentence2`` and ``label`` (``sentence1`` is used); default the
            built-in sentences.

    Returns:
        ``(train_dataloader, eval_dataloader)``, ready for ``accelerator.prepare``.

    Raises:
        ValueError: ``batch_size`` is not a positive integer, or ``data_files`` lacks a split
            or a column.
    """
    batch_size = _check_batch_size(batch_size)
    splits = _splits(data_files)
    if tokenizer is None:
        texts = [row["sentence1"] for rows in splits.values() for row in rows]
        tokenizer = WordTokenizer(texts, pad_token="<eos>")
    elif getattr(tokenizer, "pad_token", None) is None:
        tokenizer.pad_token = tokenizer.eos_token

    def encode(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        encoded = tokenizer(
            [row["sentence1"] for row in rows], truncation=True, return_attention_mask=False
        )
        return [{"input_ids": ids} for ids in encoded["input_ids"]]

    with accelerator.main_process_first():
        train_rows, eval_rows = encode(splits["train"]), encode(splits["validation"])

    def collate(examples: list[dict[str, Any]]) -> Any:
        if accelerator.distributed_type == DistributedType.XLA:
            length = _XLA_LENGTH
        else:
            length = max(len(example["input_ids"]) for example in examples)
        multiple = {"fp8": 16, "no": None}.get(str(accelerator.mixed_precision), 8)
        batch = tokenizer.pad(
            examples,
            padding="max_length",
            max_length=length + 1,
            pad_to_multiple_of=multiple,
            return_tensors="pt",
        )
        ids = batch["input_ids"]
        labels = ids[:, 1:]
        batch["labels"] = torch.where(labels == tokenizer.pad_token_id, -100, labels)
        batch["input_ids"] = ids[:, :-1]
        if "attention_mask" in batch:
            batch["attention_mask"] = batch["attention_mask"][:, :-1]
        return batch

    train: DataLoader[Any] = DataLoader(
        _as_dataset(train_rows), shuffle=False, collate_fn=collate, batch_size=batch_size
    )
    evaluation: DataLoader[Any] = DataLoader(
        _as_dataset(eval_rows), shuffle=False, collate_fn=collate, batch_size=batch_size
    )
    return train, evaluation


__all__ = ["mocked_dataloaders", "mocked_dataloaders_for_autoregressive_models"]
