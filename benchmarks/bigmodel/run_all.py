"""Runs every big-model benchmark and writes benchmarks/results/bigmodel.md.

Run: uv run --group bench python benchmarks/bigmodel/run_all.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "..", "results", "bigmodel.md")


def run(script: str) -> dict:
    output = subprocess.run(
        [sys.executable, os.path.join(HERE, script)], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(output)


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "n/a"
    return f"{a / b:.2f}x"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    with open("/proc/meminfo") as handle:
        mem = int(handle.readline().split()[1]) * 1024
    load = os.getloadavg()[0]
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), {gib(mem)} RAM, "
        f"no GPU; load average {load:.1f} at start (the machine is shared: timings are noisy)"
    )


def versions() -> str:
    names = ["accel-bigmodel", "accelerate", "torch", "safetensors"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (absent)")
    return ", ".join(found) + f", Python {platform.python_version()}"


def main() -> None:
    started = time.perf_counter()
    header = machine()
    load = run("bench_load.py")
    device_map = run("bench_device_map.py")
    init = run("bench_init_empty.py")
    elapsed = time.perf_counter() - started
    load_at_end = os.getloadavg()[0]
    runs = load["runs"]
    cat = load["cat_seconds"]
    lines = [
        "# accel-bigmodel benchmarks",
        "",
        f"- Machine: {header}",
        f"- Versions: {versions()}",
        f"- Whole run: {elapsed:.0f} s (`uv run --group bench python benchmarks/bigmodel/run_all.py`); "
        f"load average {load_at_end:.1f} at the end",
        "",
        "## 1. `load_checkpoint_and_dispatch` of a sharded safetensors checkpoint (warm page cache)",
        "",
        f"Checkpoint: {gib(load['checkpoint_bytes'])} float32 in 4 shards (8-layer Llama-like plain "
        f'`nn.Module`), loaded into an `init_empty_weights` skeleton with `device_map="auto"`. '
        f"`cat` of the shards to /dev/null: {cat:.2f} s. Each row is a fresh subprocess; RSS "
        f"growth = peak RSS minus RSS of the empty skeleton. Forwards of 8 tokens with one "
        f"intra-op thread; warm forward = best of the 4 after the first.",
        "",
        "| run | load (s) | load / cat | peak RSS growth | first forward (s) | warm forward (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    labels = {
        "accel/ram": "accel-bigmodel, all in RAM (memory-mapped, default)",
        "accelerate/ram": "accelerate, all in RAM",
        "accel/ramcopy": "accel-bigmodel, all in RAM, `mmap=False` (private copy)",
        "accel/disk": "accel-bigmodel, half of the layers on disk",
        "accelerate/disk": "accelerate, half of the layers on disk",
    }
    for key, label in labels.items():
        r = runs.get(key, {})
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} | | | | |")
            continue
        lines.append(
            f"| {label} | {r['load_seconds']:.2f} | {ratio(r['load_seconds'], cat)} | "
            f"{gib(r['peak_rss'] - r['base_rss'])} | {r['forward_first']:.2f} | {r['forward_warm']:.2f} |"
        )
    ours_ram, ref_ram = runs.get("accel/ram", {}), runs.get("accelerate/ram", {})
    ours_disk, ref_disk = runs.get("accel/disk", {}), runs.get("accelerate/disk", {})
    alternated = ours_ram.get("mapped_vs_private", {})
    lines += [
        "",
        f"- Load, ours vs reference (all in RAM): {ratio(ours_ram.get('load_seconds'), ref_ram.get('load_seconds'))}; "
        f"with half on disk: {ratio(ours_disk.get('load_seconds'), ref_disk.get('load_seconds'))}.",
        f"- Forward with half on disk vs all in RAM (warm): ours "
        f"{ratio(ours_disk.get('forward_warm'), ours_ram.get('forward_warm'))}, reference "
        f"{ratio(ref_disk.get('forward_warm'), ref_ram.get('forward_warm'))}.",
        "- Floors: load <= 1.2x `cat`; disk forward <= 1.2x the in-RAM forward.",
        *[
            f"- {who}: half-on-disk model vs the same checkpoint all in RAM, warm forwards "
            f"alternated in one process (median of 5 each): disk {pair['disk']:.2f} s, RAM "
            f"{pair['ram']:.2f} s ({ratio(pair['disk'], pair['ram'])}; the floor's ratio, free "
            "of the load differences between rows)."
            for who, pair in (
                ("ours", ours_disk.get("disk_vs_ram")),
                ("reference", ref_disk.get("disk_vs_ram")),
            )
            if pair
        ],
        f"- Memory-mapped vs private weights, warm forwards alternated in one process (median of "
        f"5 each): mapped {alternated.get('mapped', 0):.2f} s, private "
        f"{alternated.get('private', 0):.2f} s "
        f"({ratio(alternated.get('mapped'), alternated.get('private'))}). The rows above run "
        "minutes apart, so on a shared machine their forwards can differ from load alone; this "
        "alternated pair is the one to read for mapped vs private memory. Once mapped, pages of "
        "the warm page cache cost a forward no more than private memory.",
        "- With memory-mapped CPU weights the load reads nothing: pages come in at first use, so "
        "compare *load + first forward* too. `mmap=False` shows the cost of a private copy (on this "
        "VM, first-touch page faults on fresh memory dominate it).",
        '- The reference\'s `device_map="auto"` crashes when `max_memory` has a `"disk"` key '
        '(`get_balanced_memory` calls `torch.device("disk")`), so the disk rows use '
        '`device_map="sequential"` on both sides (same placement on a CPU-only machine).',
        "",
        "## 2. `infer_auto_device_map` (float16, budget `{0: 40GiB, 1: 40GiB, cpu: 60GiB, disk: 2000GB}`)",
        "",
        "| skeleton | modules | ours (s) | reference (s) | ours / reference | ours: bytes per device | reference: bytes per device |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for which, title in (
        ("moe", "MoE decoder, 32 layers x 768 experts"),
        ("llama70b", "Llama-like 70B"),
    ):
        ours, ref = device_map[which]["accel"], device_map[which]["accelerate"]
        ref_seconds = ref.get("seconds")
        ref_text = (
            f"{ref_seconds:.2f}" if ref_seconds else f"> {ref.get('timeout', 0):.0f} (stopped)"
        )

        def per(d: dict) -> str:
            return ", ".join(f"{k}: {gib(v)}" for k, v in d.get("bytes_per_device", {}).items())

        lines.append(
            f"| {title} | {ours['modules']} | {ours['seconds']:.2f} | {ref_text} | "
            f"{ratio(ours['seconds'], ref_seconds)} | {per(ours)} | {per(ref)} |"
        )
    lines += [
        "",
        "- Floor: ours <= 0.1x the reference on the many-module case.",
        "- Placement: accel places as the reference does by default (room for the largest "
        "layer not yet placed kept free on the main devices while they fill); "
        '`reserve="offloaded_layers"` keeps only the room the offloaded layers need, which keeps '
        "more weights on the faster devices on unbalanced models (see "
        "`test_small_layers_on_disk_need_only_their_own_room`).",
        "",
        "## 3. `init_empty_weights` of the 70B skeleton (best of 3)",
        "",
        f"{init['params'] / 1e9:.1f}B parameters; peak RSS growth during all builds: "
        f"{gib(init['peak_rss_growth'])}.",
        "",
        "| variant | seconds |",
        "| --- | ---: |",
        f"| accel-bigmodel `init_empty_weights()` | {init['accel_seconds']:.3f} |",
        f"| accelerate `init_empty_weights()` | {init['accelerate_seconds']:.3f} |",
        f'| `with torch.device("meta")` | {init["meta_device_seconds"]:.3f} |',
        "",
        "Raw numbers: rerun the scripts; each prints JSON.",
        "",
    ]
    with open(RESULTS, "w") as handle:
        handle.write("\n".join(lines))
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(RESULTS)  # one PNG per table, shown under it
    print("\n".join(lines))


if __name__ == "__main__":
    main()
