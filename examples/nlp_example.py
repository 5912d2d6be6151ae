"""Text classification end to end: a character-level Transformer tells which language a word is.

The data is the word lists of the ``wordfreq`` package (the most frequent words of English,
French, German, Spanish and Italian, built from subtitles, Wikipedia, news and other text),
which ship inside the package: nothing is downloaded. Words found in more than one list
("information", "radio") are dropped, so every word has one answer; a fifth of the words
are held out for evaluation. The model reads a word letter by letter: byte embeddings plus
learned positions, a two-layer Transformer encoder, mean pooling over the letters, and a
linear head. Run it with:

    accel launch --num_processes 2 examples/nlp_example.py
    python examples/nlp_example.py --cpu --mixed_precision bf16

Each epoch prints the accuracy on the held-out words; a chance guess is 20%, and the model
passes 70% within a few epochs (a person who reads the five languages does not score far
above that on words out of context: "dire", "gross" and "via" read well in several).
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

LANGUAGES = ("en", "fr", "de", "es", "it")
"""The languages to tell apart, as wordfreq's language codes."""
WORDS_PER_LANGUAGE = 4000
"""How many of each language's most frequent words are read."""
MAX_LENGTH = 16
"""Bytes kept per word (UTF-8); shorter words are padded with 0."""
EVAL_FRACTION = 0.2
"""Share of the words held out for evaluation."""


def read_words() -> tuple[list[str], list[int]]:
    """Each language's most frequent words of at least 3 letters, less those in two lists."""
    try:
        from wordfreq import top_n_list
    except ImportError as error:  # the word lists ship with wordfreq
        raise SystemExit(
            "nlp_example.py reads the word lists bundled with wordfreq, and wordfreq is not "
            "installed; install it with: pip install wordfreq"
        ) from error
    lists = {
        code: {word for word in top_n_list(code, WORDS_PER_LANGUAGE) if word.isalpha()}
        for code in LANGUAGES
    }
    seen: dict[str, int] = {}
    for words in lists.values():
        for word in words:
            seen[word] = seen.get(word, 0) + 1
    words, labels = [], []
    for label, code in enumerate(LANGUAGES):
        for word in sorted(lists[code]):
            if len(word) >= 3 and seen[word] == 1:
                words.append(word)
                labels.append(label)
    return words, labels


def encode(words: list[str]) -> torch.Tensor:
    """Words as rows of UTF-8 byte ids shifted by one (0 pads), ``MAX_LENGTH`` each."""
    ids = torch.zeros(len(words), MAX_LENGTH, dtype=torch.long)
    for row, word in enumerate(words):
        data = word.encode()[:MAX_LENGTH]
        ids[row, : len(data)] = torch.tensor(list(data)) + 1
    return ids


def get_dataloaders(accelerator: Accelerator, batch_size: int) -> tuple[DataLoader, DataLoader]:
    """A shuffled training loader and an evaluation loader over a fixed split of the words.

    The split is drawn from a generator seeded with a constant, so every process holds the
    same split; ``prepare`` then gives each process its share of the batches.
    """
    with accelerator.main_process_first():  # one process reads the word lists first
        words, labels = read_words()
    ids, targets = encode(words), torch.tensor(labels)
    order = torch.randperm(len(words), generator=torch.Generator().manual_seed(0))
    held_out = int(len(words) * EVAL_FRACTION)
    eval_ids, train_ids = order[:held_out], order[held_out:]
    train = TensorDataset(ids[train_ids], targets[train_ids])
    evaluation = TensorDataset(ids[eval_ids], targets[eval_ids])
    return (
        DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=True),
        DataLoader(evaluation, batch_size=2 * batch_size),
    )


class WordLanguageClassifier(nn.Module):
    """Byte embeddings and positions, a Transformer encoder, masked mean pooling, a head."""

    def __init__(
        self, num_labels: int, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(257, hidden_size, padding_idx=0)
        self.position = nn.Parameter(torch.zeros(MAX_LENGTH, hidden_size))
        layer = nn.TransformerEncoderLayer(
            hidden_size,
            num_heads,
            dim_feedforward=2 * hidden_size,
            dropout=0.1,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(hidden_size)
        self.head = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        padding = input_ids == 0
        x = self.encoder(self.embed(input_ids) + self.position, src_key_padding_mask=padding)
        keep = (~padding).unsqueeze(-1).to(x.dtype)
        pooled = (self.norm(x) * keep).sum(dim=1) / keep.sum(dim=1)
        return self.head(pooled)


def training_function(config: dict[str, Any], args: argparse.Namespace) -> float:
    """Train and evaluate; print the accuracy after each epoch and return the last one."""
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr, num_epochs, batch_size = config["lr"], int(config["num_epochs"]), config["batch_size"]
    set_seed(int(config["seed"]))
    train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)

    # The model is built after set_seed, so every process starts from the same weights.
    model = WordLanguageClassifier(num_labels=len(LANGUAGES))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=lr, total_steps=num_epochs * len(train_dataloader), pct_start=0.1
    )
    # prepare() wraps the model for the processes, shards the loaders' batches between them
    # and makes the optimizer and scheduler step with the wrapped model.
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    accuracy = 0.0
    for epoch in range(num_epochs):
        model.train()
        for input_ids, labels in train_dataloader:
            loss = nn.functional.cross_entropy(model(input_ids), labels)
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()

        model.eval()
        correct = total = 0
        for input_ids, labels in eval_dataloader:
            with torch.no_grad():
                predictions = model(input_ids).argmax(dim=-1)
            # Every process's predictions, without the samples repeated to even the last batch.
            predictions, references = accelerator.gather_for_metrics((predictions, labels))
            correct += (predictions == references).sum().item()
            total += references.numel()
        accuracy = correct / total
        accelerator.print(
            f"epoch {epoch}: loss {loss.item():.4f}, accuracy {accuracy:.4f} on {total} words"
        )
    accelerator.end_training()
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Train a character-level Transformer to tell the language of a word."
    )
    parser.add_argument(
        "--mixed_precision",
        type=str,
        default=None,
        choices=["no", "fp16", "bf16", "fp8"],
        help="Mixed precision (default: the launcher's setting).",
    )
    parser.add_argument("--cpu", action="store_true", help="Train on the CPU only.")
    parser.add_argument("--num_epochs", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=64, help="Batch size per process.")
    args = parser.parse_args()
    config = {"lr": 3e-3, "num_epochs": args.num_epochs, "seed": 42, "batch_size": args.batch_size}
    training_function(config, args)


if __name__ == "__main__":
    main()
