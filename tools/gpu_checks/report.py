"""Writes the results page of a GPU check (``benchmarks/results/gpu.md`` once committed).

Reads what ``tools/gpu_check.sh`` left in its output folder: ``steps.tsv`` (each step, its exit
status and seconds), ``deps.json``, ``junit.xml``, ``bench.json`` and the clients' paths (``clients-*.json``).

With ``--large``, the second call's page instead, ``gpu-large.md``, from ``large.json``.

Usage: python tools/gpu_checks/report.py OUT_DIR [--dry-run] [--large]
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def _gb(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _device() -> list[str]:
    import torch

    lines = [
        f"- torch {torch.__version__}, CUDA {torch.version.cuda}, Python {platform.python_version()}"
    ]
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        lines.append(
            f"- device: {props.name}, {props.total_memory / 2**30:.0f} GiB, capability {props.major}.{props.minor}"
        )
        try:
            smi = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            lines.append(f"- driver: {smi.stdout.strip() or smi.stderr.strip()}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines.append(f"- driver: unknown ({exc})")
    else:
        lines.append(
            "- device: none (CPU dry run: every CUDA check skipped, figures from tiny CPU runs)"
        )
    return lines


def _tests(junit: Path) -> list[str]:
    if not junit.is_file():
        return ["No test report (the test step did not finish)."]
    rows = ["| test | outcome | seconds |", "| --- | --- | --- |"]
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                message = (found.get("message") or "").replace("|", "/").splitlines()
                outcome = f"{kind}: {message[0][:140] if message else ''}"
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        rows.append(f"| {name} | {outcome} | {float(case.get('time', 0)):.1f} |")
    return rows


def _figure(f: dict[str, Any], key: str, fmt: str = "{:.3f} s") -> str:
    if "error" in f or "skipped" in f:
        return f.get("error") or f"skipped: {f['skipped']}"
    value = f.get(key)
    return "-" if value is None else fmt.format(value)


def _bench(bench: Path) -> list[str]:
    if not bench.is_file():
        return ["No benchmark results (the benchmark step did not finish)."]
    data = json.loads(bench.read_text(encoding="utf-8"))
    s, parts = data["settings"], data["parts"]
    size = s.get("checkpoint_bytes", 0)
    load, off, train = parts.get("load", {}), parts.get("offload", {}), parts.get("train", {})
    floor = load.get("floor", {})
    reads = parts.get("floors", {}).get("floor", {})
    rows = _floors(reads)
    # The load's floor: the read from the page cache with accel's threads and the page-locked
    # copy overlap, so the larger of the two.
    read = reads.get(f"page_cache_read_{reads.get('threads')}_seconds")
    copy = floor.get("pinned_seconds", floor.get("pageable_seconds"))
    load_floor = max(read, copy) if read is not None and copy is not None else None
    rows += [f"### Load of a {size / 1e9:.2f} GB bf16 checkpoint onto {s['device']}", ""]
    rows += [
        "| side | seconds | GB/s | x floor | peak device memory |",
        "| --- | --- | --- | --- | --- |",
    ]
    for side, label in (
        ("accel", "accel"),
        ("accel_more_threads", f"accel, {2 * reads.get('threads', 4)} reader threads"),
        ("reference", "reference"),
    ):
        f = load.get(side, {})
        if not f:
            continue
        rate = f"{size / f['seconds'] / 1e9:.2f}" if "seconds" in f else "-"
        rows.append(
            f"| {label} | {_figure(f, 'seconds')} | {rate} | {_ratio(f.get('seconds'), load_floor)} "
            f"| {_gb(f.get('peak_bytes'))} |"
        )
    for kind in ("pinned", "pageable"):
        if f"{kind}_seconds" in floor:
            t = floor[f"{kind}_seconds"]
            rows.append(
                f"| one {kind} host-to-device copy | {t:.3f} | {size / t / 1e9:.2f} | "
                f"{_ratio(t, load_floor)} | - |"
            )
    if read is not None:
        rows.append(
            f"| read from the page cache, {reads['threads']} threads | {read:.3f} | "
            f"{size / read / 1e9:.2f} | {_ratio(read, load_floor)} | - |"
        )
    if load_floor is not None:
        rows.append(
            f"| **floor**: the larger of the two above | {load_floor:.3f} | - | 1.00x | - |"
        )
    rows += [
        "",
        f"### Offloaded forward ({s['batch']}x{s['tokens']} tokens; a third of the layers each on the device, the CPU, the disk)",
        "",
    ]
    rows += [
        "| side | load | first forward | warm forward | x floor (warm) | peak device memory |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    f = off.get("floor", {})
    bound = None
    if "compute_seconds" in f:
        # The full floor: the disk third read from the page cache (at the measured rate of
        # accel's thread count), the copy of everything offloaded, the compute; they overlap.
        disk_read = None
        if read is not None and "disk_bytes" in f:
            disk_read = f["disk_bytes"] / (reads["checkpoint_bytes"] / read)
        bound = max(f["compute_seconds"], f["transfer_seconds"], disk_read or 0.0)
    for side, label in (
        ("accel", "accel"),
        ("accel_pinned", "accel, CPU third page-locked"),
        ("reference", "reference"),
    ):
        f_side = off.get(side, {})
        extra = ""
        if "pinned_bytes" in f_side:
            extra = (
                f" ({_gb(f_side['pinned_bytes'])} page-locked for "
                f"{_gb(f_side['pinned_weight_bytes'])} of weights, in {f_side['pin_seconds']:.2f} s)"
            )
        rows.append(
            f"| {label}{extra} | {_figure(f_side, 'load_seconds')} | {_figure(f_side, 'first_seconds')} | "
            f"{_figure(f_side, 'warm_seconds')} | {_ratio(f_side.get('warm_seconds'), bound)} | "
            f"{_gb(f_side.get('peak_bytes'))} |"
        )
    if bound is not None:
        parts_text = [
            f"copy of {f['offloaded_bytes'] / 1e9:.2f} GB = {f['transfer_seconds']:.3f} s",
            f"whole-model forward = {f['compute_seconds']:.3f} s",
        ]
        if read is not None and "disk_bytes" in f:
            parts_text.append(
                f"read of the disk third ({f['disk_bytes'] / 1e9:.2f} GB) from the page cache = "
                f"{f['disk_bytes'] / (reads['checkpoint_bytes'] / read):.3f} s"
            )
        rows.append(
            f"| **floor**: max({', '.join(parts_text)}) | - | - | {bound:.3f} s | 1.00x | - |"
        )
    else:
        rows.append(f"| floor | {_figure(f, 'compute_seconds')} | - | - | - | - |")
    rows += ["", f"### bf16 training step (AdamW, {s['batch']}x{s['tokens']} tokens)", ""]
    rows += [
        "| side | step | tokens/s | loss first -> last | peak device memory |",
        "| --- | --- | --- | --- | --- |",
    ]
    for side, label in (
        ("accel", "accel"),
        ("reference", "reference"),
        ("floor", "floor: plain torch autocast loop"),
    ):
        f = train.get(side, {})
        loss = f"{f['first_loss']:.3f} -> {f['last_loss']:.3f}" if "last_loss" in f else "-"
        rows.append(
            f"| {label} | {_figure(f, 'step_seconds')} | {_figure(f, 'tokens_per_second', '{:.0f}')} | "
            f"{loss} | {_gb(f.get('peak_bytes'))} |"
        )
    return rows


def _ratio(value: float | None, floor: float | None) -> str:
    return "-" if value is None or not floor else f"{value / floor:.2f}x"


def _floors(reads: dict[str, Any]) -> list[str]:
    """The read floors: the checkpoint from the page cache by 1, accel's and twice accel's
    threads, and from the disk."""
    if not reads or "error" in reads or "skipped" in reads:
        text = reads.get("error") or reads.get("skipped") or "not measured"
        return ["### Read floors", "", f"Not measured: {text}.", ""]
    size = reads["checkpoint_bytes"]
    where = "page-locked" if reads.get("pinned") else "pageable"
    rows = [
        "### Read floors",
        "",
        f"The checkpoint ({size / 1e9:.2f} GB) read into {where} 16 MiB buffers, two per thread, "
        "as accel's loader reads (best of 2 after a warm-up pass; the device copy left out).",
        "",
        "| read | seconds | GB/s |",
        "| --- | --- | --- |",
    ]
    threads = sorted(
        int(k.split("_")[3])
        for k in reads
        if k.startswith("page_cache_read_") and k.endswith("_seconds")
    )
    for n in threads:
        t = reads[f"page_cache_read_{n}_seconds"]
        mark = " (accel's)" if n == reads["threads"] else ""
        rows.append(
            f"| page cache, {n} thread{'s' if n > 1 else ''}{mark} | {t:.3f} | {size / t / 1e9:.2f} |"
        )
    t = reads.get("disk_read_seconds")
    if t is not None:
        rows.append(
            f"| disk after an eviction, {reads['threads']} threads | {t:.3f} | {size / t / 1e9:.2f} |"
        )
    return rows + [""]


def _cell(f: dict[str, Any]) -> str:
    if "error" in f or "skipped" in f:
        return (f.get("error") or f"skipped: {f['skipped']}").replace("|", "/")[:160]
    text = f"{f['seconds']:.2f} s"
    if "losses" in f and f["losses"]:
        text += f", loss {f['losses'][0]:.4f} -> {f['losses'][-1]:.4f}"
    if "device_map" in f:
        text += ", on " + ", ".join(sorted(set(f["device_map"].values())))
    return text


def _clients(out: Path) -> list[str]:
    """The clients' paths (tests/gpu/test_client_paths.py), accel beside the reference."""
    rows: list[str] = []
    for found in sorted(out.glob("clients-*.json")):
        data = json.loads(found.read_text(encoding="utf-8"))
        versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items())
        rows += [f"### On {data['device']} ({versions} on the reference side)", ""]
        rows += ["| path | accel | reference | same result |", "| --- | --- | --- | --- |"]
        for row in data["rows"]:
            mine, theirs = row["accel"], row["reference"]
            same = all(mine.get(k) == theirs.get(k) for k in ("device_map", "logits", "losses"))
            ran = not any(k in f for f in (mine, theirs) for k in ("error", "skipped"))
            verdict = ("yes" if same else "within tolerance") if ran else "-"
            rows.append(f"| {row['path']} | {_cell(mine)} | {_cell(theirs)} | {verdict} |")
        rows.append("")
    return rows or ["No client-path results (the test step did not reach them)."]


def _large(found: Path) -> list[str]:
    """The second call's sections: the 7B-class model served, FP8 training."""
    if not found.is_file():
        return ["No results (the large benchmarks did not finish)."]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bench_fp8
    import _bench_llm

    data = json.loads(found.read_text(encoding="utf-8"))
    lines: list[str] = []
    for name, module in (("llm", _bench_llm), ("fp8", _bench_fp8)):
        if name in data:
            lines += [*module.markdown(data[name]), ""]
    return lines


def main() -> None:
    out = Path(sys.argv[1])
    dry = "--dry-run" in sys.argv
    large = "--large" in sys.argv
    lines = ["# GPU check" + (": the large benchmarks (second call)" if large else ""), ""]
    if dry:
        lines += [
            "A dry run on the CPU: it shows that the check still runs; its figures are not GPU figures.",
            "",
        ]
    lines += _device() + ["", "## Steps", "", "| step | status | seconds |", "| --- | --- | --- |"]
    steps = out / "steps.tsv"
    for line in steps.read_text(encoding="utf-8").splitlines() if steps.is_file() else []:
        name, status, seconds = line.split("\t")
        lines.append(f"| {name} | {status} | {seconds} |")
    deps = out / "deps.json"
    if deps.is_file():
        lines += [
            "",
            "## Dependencies",
            "",
            "| distribution | version | state | role |",
            "| --- | --- | --- | --- |",
        ]
        for row in json.loads(deps.read_text(encoding="utf-8")):
            state = "ok" if row["error"] is None else f"missing: {row['error']}"
            lines.append(f"| {row['name']} | {row['version'] or '-'} | {state} | {row['role']} |")
    if large:
        lines += ["", "## Benchmarks", "", *_large(out / "large.json")]
        (out / "gpu-large.md").write_text("\n".join(lines), encoding="utf-8")
        print(f"report: {out / 'gpu-large.md'}")
        return
    lines += ["", "## Tests (marked `cuda`, and tests/gpu)", "", *_tests(out / "junit.xml")]
    lines += ["", "## The clients' paths, accel beside the reference", "", *_clients(out)]
    lines += ["", "## Benchmarks", "", *_bench(out / "bench.json"), ""]
    (out / "gpu.md").write_text("\n".join(lines), encoding="utf-8")
    print(f"report: {out / 'gpu.md'}")


if __name__ == "__main__":
    main()
