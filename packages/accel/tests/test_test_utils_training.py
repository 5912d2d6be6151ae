"""accel.test_utils.training: the regression dataset equal to the reference's for one seed, the
regression model trained by an Accelerator, and the offline mocked dataloaders iterated (built-in
pairs, CSV files, a transformers tokenizer) and fed to a model."""

from __future__ import annotations

import csv
import importlib.util

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import accel
from accel.test_utils import RegressionDataset, RegressionModel
from accel.test_utils.training import (
    mocked_dataloaders,
    mocked_dataloaders_for_autoregressive_models,
)

needs_reference = pytest.mark.skipif(
    importlib.util.find_spec("accelerate") is None,
    reason="the reference library is not installed (uv sync --all-packages --group bench)",
)


@needs_reference
@pytest.mark.parametrize(("a", "b", "length", "seed"), [(2, 3, 64, 42), (-1.5, 0.5, 7, 0)])
def test_the_regression_dataset_equals_the_reference_for_one_seed(a, b, length, seed) -> None:
    from accelerate.test_utils.training import RegressionDataset as Reference

    ours, theirs = RegressionDataset(a, b, length, seed), Reference(a, b, length, seed)
    assert len(ours) == len(theirs) == length
    np.testing.assert_array_equal(ours.x, theirs.x)
    np.testing.assert_array_equal(ours.y, theirs.y)
    assert ours.x.dtype == theirs.x.dtype and ours.y.dtype == theirs.y.dtype
    for i in (0, length - 1):
        assert ours[i] == theirs[i]


@needs_reference
def test_the_regression_model_computes_what_the_reference_does() -> None:
    from accelerate.test_utils.training import RegressionModel as Reference

    x = torch.linspace(-2, 2, 9)
    ours, theirs = RegressionModel(a=1.5, b=-0.25), Reference(a=1.5, b=-0.25)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert torch.equal(ours(x), theirs(x))


def test_an_accelerator_trains_the_regression_model_towards_the_data() -> None:
    torch.manual_seed(0)
    accelerator = accel.Accelerator(cpu=True)
    model = RegressionModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(RegressionDataset(a=2, b=3, length=64, seed=1), batch_size=16)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for _ in range(10):
        for batch in loader:
            loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
    unwrapped = accelerator.unwrap_model(model)
    assert abs(unwrapped.a.item() - 2) < 0.1 and abs(unwrapped.b.item() - 3) < 0.1


def test_the_regression_model_prints_dtypes_once_and_can_return_two_outputs(capsys) -> None:
    model = RegressionModel(a=2, b=1, double_output=True)
    first, second = model(torch.ones(3))
    model(torch.ones(3))
    assert torch.equal(first, torch.full((3,), 3.0)) and first is second
    assert capsys.readouterr().out.count("Model dtype: torch.float32") == 1
    with pytest.raises(ValueError, match="needs the input x"):
        model()
    with pytest.raises(ValueError, match="length must be an integer >= 0; got -1"):
        RegressionDataset(length=-1)


def test_mocked_dataloaders_give_padded_sentence_pair_batches() -> None:
    accelerator = accel.Accelerator(cpu=True)
    train, evaluation = mocked_dataloaders(accelerator, batch_size=4)
    assert (len(train.dataset), len(evaluation.dataset)) == (32, 16)
    assert (len(train), len(evaluation)) == (8, 4)
    labels = []
    for batch in evaluation:
        assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
        ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        assert ids.shape == types.shape == mask.shape and ids.shape[0] == 4
        assert ids.dtype == torch.long and int(ids.max()) < 256
        assert (ids[:, 0] == 2).all()  # [CLS]
        assert ((ids == 0) == (mask == 0)).all()  # padding is exactly where the mask is 0
        assert (mask.sum(1) == mask.shape[1]).any()  # padded to the longest pair of the batch
        labels += batch["labels"].tolist()
    assert sorted(set(labels)) == [0, 1] and labels.count(1) == 8
    # Shuffled train loader, fixed evaluation loader.
    torch.manual_seed(0)
    one = [batch["input_ids"].tolist() for batch in train]
    torch.manual_seed(1)
    two = [batch["input_ids"].tolist() for batch in train]
    assert one != two
    assert [b["labels"].tolist() for b in evaluation] == [b["labels"].tolist() for b in evaluation]


def test_mocked_dataloaders_feed_a_model_prepared_by_the_accelerator() -> None:
    torch.manual_seed(0)
    accelerator = accel.Accelerator(cpu=True)
    train, _ = mocked_dataloaders(accelerator, batch_size=8)

    class PairClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.EmbeddingBag(256, 16)
            self.head = torch.nn.Linear(16, 2)

        def forward(self, input_ids, attention_mask, token_type_ids, labels):
            logits = self.head(self.embed(input_ids, per_sample_weights=None))
            return torch.nn.functional.cross_entropy(logits, labels)

    model = PairClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model, optimizer, train = accelerator.prepare(model, optimizer, train)
    losses = []
    for _ in range(5):
        for batch in train:
            loss = model(**batch)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_autoregressive_batches_shift_the_labels_and_ignore_padding() -> None:
    accelerator = accel.Accelerator(cpu=True)
    train, evaluation = mocked_dataloaders_for_autoregressive_models(accelerator, batch_size=4)
    assert (len(train), len(evaluation)) == (8, 4)
    first = [batch["input_ids"].tolist() for batch in train]
    assert first == [batch["input_ids"].tolist() for batch in train]  # not shuffled
    eos = 4
    for batch in train:
        assert set(batch) == {"input_ids", "labels"}
        ids, labels = batch["input_ids"], batch["labels"]
        assert ids.shape == labels.shape
        real = labels != -100
        assert torch.equal(labels[:, :-1][real[:, :-1]], ids[:, 1:][real[:, :-1]])
        assert ((labels == -100) | (labels != eos)).all()
        # padded to the longest sentence of the batch plus one shifted position
        assert (ids != eos).sum(1).max() == ids.shape[1]


def test_autoregressive_batches_are_padded_to_a_multiple_of_8_in_bf16() -> None:
    accelerator = accel.Accelerator(cpu=True, mixed_precision="bf16")
    train, _ = mocked_dataloaders_for_autoregressive_models(accelerator, batch_size=4)
    for batch in train:
        assert (batch["input_ids"].shape[1] + 1) % 8 == 0


def test_mocked_dataloaders_read_csv_files_and_refuse_a_missing_split(tmp_path) -> None:
    rows = [("a cat sat", "a cat was sitting", "equivalent"), ("rain fell", "sun shone", "not")]
    paths = {}
    for split in ("train", "validation"):
        paths[split] = tmp_path / f"{split}.csv"
        with open(paths[split], "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["sentence1", "sentence2", "label"])
            writer.writerows(rows)
    accelerator = accel.Accelerator(cpu=True)
    train, evaluation = mocked_dataloaders(accelerator, batch_size=2, data_files=paths)
    (batch,) = list(evaluation)
    assert batch["labels"].tolist() == [0, 1]  # numbered in order of first appearance
    with pytest.raises(ValueError, match="missing \\['validation'\\]"):
        mocked_dataloaders(accelerator, data_files={"train": paths["train"]})
    with pytest.raises(ValueError, match="batch_size must be a positive integer; got 0"):
        mocked_dataloaders(accelerator, batch_size=0)
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nx,1\n")
    with pytest.raises(ValueError, match="lacks \\['sentence1', 'sentence2'\\]"):
        mocked_dataloaders(accelerator, data_files={"train": bad, "validation": bad})


def test_a_transformers_tokenizer_gives_the_batches_of_the_built_in_one() -> None:
    """A real transformers tokenizer over the built-in tokenizer's vocabulary (same ids, same
    pair template) yields the same evaluation batches: the built-in one behaves as a
    transformers tokenizer does."""
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (uv sync --group ecosystem)"
    )
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    from accel._test_helpers._sentences import WordTokenizer, built_in_pairs

    texts = [
        row[key]
        for split in ("train", "validation")
        for row in built_in_pairs(split)
        for key in ("sentence1", "sentence2")
    ]
    ours = WordTokenizer(texts)
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(ours.vocab, unk_token="[UNK]"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    core.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    theirs = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="[PAD]",
        unk_token="[UNK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
    accelerator = accel.Accelerator(cpu=True)
    _, built_in = mocked_dataloaders(accelerator, batch_size=4)
    _, given = mocked_dataloaders(accelerator, batch_size=4, tokenizer=theirs)
    for mine, other in zip(built_in, given, strict=True):
        assert mine.keys() == other.keys()
        for key in mine:
            assert torch.equal(mine[key], other[key]), key
