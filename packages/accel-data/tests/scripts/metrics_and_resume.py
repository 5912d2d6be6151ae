"""Run on 2 processes: every gather_for_metrics mode over datasets of 1..13 samples, and exact
mid-epoch resume. Prints one line per failure and exits 1 if any."""

from __future__ import annotations

import sys

import torch
from accel_state import GradientState, PartialState
from torch.utils.data import DataLoader, IterableDataset

from accel_data import gather_for_metrics, prepare_data_loader, skip_first_batches

state = PartialState()
rank, world = state.process_index, state.num_processes
assert world == 2, world
failures: list[str] = []


def check(condition: bool, message: str) -> None:
    if not condition:
        failures.append(message)


class Stream(IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def run_epoch(loader, kind: str) -> list[int]:
    out: list[int] = []
    for batch in loader:
        if kind == "tensor":
            out += gather_for_metrics(batch).tolist()
        elif kind == "nest":
            got = gather_for_metrics({"x": batch, "pair": (batch * 2, batch.float())})
            check(torch.equal(got["pair"][0], got["x"] * 2), "nest: rows out of step")
            out += got["x"].tolist()
        else:
            out += gather_for_metrics([f"s{int(i)}" for i in batch], use_gather_object=True)
    if kind == "object":
        return [int(s[1:]) for s in out]
    return out


def expected(n: int, bs: int, split: bool, drop_last: bool) -> list[int]:
    if not drop_last:
        return list(range(n))
    step = bs if split else bs * world
    if split:
        return list(range((n // bs) * bs))
    return list(range((n // bs) // world * step))


# --------------------------------------------------------------- gather_for_metrics
torch.manual_seed(100 + rank)  # the processes' own RNGs differ on purpose
checked = 0
for n in range(1, 14):
    for bs in range(1, 5):
        for split in (False, True):
            if split and bs % world:
                continue
            for drop_last in (False, True):
                cases = [
                    ("map", False, False, "tensor"),
                    ("map", False, True, "tensor"),
                    ("map", True, False, "tensor"),
                    ("map", False, False, "object"),
                    ("map", True, False, "object"),
                    ("map", True, False, "nest"),
                    ("stream", True, False, "tensor"),
                    ("stream", False, False, "tensor"),
                    ("stream", True, False, "object"),
                    ("stream", False, False, "nest"),
                ]
                if drop_last:
                    cases = [c for c in cases if c[3] == "tensor"]
                for data, dispatch, shuffle, kind in cases:
                    dataset = list(range(n)) if data == "map" else Stream(n)
                    loader = DataLoader(
                        dataset, batch_size=bs, shuffle=shuffle, drop_last=drop_last
                    )
                    prepared = prepare_data_loader(
                        loader, split_batches=split, dispatch_batches=dispatch
                    )
                    got = run_epoch(prepared, kind)
                    want = expected(n, bs, split, drop_last)
                    if shuffle and drop_last:
                        ok = len(got) == len(want) and len(set(got)) == len(got)
                    else:
                        ok = (sorted(got) if shuffle else got) == want
                    check(
                        ok,
                        f"n={n} bs={bs} split={split} drop_last={drop_last} data={data} "
                        f"dispatch={dispatch} shuffle={shuffle} kind={kind}: got {got}, want {want}",
                    )
                    check(not GradientState().in_dataloader, "loader still registered")
                    checked += 1

# the documented example: range(9), batch_size 5 -> 9 items on the first (and last) batch
prepared = prepare_data_loader(DataLoader(list(range(9)), batch_size=5))
for batch in prepared:
    check(len(gather_for_metrics(batch)) == 9 or not prepared.end_of_dataloader, "doc example")

# seedable sampler: every rank draws the same order whatever its own initial seed
prepared = prepare_data_loader(
    DataLoader(list(range(10)), batch_size=1, shuffle=True), use_seedable_sampler=True
)
orders = [gather_for_metrics(b).tolist() for b in prepared]
check(sorted(sum(orders, [])) == list(range(10)), f"seedable order {orders}")


# even_batches=False: nothing repeated, nothing lost (a process may get one batch fewer)
for n in (1, 5, 7, 12, 13):
    for bs in (2, 3, 4):
        for split in (False, True):
            if split and bs % world:
                continue
            for dispatch in (False, True):
                prepared = prepare_data_loader(
                    DataLoader(list(range(n)), batch_size=bs),
                    split_batches=split,
                    even_batches=False,
                    dispatch_batches=dispatch,
                )
                mine = [i for b in prepared for i in b.tolist()]
                parts: list = [None] * world
                torch.distributed.all_gather_object(parts, mine)
                union = sorted(i for part in parts for i in part)
                check(
                    union == list(range(n)),
                    f"even_batches=False n={n} bs={bs} split={split} dispatch={dispatch}: {parts}",
                )

# skip_first_batches on a prepared loader keeps drop_last and only affects one pass
prepared = prepare_data_loader(DataLoader(list(range(11)), batch_size=2, drop_last=True))
full = [b.tolist() for b in prepared]
skipped = skip_first_batches(prepared, 1)
check(skipped.drop_last is True and skipped.batch_size == 2, "skip: settings lost")
check([b.tolist() for b in skipped] == full[1:], "skip: wrong batches")
check([b.tolist() for b in prepared] == full, "skip: next pass does not start at the beginning")


# ----------------------------------------------------------------------------- resume
def epochs_of(loader, count: int) -> list[list[list[int]]]:
    return [[b.tolist() for b in loader] for _ in range(count)]


def make(kind: str, seed: int):
    torch.manual_seed(seed + rank)
    if kind == "stream":
        return prepare_data_loader(DataLoader(Stream(23), batch_size=2))
    loader = DataLoader(list(range(23)), batch_size=2, shuffle=True)
    return prepare_data_loader(loader, use_seedable_sampler=(kind == "seedable"))


for kind in ("generator", "seedable", "stream"):
    reference = epochs_of(make(kind, 1), 2)
    for k in (0, 1, 3, len(reference[0]) - 1):
        first = make(kind, 1)
        it = iter(first)
        seen = [next(it).tolist() for _ in range(k)]
        saved = first.state_dict()
        it.close()
        check(seen == reference[0][:k], f"{kind}: first {k} batches differ")
        resumed = make(kind, 999)  # a different RNG: the state alone must decide the order
        resumed.load_state_dict(saved)
        check(kind == "stream" or len(resumed) == len(reference[0]) - k, f"{kind}: len")
        rest = [b.tolist() for b in resumed]
        check(rest == reference[0][k:], f"{kind} k={k}: resumed {rest} != {reference[0][k:]}")
        following = [b.tolist() for b in resumed]
        check(following == reference[1], f"{kind} k={k}: next epoch differs")
        # the reference recipe: load the state, then skip_first_batches with the same count
        again = make(kind, 7)
        again.load_state_dict(saved)
        rest = [b.tolist() for b in skip_first_batches(again, k)]
        check(rest == reference[0][k:], f"{kind} k={k}: load + skip_first_batches skipped twice")
        check([b.tolist() for b in again] == reference[1], f"{kind} k={k}: skip then epoch")

for line in failures[:40]:
    print(f"rank {rank}: FAIL {line}")
print(f"rank {rank}: {checked} gather cases, {len(failures)} failures")
sys.exit(1 if failures else 0)
