"""A model bigger than the whole machine: a Llama checkpoint larger than RAM, served from disk.

A ``transformers`` ``LlamaForCausalLM`` of Llama-7B's width (float32, random weights, built from
a config: no download) with enough decoder layers to pass the machine's RAM is written once as
sharded safetensors (reused by later runs: ``--checkpoint``), then each side loads it in a fresh
process with ``init_empty_weights`` + ``load_checkpoint_and_dispatch(device_map="auto",
max_memory={"cpu": BUDGET})`` and runs a greedy ``generate`` of a few tokens, the page cache
evicted first. Measured: load time, time to first token, time per later token, peak anonymous
memory (``RssAnon``, sampled every 20 ms: the page cache is not counted), the bytes read from
storage per token (``/proc/self/io``), and the bytes each side wrote beside the checkpoint. The
side ``accel-unbounded`` leaves every page to the kernel (no page-cache bound), as accel did
before the prefetcher's ``cache_bytes``; ``accel-faults`` leaves the weights kept in RAM to the
compute's page faults at the first token (no ``Prefetcher.warm``). The floor of a token is
max(bytes the disk must deliver per token / the disk's measured bandwidth, the in-RAM compute
of the same layers measured on a slice of 1 and 3 layers). The reference runs in the same run when the disk has room for what it copies.

Run: uv run --group bench --group ecosystem python benchmarks/bigmodel/bench_beyond_ram.py
     (--short: a model of a few MB against a budget of a quarter of it, same code path)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _machine import evict, status_bytes, write_section  # noqa: E402  (benchmarks/_machine.py)
from _workers import run_worker_process  # noqa: E402  (benchmarks/_workers.py)
from bench_offload_cold import read_bandwidth_two_streams  # noqa: E402

RESULTS = os.path.join(HERE, "..", "results", "bigmodel_beyond_ram.md")
FULL = {"hidden": 4096, "intermediate": 11008, "heads": 32, "vocab": 32000, "size_gb": 30.0}
SHORT = {"hidden": 128, "intermediate": 344, "heads": 4, "vocab": 1000, "size_gb": 0.02}
PROMPT = 8
NAMES = {
    "accel": "accel (default: RAM weights mapped from the checkpoint)",
    "accel-private": "accel, `mmap=False` (RAM weights in private memory)",
    "accel-unbounded": "accel, no page-cache bound (`cache_bytes` unlimited: the kernel's choice)",
    "accel-copies": "accel, disk weights copied into the prefetcher's buffers (`map_files = False`)",
    "accel-faults": "accel, RAM weights paged in by the compute's page faults (no `warm` read-ahead)",
    "reference": "reference accelerate",
}
SHARD = "2GB"


def layer_bytes(shape: dict) -> int:
    h, i = shape["hidden"], shape["intermediate"]
    return 4 * (4 * h * h + 3 * h * i + 2 * h)


def config_for(shape: dict, layers: int | None = None):
    from transformers import LlamaConfig

    fixed = 4 * 2 * shape["vocab"] * shape["hidden"]  # embeddings and head (untied)
    if layers is None:
        layers = max(2, round((shape["size_gb"] * 1e9 - fixed) / layer_bytes(shape)))
    return LlamaConfig(
        hidden_size=shape["hidden"],
        intermediate_size=shape["intermediate"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["heads"],
        num_hidden_layers=layers,
        vocab_size=shape["vocab"],
        tie_word_embeddings=False,
        torch_dtype="float32",
    )


def write_checkpoint(folder: str, shape: dict) -> dict:
    """Write the checkpoint once (a ``complete.json`` marker last); reuse it when present."""
    marker = os.path.join(folder, "complete.json")
    if os.path.exists(marker):
        with open(marker) as handle:
            done = json.load(handle)
        if done.get("shape") == shape:
            return done
    import torch
    from accel_bigmodel import SAFE_WEIGHTS_INDEX_NAME, init_empty_weights, shard_checkpoint
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    config = config_for(shape)
    config.save_pretrained(folder)
    with init_empty_weights():
        model = LlamaForCausalLM(config)
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(0)
    shards, index = shard_checkpoint(model.state_dict(), SHARD, "model.safetensors")
    for file_name, shard in shards.items():
        tensors = {}
        for key, meta in shard.items():
            value = torch.empty(meta.shape)
            if key.endswith("norm.weight"):
                value.fill_(1.0)
            else:
                value.normal_(0.0, 0.02, generator=generator)
            tensors[key] = value
        save_file(tensors, os.path.join(folder, file_name), metadata={"format": "pt"})
        del tensors
    if index is not None:  # one shard: model.safetensors alone
        with open(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME), "w") as handle:
            json.dump(index, handle)
    os.sync()
    done = {
        "shape": shape,
        "layers": config.num_hidden_layers,
        "bytes": sum(os.path.getsize(os.path.join(folder, f)) for f in shards),
        "files": sorted(shards),
        "write_s": round(time.perf_counter() - start, 1),
    }
    with open(marker, "w") as handle:
        json.dump(done, handle)
    return done


class AnonPeak:
    """Peak ``RssAnon`` of this process (private memory: weights in RAM, activations, buffers;
    not the page cache), sampled on a thread every 20 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> int:
        return status_bytes("RssAnon")

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.now())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now())


def storage_read_bytes() -> int:
    """Bytes this process has had read from storage (``/proc/self/io``: page cache hits do not
    count; reads of a memory map do); -1 where the kernel does not account them."""
    try:
        with open("/proc/self/io") as handle:
            for line in handle:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class TokenClock:
    """A ``generate`` streamer that notes when each new token arrives (the first ``put`` is the
    prompt), and the bytes read from storage by then."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.times: list[float] = []
        self.read: list[int] = []
        self._read_at_start = storage_read_bytes()
        self._prompt_seen = False

    def put(self, value) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter() - self.start)
        self.read.append(storage_read_bytes() - self._read_at_start)

    def end(self) -> None:
        pass


def worker(side: str, folder: str, budget: int, tokens: int, offload: str) -> dict:
    import torch

    torch.set_num_threads(2)
    if side == "reference":
        from accelerate import init_empty_weights, load_checkpoint_and_dispatch
    else:
        from accel_bigmodel import init_empty_weights, load_checkpoint_and_dispatch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig.from_pretrained(folder)
    files = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors")]
    evict(files)
    anon = AnonPeak()
    base = anon.now()
    start = time.perf_counter()
    with init_empty_weights():
        model = LlamaForCausalLM(config)
    model.eval()
    # accel-private: the weights kept in RAM are read into private memory (mmap=False), as
    # the reference's are; plain accel maps them from the checkpoint (its default).
    extra = {"mmap": False} if side == "accel-private" else {}
    model = load_checkpoint_and_dispatch(
        model,
        folder,
        device_map="auto",
        max_memory={"cpu": budget},
        no_split_module_classes=["LlamaDecoderLayer"],
        offload_folder=offload,
        **extra,
    )
    load_s = time.perf_counter() - start
    if side == "accel-copies":
        # Disk weights read into the prefetcher's buffers instead of computed on their leased
        # pages (files/_leased_map.py): the path every platform without leases takes.
        model._accel_prefetcher.map_files = False
    if side == "accel-faults":
        # The weights kept in RAM left to the compute's page faults, as before `warm`.
        model._accel_prefetcher.warm = []
    if side == "accel-unbounded":
        from accel_bigmodel import attach_prefetcher

        # Every page left to the kernel, as before the page-cache bound: the disk part's pages
        # then push out what the next token needs first (one pass over more than RAM).
        attach_prefetcher(model, cache_bytes=1 << 62)
    prefetcher = getattr(model, "_accel_prefetcher", None)
    cache_bytes = kept_bytes = None
    if prefetcher is not None:
        from accel_bigmodel.offload._prefetch_pool import plan_bytes

        cache_bytes = prefetcher.cache_bytes
        kept_bytes = sum(
            plan_bytes(plan)
            for key, plan in prefetcher.plans.items()
            if plan and key not in prefetcher.streamed
        )
    device_map = dict(model.hf_device_map)
    disk = [name for name, where in device_map.items() if where == "disk"]
    sizes = {n: p.numel() * p.element_size() for n, p in model.named_parameters()}
    disk_bytes = sum(
        size for n, size in sizes.items() if any(n == m or n.startswith(m + ".") for m in disk)
    )
    written = sum(
        os.path.getsize(os.path.join(root, f)) for root, _, fs in os.walk(offload) for f in fs
    )
    evict(files + [os.path.join(r, f) for r, _, fs in os.walk(offload) for f in fs])
    ids = torch.randint(
        0, config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(0)
    )
    clock = TokenClock()
    with torch.no_grad():
        out = model.generate(
            ids, max_new_tokens=tokens, do_sample=False, streamer=clock, pad_token_id=0
        )
    times = clock.times
    return {
        "load_s": load_s,
        "first_token_s": times[0],
        "per_token_s": [b - a for a, b in zip(times, times[1:])],
        "per_token_read": [b - a for a, b in zip(clock.read, clock.read[1:])],
        "cache_bytes": cache_bytes,
        "kept_bytes": kept_bytes,
        "anon_peak": anon.stop() - base,
        "written": written,
        "disk_modules": len(disk),
        "disk_bytes": disk_bytes,
        "ram_bytes": sum(sizes.values()) - disk_bytes,
        "mapped": side in ("accel", "accel-unbounded", "accel-copies", "accel-faults"),
        "tokens": out[0, PROMPT:].tolist(),
    }


def slice_worker(folder: str, tokens: int) -> dict:
    """In-RAM compute of the same shapes on 1 and 3 layers (random weights): the time of one
    decoder layer and of the rest (embeddings, head) per token, prompt and later tokens."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(2)
    base = LlamaConfig.from_pretrained(folder)
    found = {}
    for layers in (1, 3):
        config = LlamaConfig.from_dict({**base.to_dict(), "num_hidden_layers": layers})
        model = LlamaForCausalLM(config).eval()
        ids = torch.randint(0, config.vocab_size, (1, PROMPT))
        best_first, best_next = float("inf"), float("inf")
        for _ in range(3):
            clock = TokenClock()
            with torch.no_grad():
                model.generate(
                    ids, max_new_tokens=tokens, do_sample=False, streamer=clock, pad_token_id=0
                )
            best_first = min(best_first, clock.times[0])
            steps = [b - a for a, b in zip(clock.times, clock.times[1:])]
            best_next = min(best_next, sorted(steps)[len(steps) // 2])
        found[layers] = (best_first, best_next)
        del model
    per_layer = [(found[3][k] - found[1][k]) / 2 for k in (0, 1)]
    rest = [found[1][k] - per_layer[k] for k in (0, 1)]
    return {"per_layer": per_layer, "rest": rest}


def run(args: list[str]) -> dict:
    done = run_worker_process(__file__, *args, timeout=6 * 3600.0, marker="RESULT ")
    found = done.result()
    return found if found is not None else {"error": done.error_line("Error")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="a model of a few MB")
    parser.add_argument("--checkpoint", help="folder of the checkpoint (written once, reused)")
    parser.add_argument("--budget-gib", type=float, default=8.0, help="max_memory of the CPU")
    parser.add_argument("--tokens", type=int, default=None, help="tokens to generate (4; 2 short)")
    parser.add_argument(
        "--sides",
        default="accel,accel-faults,accel-unbounded,accel-copies,accel-private,reference",
    )
    parser.add_argument("--out", default=RESULTS, help="page to write")
    args = parser.parse_args()
    shape = SHORT if args.short else FULL
    if args.tokens is None:
        args.tokens = 2 if args.short else 4
    scratch = tempfile.mkdtemp(prefix="bench-beyond-ram-")
    folder = args.checkpoint or (
        os.path.join(scratch, "checkpoint")
        if args.short
        else os.path.expanduser("~/.cache/accel/beyond-ram-llama")
    )
    started = time.perf_counter()
    try:
        info = write_checkpoint(folder, shape)
        files = [os.path.join(folder, f) for f in info["files"]]
        budget = info["bytes"] // 4 if args.short else int(args.budget_gib * 2**30)
        # The disk's bandwidth on about 4 GB of the checkpoint (all of it when smaller).
        sample, size = [], 0
        for path in files:
            if size >= 4e9:
                break
            sample.append(path)
            size += os.path.getsize(path)
        raw: dict = {
            "info": info,
            "budget": budget,
            "tokens": args.tokens,
            "ram": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
            "bandwidth": read_bandwidth_two_streams(sample),
            "slice": run(["--slice", folder, str(args.tokens)]),
            "sides": {},
        }
        # Temporary folders of the sides go under the scratch folder, removed at the end even
        # when a side dies.
        os.environ["TMPDIR"] = scratch
        for side in args.sides.split(","):
            offload = tempfile.mkdtemp(prefix="offload-", dir=scratch)
            free = shutil.disk_usage(offload).free
            copied = max(0, info["bytes"] - budget)  # what a side that copies disk weights writes
            # The reference also writes the weights it keeps in RAM to a temporary folder while
            # it loads (offload_state_dict, on by default with a disk part): the whole model in
            # all. Short of that, it dies of SIGBUS when the disk fills under its memory maps.
            temporary = info["bytes"] - copied
            if side == "reference" and free < copied + temporary + 2**30:
                raw["sides"][side] = {
                    "skipped": f"it copies every disk weight into its offload folder (about "
                    f"{copied / 1e9:.1f} GB here) and, while it loads, the weights it keeps in "
                    f"RAM into a temporary folder (about {temporary / 1e9:.1f} GB); the disk has "
                    f"{free / 1e9:.1f} GB free"
                }
                continue
            args_ = ["--worker", side, folder, str(budget), str(args.tokens), offload]
            raw["sides"][side] = run(args_)
            shutil.rmtree(offload, ignore_errors=True)
            print(side, raw["sides"][side], file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    raw["elapsed"] = time.perf_counter() - started
    print("RAW " + json.dumps(raw), flush=True)
    write_page(raw, args.out)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def write_page(raw: dict, out: str) -> None:
    info, sides, cut = raw["info"], raw["sides"], raw["slice"]
    layers, gb = info["layers"], 1e9
    ok = {k: v for k, v in sides.items() if "load_s" in v}
    disk_bytes = max((v["disk_bytes"] for v in ok.values()), default=0)
    read_s = disk_bytes / raw["bandwidth"]
    compute = [cut["rest"][k] + layers * cut["per_layer"][k] for k in (0, 1)]
    floor_first, floor_next = max(read_s, compute[0]), max(read_s, compute[1])
    lines = [
        f"## A checkpoint of {info['bytes'] / gb:.1f} GB on a machine of "
        f"{raw['ram'] / 2**30:.1f} GiB RAM, CPU budget {raw['budget'] / 2**30:.2f} GiB",
        "",
        f"Llama (transformers `LlamaForCausalLM`, hidden {info['shape']['hidden']}, "
        f"intermediate {info['shape']['intermediate']}, {layers} layers, vocabulary "
        f"{info['shape']['vocab']}, float32, random weights) in {len(info['files'])} safetensors "
        f"shards; prompt {PROMPT} tokens, greedy `generate` of {raw['tokens']} tokens, page cache "
        f"evicted before the load and again before `generate`. Disk: {raw['bandwidth'] / gb:.2f} "
        f"GB/s (two streams, cold). Disk part of the model: {disk_bytes / gb:.1f} GB, read once "
        f"per token: {read_s:.1f} s. In-RAM compute of all {layers} layers (from a slice of 1 "
        f"and 3 layers): first token {compute[0]:.2f} s, later tokens {compute[1]:.2f} s.",
        "",
        "| side | load s | first token s | x its floor | s per later token | x floor "
        "| GB read per later token | peak anonymous GB | written beside the checkpoint GB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for side, found in sides.items():
        name = NAMES.get(side, side)
        if "load_s" not in found:
            reason = found.get("skipped") or found.get("error", "")
            kind = "not run: " if "skipped" in found else "error: "
            lines.append(f"| {name} | {kind + reason[:160]} | | | | | | | |")
            continue
        per = _median(found["per_token_s"])
        reads = [r for r in found.get("per_token_read", []) if r >= 0]
        read_text = f"{_median(reads) / gb:.1f}" if reads else "-"
        # A side that maps its in-RAM weights from the checkpoint reads them again at the
        # first token after the eviction: its first-token floor counts those bytes too.
        first_bytes = disk_bytes + (found["ram_bytes"] if found.get("mapped") else 0)
        first_floor = max(first_bytes / raw["bandwidth"], compute[0])
        lines.append(
            f"| {name} | {found['load_s']:.1f} | {found['first_token_s']:.1f} | "
            f"{found['first_token_s'] / first_floor:.2f}x | {per:.1f} | "
            f"{per / floor_next:.2f}x | {read_text} | {found['anon_peak'] / gb:.2f} | "
            f"{found['written'] / gb:.2f} |"
        )
    lines.append(
        f"| floor of one pass over the disk part: max(disk part / bandwidth, in-RAM compute) "
        f"| | {floor_first:.1f} | 1.00x | {floor_next:.1f} | 1.00x | {disk_bytes / gb:.1f} | | "
        "0.00 |"
    )
    lines.append("")
    dominant = "reading the disk part" if read_s >= compute[1] else "the in-RAM compute"
    lines.append(
        f"- What dominates a token: {dominant} ({read_s:.1f} s of reads against "
        f"{compute[1]:.2f} s of compute)."
    )
    for side in ("accel", "accel-private"):
        if side not in ok:
            continue
        found = ok[side]
        lines.append(
            f"- {NAMES[side]}: anonymous memory peaked at {found['anon_peak'] / gb:.2f} GB "
            f"against a budget of {raw['budget'] / gb:.2f} GB "
            f"({found['anon_peak'] / raw['budget']:.2f}x); {found['ram_bytes'] / gb:.1f} GB of "
            f"weights in RAM, {found['disk_modules']} modules ({found['disk_bytes'] / gb:.1f} GB) "
            f"on disk, {found['written'] / 1e6:.2f} MB written beside the checkpoint (the "
            "offload index: disk weights are read in place from its safetensors files)."
        )
    for side, found in ok.items():
        reads = [r for r in found.get("per_token_read", []) if r >= 0]
        if found.get("cache_bytes") is None or not reads:
            continue
        per, read = _median(found["per_token_s"]), _median(reads)
        bound = found["cache_bytes"]
        bound_text = "unlimited" if bound >= 1 << 60 else f"{bound / gb:.1f} GB"
        kept = found["kept_bytes"]
        within = (
            "the whole disk part within it (nothing dropped)"
            if kept >= found["disk_bytes"]
            else f"{kept / gb:.1f} GB of the disk part within it (kept cached), the rest "
            "dropped from the page cache after use"
        )
        lines.append(
            f"- {NAMES.get(side, side)}: page-cache bound {bound_text}, {within}; "
            f"{read / gb:.1f} GB read from the disk "
            f"per later token, {read / per / gb:.2f} GB/s over the token's time "
            f"({read / raw['bandwidth'] / per:.2f}x the measured bandwidth)."
        )
    if "accel" in ok:
        lines.append(
            "- accel's default maps the weights kept in RAM from the checkpoint (`mmap=True`): "
            "they are page cache, not anonymous memory, so its load takes a fraction of a "
            "second and its first token reads them (the page cache was emptied before "
            "`generate`); `mmap=False` reads them at the load into private memory."
        )
    tokens = {tuple(v["tokens"]) for v in ok.values()}
    if len(ok) > 1:
        lines.append(f"- Generated tokens equal on every side that ran: {len(tokens) == 1}.")
    lines.append(f"- Checkpoint written in {info['write_s']} s (once; reused by later runs).")
    write_section(out, "bench_beyond_ram", "A model bigger than the machine", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        side, folder, budget, tokens, offload = sys.argv[2:7]
        print("RESULT " + json.dumps(worker(side, folder, int(budget), int(tokens), offload)))
    elif len(sys.argv) > 1 and sys.argv[1] == "--slice":
        print("RESULT " + json.dumps(slice_worker(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
