"""The built-in sentence pairs of the mocked dataloaders, and the word-level tokenizer that
encodes them: both made here, so the dataloaders need no network and no download."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

_ADJECTIVES = "small quiet old bright careful young tired busy".split()
_NOUNS = "farmer teacher driver painter doctor baker sailor writer".split()
_OBJECTS = "letter garden bridge window report engine song map".split()
_VERBS = {
    "fixed": "repaired",
    "wrote": "penned",
    "saw": "noticed",
    "built": "made",
    "sold": "traded",
}
_PLACES = "today yesterday downtown overnight again".split()

SPLITS = {"train": 32, "validation": 16}
"""Rows of each built-in split."""

Row = dict[str, Any]


def built_in_pairs(split: str) -> list[Row]:
    """Sentence pairs of ``split`` (``"train"`` or ``"validation"``), half paraphrases (label
    1: the same event reworded) and half not (label 0: another event), the same every call.

    Each row is ``{"sentence1": str, "sentence2": str, "label": 0 or 1}``, like the rows of the
    MRPC task (a paraphrase corpus) that the reference library's samples hold.
    """
    rng = np.random.default_rng(0 if split == "train" else 1)
    verbs = list(_VERBS)
    rows = []
    for index in range(SPLITS[split]):
        adjective, noun, thing, place = (
            str(rng.choice(words)) for words in (_ADJECTIVES, _NOUNS, _OBJECTS, _PLACES)
        )
        verb = str(rng.choice(verbs))
        first = f"the {adjective} {noun} {verb} the {thing} {place}"
        if index % 2 == 0:
            second = f"{place} the {thing} was {_VERBS[verb]} by the {adjective} {noun}"
        else:
            other = str(rng.choice([n for n in _NOUNS if n != noun]))
            second = f"the {other} {str(rng.choice([v for v in verbs if v != verb]))} a {thing}"
        rows.append({"sentence1": first, "sentence2": second, "label": 1 - index % 2})
    return rows


def read_pairs(path: str | Path) -> list[Row]:
    """The rows of a CSV file with the columns ``sentence1``, ``sentence2`` and ``label``.

    Raises:
        ValueError: A column is missing.
    """
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    missing = {"sentence1", "sentence2", "label"} - set(rows[0] if rows else {})
    if missing:
        raise ValueError(
            f"mocked dataloaders read sentence pairs from CSV files with the columns sentence1, "
            f"sentence2 and label; {str(path)!r} lacks {sorted(missing)}. Add the columns or "
            "pass another file."
        )
    return rows


def numbered_labels(splits: Mapping[str, list[Row]]) -> None:
    """Replace each row's label by its number, labels numbered in order of first appearance
    in the train split (then in the others)."""
    numbers: dict[Any, int] = {}
    for name in ["train", *[name for name in splits if name != "train"]]:
        for row in splits.get(name, []):
            numbers.setdefault(row["label"], len(numbers))
    for rows in splits.values():
        for row in rows:
            row["label"] = numbers[row["label"]]


class WordTokenizer:
    """A word-level tokenizer over a fixed vocabulary, with the part of the interface of
    transformers' tokenizers that the mocked dataloaders use (``__call__`` and ``pad``).

    Ids: 0 ``[PAD]``, 1 ``[UNK]``, 2 ``[CLS]``, 3 ``[SEP]``, 4 ``<eos>``, then the words in
    sorted order. A pair is encoded as ``[CLS] first [SEP] second [SEP]``.

    Args:
        texts: The texts whose words make the vocabulary.
        pad_token: The token padding uses (``"<eos>"`` for a causal model).
    """

    SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "<eos>")

    def __init__(self, texts: Sequence[str], pad_token: str = "[PAD]") -> None:
        words = sorted({word for text in texts for word in text.split()})
        self.vocab = {token: i for i, token in enumerate([*self.SPECIALS, *words])}
        self.pad_token = pad_token
        self.pad_token_id = self.vocab[pad_token]
        self.vocab_size = len(self.vocab)
        self.model_max_length = 512

    def __len__(self) -> int:
        return self.vocab_size

    def _ids(self, text: str) -> list[int]:
        return [self.vocab.get(word, self.vocab["[UNK]"]) for word in text.split()]

    def __call__(
        self,
        text: Sequence[str],
        text_pair: Sequence[str] | None = None,
        truncation: bool = False,
        max_length: int | None = None,
        return_attention_mask: bool = True,
    ) -> dict[str, list[list[int]]]:
        """Encode a batch of texts (or of pairs), without padding."""
        limit = (max_length or self.model_max_length) if truncation else None
        encoded: dict[str, list[list[int]]] = {"input_ids": []}
        if text_pair is not None:
            encoded["token_type_ids"] = []
        for i, first in enumerate(text):
            ids = self._ids(first)
            types = [0] * len(ids)
            if text_pair is not None:
                cls, sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
                second = self._ids(text_pair[i])
                ids = [cls, *ids, sep, *second, sep]
                types = [0] * (len(ids) - len(second) - 1) + [1] * (len(second) + 1)
            ids, types = ids[:limit], types[:limit]
            encoded["input_ids"].append(ids)
            if text_pair is not None:
                encoded["token_type_ids"].append(types)
        if return_attention_mask:
            encoded["attention_mask"] = [[1] * len(ids) for ids in encoded["input_ids"]]
        return encoded

    def pad(
        self,
        examples: Sequence[Mapping[str, Any]],
        padding: str = "longest",
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        return_tensors: str = "pt",
    ) -> dict[str, torch.Tensor]:
        """Pad encoded examples to one length and stack them into tensors.

        ``padding="longest"`` pads to the longest example, ``"max_length"`` to ``max_length``;
        the length is then rounded up to a multiple of ``pad_to_multiple_of``.
        """
        if return_tensors != "pt":
            raise ValueError(
                f"WordTokenizer.pad returns torch tensors only; got return_tensors="
                f"{return_tensors!r}. Pass return_tensors='pt'."
            )
        longest = max(len(example["input_ids"]) for example in examples)
        length = max_length if padding == "max_length" and max_length else longest
        if pad_to_multiple_of:
            length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
        fill = {"input_ids": self.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
        batch: dict[str, list[list[int]]] = {}
        for example in examples:
            for key, value in example.items():
                if key in fill:
                    batch.setdefault(key, []).append(
                        list(value) + [fill[key]] * (length - len(value))
                    )
                else:
                    batch.setdefault(key, []).append(value)
        return {key: torch.tensor(values) for key, values in batch.items()}


__all__ = ["SPLITS", "WordTokenizer", "built_in_pairs", "numbered_labels", "read_pairs"]
