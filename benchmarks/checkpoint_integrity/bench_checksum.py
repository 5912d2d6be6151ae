"""Cost of the per-file CRC-32 checksums of save_state / load_state on a ~1 GB model.

Model: 16 fp32 Linear(4096, 4096) layers (1.07 GB), SGD, 1 process on CPU. Each operation runs
in a fresh subprocess (``OMP_NUM_THREADS=1``), modes alternating, ``BENCH_REPEATS`` times
(default 3); medians are reported. Modes:

- ``save``: ``save_state`` as shipped (checksums computed at commit, from the page cache);
- ``save_no_checksum``: the same with the checksum function replaced by a constant (what the
  save would cost without checksums);
- ``load``: ``load_state()`` (checksums verified in phase 1, then the weights loaded);
- ``load_no_verify``: ``load_state(verify_checksums=False)``;
- ``save_sha256`` / ``save_blake2b``: ``save_state(checksum=...)``, a cryptographic hash of
  every file instead of CRC-32 (one thread per file: such hashes cannot be split);
- ``load_sha256`` / ``load_blake2b``: ``load_state(expected_digest=...)`` of those checkpoints
  (the manifest's pinned digest, then every file's hash);
- ``cat``: ``cat`` of every checkpoint file to /dev/null (the cost of reading the bytes once:
  the floor of a load);
- ``reference_save`` / ``reference_load``: the reference library's ``save_state`` and
  ``load_state`` of the same model (it has no checksums: its users load with no verification;
  it calls no ``fsync``: its save ends once the bytes reach the page cache);
- ``floor_save``: the least work that writes the same state durably, with no library (the
  weights in one safetensors file, the optimizer state by ``torch.save``, each fsync'ed); it
  runs in the reference's save process, after that save.

All reads are from a warm page cache (the machine is shared: caches are not dropped).
Prints a Markdown table and one JSON object; ``--out PAGE`` also writes the table into its own
section of that page (``benchmarks/results/checkpoint_integrity.md``), keeping the rest.

Run: uv run --no-sync python benchmarks/checkpoint_integrity/bench_checksum.py
(``--layers``, ``--width``, ``--repeats`` change the sizes; the environment variables
``BENCH_LAYERS``, ``BENCH_WIDTH``, ``BENCH_REPEATS`` still work and pass them to the workers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYERS = int(os.environ.get("BENCH_LAYERS", "16"))
WIDTH = int(os.environ.get("BENCH_WIDTH", "4096"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
ROWS = {
    "save": "save",
    "save_no_checksum": "save_no_checksum",
    "reference_save": "accelerate `save_state` (it writes no checksums and calls no fsync)",
    "floor_save": "floor: hand-written safetensors + torch.save, fsync",
    "save_sha256": "save, `checksum='sha256'`",
    "save_blake2b": "save, `checksum='blake2b'`",
    "load": "load",
    "load_sha256": "load, SHA-256 verified, pinned digest",
    "load_blake2b": "load, BLAKE2b verified, pinned digest",
    "load_no_verify": "load_no_verify",
    "reference_load": "accelerate `load_state` (it verifies nothing)",
    "cat": "floor: cat",
}
"""Mode -> row label (accel's rows keep their mode names)."""
STRONG = ("sha256", "blake2b")
"""The cryptographic checksums ``save_state(checksum=...)`` offers besides CRC-32."""
FLOORS = {"save": "floor_save", "load": "cat"}
"""Which floor each operation's row is divided by (by the mode's first word)."""


def _build(seed: int):
    from accel import Accelerator

    accelerator = Accelerator(cpu=True)
    return accelerator, accelerator.prepare(*_plain(seed))[0]


def _reference(seed: int):
    from _checkpoint_sides import reference_accelerator

    accelerator = reference_accelerator()
    return accelerator, accelerator.prepare(*_plain(seed))[0]


def _plain(seed: int):
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        model = torch.nn.Sequential(
            *[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)]
        )
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def worker(mode: str, folder: str) -> dict[str, float]:
    if mode == "save_no_checksum":
        import accel._training_checkpoints.files._folders as dirs

        dirs.file_checksum = lambda path, algorithm="crc32": "crc32:00000000"  # type: ignore[assignment]
    if mode.startswith("reference"):
        accelerator, model = _reference(seed=0 if mode.endswith("save") else 1)
    else:
        accelerator, model = _build(seed=0 if mode.startswith("save") else 1)
    start = time.perf_counter()
    strong = mode.split("_")[-1] if mode.endswith(STRONG) else None
    if mode.endswith("save") or mode == "save_no_checksum" or mode.startswith("save_"):
        accelerator.save_state(folder, **({"checksum": strong} if strong else {}))
    elif mode == "reference_load":
        accelerator.load_state(folder)
    elif strong:
        from accel.utils import checkpoint_digest

        accelerator.load_state(folder, expected_digest=checkpoint_digest(folder))
    else:
        accelerator.load_state(folder, verify_checksums=mode == "load")
    result = {"seconds": time.perf_counter() - start, "probe": float(model[0].weight[0, :8].sum())}
    if mode == "reference_save":  # the floor next, in this process: one interpreter start fewer
        from _checkpoint_sides import floor_save

        plain, optimizer = _plain(seed=0)
        start = time.perf_counter()
        floor_save(plain.state_dict(), optimizer.state_dict(), folder + "_floor")
        result["floor_seconds"] = time.perf_counter() - start
    return result


def _files(folder: str) -> list[str]:
    return [os.path.join(folder, f) for f in sorted(os.listdir(folder))]


def run(mode: str, folder: str) -> dict[str, float]:
    if mode == "cat":
        start = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run(["cat", *_files(folder)], stdout=sink, check=True, timeout=900)
        return {"seconds": time.perf_counter() - start}
    from _workers import run_worker_process  # benchmarks/_workers.py

    done = run_worker_process(
        __file__, "--worker", mode, folder, env={"OMP_NUM_THREADS": "1"}, timeout=900
    )
    return done.require(mode)


def _measure(root: str, results: dict[str, list[float]], sizes: dict[str, int]) -> None:
    """One repeat of every mode: each side saves, then loads what it saved."""
    for save_mode, load_modes in (
        ("save", ("load", "load_no_verify", "cat")),
        ("save_no_checksum", ()),
        ("save_sha256", ("load_sha256",)),
        ("save_blake2b", ("load_blake2b",)),
        ("reference_save", ("reference_load",)),
    ):
        folder = os.path.join(root, save_mode)
        saved = run(save_mode, folder)
        results[save_mode].append(saved["seconds"])
        if "floor_seconds" in saved:
            results["floor_save"].append(saved["floor_seconds"])
            sizes["floor_save"] = sum(os.path.getsize(p) for p in _files(folder + "_floor"))
            shutil.rmtree(folder + "_floor")
        for mode in load_modes:
            loaded = run(mode, folder)
            if "probe" in loaded and loaded["probe"] != saved["probe"]:
                raise RuntimeError(f"{mode}: the loaded weights are not the saved ones")
            results[mode].append(loaded["seconds"])
        size = sum(os.path.getsize(p) for p in _files(folder))
        for mode in (save_mode, *load_modes):
            sizes[mode] = size
        shutil.rmtree(folder)


def main(out: str | None = None) -> None:
    results: dict[str, list[float]] = {mode: [] for mode in ROWS}
    sizes: dict[str, int] = {}
    root = tempfile.mkdtemp(prefix="bench_crc_")
    try:
        for _ in range(REPEATS):
            _measure(root, results, sizes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {mode: statistics.median(values) for mode, values in results.items()}
    size = sizes["save"]
    lines = [
        f"checkpoint: {size / 1e9:.2f} GB ({LAYERS} x Linear({WIDTH}, {WIDTH})), {REPEATS} "
        "repeats, medians; each side reads what it wrote (GB/s: of that side's files)",
        "",
        "| operation | seconds | GB/s | × floor |",
        "| --- | --- | --- | --- |",
    ]
    for mode, label in ROWS.items():
        floor = medians[FLOORS["load" if "load" in mode or mode == "cat" else "save"]]
        lines.append(
            f"| {label} | {medians[mode]:.2f} | {sizes[mode] / 1e9 / medians[mode]:.2f} "
            f"| {medians[mode] / floor:.2f} |"
        )
    print("\n".join(lines))
    print(json.dumps({"size_gb": size / 1e9, "repeats": REPEATS, "runs": results}))
    if out is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _machine import write_section  # benchmarks/_machine.py

        body = "\n".join(["## Latest run of `bench_checksum.py`", "", *lines])
        write_section(out, "bench_checksum", "Checkpoint integrity", body)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "FOLDER"))
    parser.add_argument("--layers", type=int, default=LAYERS, help="Linear layers of the model")
    parser.add_argument("--width", type=int, default=WIDTH, help="width of each layer")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each mode")
    parser.add_argument("--out", default=None, help="page to write the table into")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _machine import share_sizes  # benchmarks/_machine.py

    share_sizes(
        globals(),
        BENCH_LAYERS=("LAYERS", args.layers),
        BENCH_WIDTH=("WIDTH", args.width),
        BENCH_REPEATS=("REPEATS", args.repeats),
    )
    if args.worker:
        print(json.dumps(worker(*args.worker)))
    else:
        main(args.out)
