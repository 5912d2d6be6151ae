"""Run the clients' own test suites twice, on accel and on the reference, and compare.

Each suite runs with pytest in two fresh interpreters of this environment, side by side: one with
the switch on (``ACCEL_AS_ACCELERATE=1``, every ``accelerate`` import served by accel), one with it
off (the reference, accelerate 1.15). A test that passes on the reference and not on accel fails
the run, unless ``tools/client_suites_expected.txt`` lists it with its reason; so does a listed
test that now passes on accel (the list only shrinks).

Suites:
    peft          PEFT's ``tests/`` from the source distribution of the installed release on
                  PyPI (downloaded once into ``~/.cache/accel/client-suites/``, checked against
                  the sha256 below), the files that exercise accelerate and run on the CPU.
    transformers  transformers' ``tests/trainer`` from a checkout of its public repository at
                  the commit below (``--transformers-tests PATH``, the checkout's root); its
                  files are not in any source distribution, so CI (which reaches only PyPI)
                  cannot run it.

Usage:
    uv run --no-sync python tools/client_suites.py                      # peft, in CI
    uv run --no-sync python tools/client_suites.py --transformers-tests /path/to/transformers \\
        --suite transformers --out benchmarks/results/client-suites.md
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = Path(__file__).resolve().parent / "client_suites_expected.txt"
CACHE = Path(
    os.environ.get("ACCEL_CLIENT_SUITES_CACHE", Path.home() / ".cache/accel/client-suites")
)
SIDES = ("reference", "accel")
TEST_TIMEOUT_S = 600

PEFT_VERSION = "0.21.2"
PEFT_SHA256 = "b803ccfb3f3f316004d850284306687833a2235ea278fb56abc856203456142e"
# The files of PEFT's tests/ that reach accelerate on the CPU in a few minutes: the mixed
# model's hook removal, empty-weight init and skip-init, the LoRA-FA optimizer's precision
# probe, the helpers over hooked models. The hub-bound tests fail on both sides (offline) and
# count for neither. test_other.py, test_tuners_utils.py and test_low_level_api.py also reach
# accelerate but are left out for CI's time.
PEFT_FILES = (
    "tests/test_integrations.py",
    "tests/test_mixed.py",
    "tests/test_lorafa.py",
    "tests/test_helpers.py",
)


TRANSFORMERS_VERSION = "5.23.0"
# tests/trainer of the public repository: the files that go through accelerate on the CPU
# (Trainer's dataloaders, evaluation and prediction loops, the batch-size finder, the
# accelerator config, callbacks, checkpoint save and resume, training arguments), each at the
# commit of its newest stored version that runs on the installed 5.23.0 release (with the edits
# the page names), with the helpers they import. Fetch them into a folder outside this
# repository.
TRANSFORMERS_COMMITS = {
    "tests/trainer/trainer_test_utils.py": "fef6f3591b8998bd9ddd80b793b25e0c861ca3c7",
    "tests/trainer/test_trainer_evaluation.py": "d7f1740350ba292a268a0f4531dff14aca025403",
    "tests/trainer/test_trainer_data.py": "003432ac431659ea2564483634f35e4a2ee4c391",
    "tests/trainer/test_trainer_accelerator.py": "0d7e95d96b4e187c651e2b2406ed98ed40d74963",
    "tests/trainer/test_trainer_callback.py": "020a37d2264e60dc7beb9634c3e87ad870073e2c",
    "tests/trainer/test_trainer_checkpointing.py": "22c22fa26f5f3352d243bc358f0947af05b1d61b",
    "tests/trainer/test_trainer_optimizers.py": "0d7e95d96b4e187c651e2b2406ed98ed40d74963",
    "tests/trainer/test_trainer_resume.py": "37ff9888a5faa033e5579a42e611f8ad7cdbaed7",
    "tests/trainer/test_trainer_utils.py": "08d4e4f6ad2bd1d0d8b81a3da9bbf5b9886c71f1",
    "tests/trainer/test_training_args.py": "34de825520ff42f3bf328e7ab4ec39b5b0a73f94",
}
TRANSFORMERS_FILES = tuple(f for f in TRANSFORMERS_COMMITS if f.split("/")[-1].startswith("test_"))


@dataclass
class Suite:
    """One client's suite: where its files are and which of them run."""

    name: str
    root: Path
    files: tuple[str, ...]
    pytest_args: tuple[str, ...] = ()


@dataclass
class FileCounts:
    """Per suite file: how many tests passed on each side."""

    reference: int = 0
    accel: int = 0
    both: int = 0
    only_reference: list[str] = field(default_factory=list)
    only_accel: list[str] = field(default_factory=list)


def _download_peft(dest: Path) -> Path:
    """PEFT's sdist of the pinned release, fetched with pip once, checked against its sha256."""
    dest.mkdir(parents=True, exist_ok=True)
    sdist = dest / f"peft-{PEFT_VERSION}.tar.gz"
    if not sdist.exists():
        args = ["download", "--no-deps", "--no-binary", ":all:", f"peft=={PEFT_VERSION}"]
        args += ["-d", str(dest)]
        python = shutil.which("python3") or sys.executable
        for command in ([python, "-m", "pip", *args], ["uv", "tool", "run", "pip", *args]):
            if subprocess.run(command, check=False, capture_output=True).returncode == 0:
                break
        if not sdist.exists():
            raise SystemExit(f"could not download {sdist.name} from PyPI; put it into {dest}")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != PEFT_SHA256:
        sdist.unlink()
        raise SystemExit(
            f"{sdist} has sha256 {digest}, expected {PEFT_SHA256}: removed it, run again"
        )
    return sdist


def peft_suite(workdir: Path) -> Suite:
    """PEFT's tests, extracted into ``workdir`` (its tests import each other relatively, so
    the folder is made a package)."""
    installed = importlib.metadata.version("peft")
    if installed != PEFT_VERSION:
        raise SystemExit(
            f"peft {installed} is installed, the suite is pinned to {PEFT_VERSION}: update "
            "PEFT_VERSION and PEFT_SHA256 in tools/client_suites.py to the installed release"
        )
    with tarfile.open(_download_peft(CACHE)) as archive:
        members = [m for m in archive.getmembers() if "/tests/" in m.name]
        archive.extractall(workdir, members=members, filter="data")
    root = workdir / f"peft-{PEFT_VERSION}"
    (root / "tests" / "__init__.py").touch()
    return Suite("peft", root, PEFT_FILES)


def transformers_suite(checkout: Path) -> Suite:
    """transformers' trainer tests from a checkout holding ``tests/trainer``."""
    missing = [f for f in TRANSFORMERS_FILES if not (checkout / f).is_file()]
    if missing:
        raise SystemExit(
            f"--transformers-tests {checkout} lacks {missing}: pass the root of a checkout of "
            "https://github.com/huggingface/transformers holding, at these commits, "
            f"{TRANSFORMERS_COMMITS}"
        )
    return Suite("transformers", checkout, TRANSFORMERS_FILES)


def environment(side: str) -> dict[str, str]:
    """This environment, with the switch on (accel) or off (reference), offline, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env["ACCEL_AS_ACCELERATE"] = "1" if side == "accel" else "0"
    env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1"
    env["HF_ENDPOINT"] = _no_hub()
    env["PYTHONWARNINGS"] = "ignore"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("PYTHONPATH", None)
    return env


class _NotFound(http.server.BaseHTTPRequestHandler):
    """Answers 404 to every request."""

    def _answer(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        return


_HUB: list[str] = []


def _no_hub() -> str:
    """A local endpoint that answers 404 at once. PEFT's tests turn offline mode off around a
    model's first download; without a network the Hub client retries with back-off (about 20 s
    a call), while a 404 is final, so the download fails on both sides at once."""
    if not _HUB:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _HUB.append(f"http://127.0.0.1:{server.server_address[1]}")
    return _HUB[0]


def test_id(classname: str, name: str) -> str:
    """``tests/x/test_y.py::Class::test`` from a junit ``classname`` and ``name``."""
    if not classname:  # a module that could not be collected
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    module = next(
        (i for i in range(len(parts), 0, -1) if parts[i - 1].startswith("test")), len(parts)
    )
    return "::".join(["/".join(parts[:module]) + ".py", *parts[module:], name])


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed / failed / skipped, from pytest's junit XML (empty when absent)."""
    if not junit.exists():
        return {}
    result: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed"
            elif child.tag == "skipped" and state == "passed":
                state = "skipped"
        key = test_id(case.get("classname", ""), case.get("name", ""))
        # a test that passed and then errored at teardown appears twice: keep the failure
        if result.get(key) != "failed":
            result[key] = state
    return result


def run_side(suite: Suite, side: str, workdir: Path) -> tuple[dict[str, str], float, str]:
    """Run the suite's files once on ``side``: outcomes, wall seconds, output's tail."""
    ini = workdir / f"pytest-{side}.ini"
    ini.write_text(f"[pytest]\ntimeout = {TEST_TIMEOUT_S}\n")
    junit = workdir / f"junit-{side}.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(ini),
        "--rootdir",
        str(suite.root),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit2",
        *suite.pytest_args,
        *suite.files,
    ]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=suite.root,
        env=environment(side),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    return outcomes(junit), wall, (done.stdout + done.stderr)[-3000:]


def compare(results: Mapping[str, Mapping[str, str]]) -> dict[str, FileCounts]:
    """Per file, the passes of each side and the tests that pass on one side only."""
    reference, accel = results["reference"], results["accel"]
    counts: dict[str, FileCounts] = {}
    for key in sorted(set(reference) | set(accel)):
        row = counts.setdefault(key.split("::")[0], FileCounts())
        on_reference = reference.get(key) == "passed"
        on_accel = accel.get(key) == "passed"
        row.reference += on_reference
        row.accel += on_accel
        row.both += on_reference and on_accel
        if on_reference and not on_accel:
            row.only_reference.append(key)
        elif on_accel and not on_reference:
            row.only_accel.append(key)
    return counts


def read_expected(path: Path = EXPECTED) -> dict[str, str]:
    """Listed differences: ``suite test-id  # reason`` per line -> ``{suite test-id: reason}``."""
    expected: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        entry, _, reason = line.partition("#")
        if not reason.strip() or len(entry.split()) != 2:
            raise SystemExit(
                f"{path}:{number}: each line is 'SUITE TEST-ID  # reason', got {line!r}: "
                "give the suite name, the test id and why it differs"
            )
        expected[" ".join(entry.split())] = reason.strip()
    return expected


def verdict(
    suite: str, counts: Mapping[str, FileCounts], expected: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """Unlisted tests that pass only on the reference; listed ones that no longer do."""
    only_reference = {f"{suite} {t}" for row in counts.values() for t in row.only_reference}
    listed = {k for k in expected if k.split()[0] == suite}
    return sorted(only_reference - listed), sorted(listed - only_reference)


def table(suite: str, counts: Mapping[str, FileCounts], walls: Mapping[str, float]) -> str:
    """The per-file counts as a Markdown table."""
    lines = [
        f"### {suite}",
        "",
        f"Wall time: reference {walls['reference']:.0f} s, accel {walls['accel']:.0f} s "
        "(side by side).",
        "",
        "| file | reference | accel | both | only reference | only accel |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in counts.items():
        lines.append(
            f"| `{name}` | {row.reference} | {row.accel} | {row.both} "
            f"| {len(row.only_reference)} | {len(row.only_accel)} |"
        )
    total = FileCounts()
    for row in counts.values():
        total.reference += row.reference
        total.accel += row.accel
        total.both += row.both
        total.only_reference += row.only_reference
        total.only_accel += row.only_accel
    lines.append(
        f"| **total** | {total.reference} | {total.accel} | {total.both} "
        f"| {len(total.only_reference)} | {len(total.only_accel)} |"
    )
    return "\n".join(lines) + "\n"


def run_suite(suite: Suite, workdir: Path) -> tuple[dict[str, FileCounts], dict[str, float]]:
    """Both sides at once (one process each), then the comparison."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {side: pool.submit(run_side, suite, side, workdir) for side in SIDES}
        done = {side: future.result() for side, future in futures.items()}
    for side, (results, _, tail) in done.items():
        if not results:
            raise SystemExit(
                f"{suite.name} on {side}: pytest reported no test; its output:\n{tail}"
            )
    counts = compare({side: done[side][0] for side in SIDES})
    return counts, {side: done[side][1] for side in SIDES}


HEADER = """# The clients' own test suites: reference and accel side by side

Written by `tools/client_suites.py` (do not edit by hand: rerun it). Each suite runs twice in
the same environment, one pytest process per side at once: the reference (accelerate 1.15) and
accel under the switch (`ACCEL_AS_ACCELERATE=1`). Counts are passed tests per file; a test that
passes only on the reference fails the run unless `tools/client_suites_expected.txt` lists it
with its reason, quoted below. Tests that need the Hugging Face Hub fail on both sides (the runs
are offline: a local endpoint answers 404) and count for neither.

- **peft** {peft}: its sdist's `tests/` (sha256 `{sha}`), in CI (`.ci/run`, step
  `client_suites` of `tools/test.sh`).
- **transformers** {transformers}: `tests/trainer` of the public repository, at the commits
  {commit} (its files are in no source distribution, and CI reaches only PyPI, so CI cannot
  run this suite); rerun from a checkout with
  `uv run --no-sync python tools/client_suites.py --suite transformers --transformers-tests
  PATH/TO/transformers --out benchmarks/results/client-suites.md`. The distributed files
  (`tests/trainer/distributed/`: DDP, FSDP, DeepSpeed) are marked for accelerators
  (`require_torch_multi_accelerator`, `require_torch_accelerator`) at those commits and skip on
  the CPU on both sides; Trainer on 2 CPU processes with DDP, FSDP and DeepSpeed is covered by
  accel's own `tests/ecosystem/test_trainer.py`. Edits to the copies: `test_trainer_data.py`
  and `test_trainer_evaluation.py` hold their classes that run on the CPU (their
  accelerator-only and `@slow` hub classes skip anyway), and `test_trainer_evaluation.py` lacks
  its import of `GlueDataset`, which 5.23.0 no longer exports and only its `@slow` MRPC test
  uses; `test_trainer_checkpointing.py` lacks its two `@is_staging_test` Hub classes (they push
  to a staging Hub and skip without one); `test_trainer_utils.py` lacks
  `DistributedTensorGatherer` and `SequentialDistributedSampler` in its import (5.23.0 no longer
  has them, the stored versions do not collect without the edit), so its three tests of them
  fail on both sides. Left out: `test_loss_reduction.py` (its 8 tests call
  `Trainer._reduce_loss`, which 5.23.0 lacks, and fail on both sides),
  `test_gradient_clipping.py` (downloads `distilbert-base-uncased` from the Hub),
  `test_trainer_distributed_loss.py` and `test_trainer_distributed_worker_seed.py`
  (`require_torch_multi_accelerator`: torchrun on several accelerators),
  `test_trainer_autocast.py` (a bf16 GPU and a Hub model), `test_trainer_sampler_seed.py`
  (passes `group_by_length` to `TrainingArguments`, which 5.23.0 refuses, on both sides),
  `test_trainer_optimizer_skip.py` (counts `TrainerState.optimizer_step_attempts`, which 5.23.0
  lacks), `test_skip_logits_eval.py` (`use_liger_kernel`: the Liger kernel is not installed), and
  `test_trainer.py` (264,017 characters at the stored version read,
  `0052c30e2198e6d9f60c8517df6502042fd48345`, which imports `GlueDataset`: not copied yet).
"""


def section(
    suite: str,
    counts: Mapping[str, FileCounts],
    walls: Mapping[str, float],
    expected: Mapping[str, str],
) -> str:
    """The suite's table and every test that passes only on the reference, with its reason."""
    lines = [table(suite, counts, walls)]
    only = [t for row in counts.values() for t in row.only_reference]
    if only:
        lines.append("Passing only on the reference:\n")
        lines += [f"- `{t}`: {expected.get(f'{suite} {t}', 'not listed')}" for t in only]
    return "\n".join(lines) + "\n"


def write_page(out: Path, sections: Mapping[str, str]) -> None:
    """Write the page, keeping the sections of suites not run this time."""
    kept: dict[str, str] = {}
    if out.exists():
        for chunk in out.read_text().split("\n### ")[1:]:
            kept[chunk.split("\n", 1)[0].strip()] = "### " + chunk.rstrip("\n") + "\n"
    kept.update(sections)
    header = HEADER.format(
        peft=PEFT_VERSION,
        sha=PEFT_SHA256,
        transformers=TRANSFORMERS_VERSION,
        commit=", ".join(f"`{Path(f).name}` `{c}`" for f, c in TRANSFORMERS_COMMITS.items()),
    )
    body = "\n".join(kept[name] for name in sorted(kept))
    out.write_text(header + "\n" + body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--suite", choices=("peft", "transformers"), action="append")
    parser.add_argument("--transformers-tests", type=Path, help="root of a transformers checkout")
    parser.add_argument("--out", type=Path, help="also write the counts to this Markdown file")
    options = parser.parse_args(argv)
    names = options.suite or (["peft", "transformers"] if options.transformers_tests else ["peft"])
    expected = read_expected()
    failures: list[str] = []
    sections: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="client-suites-") as tmp:
        workdir = Path(tmp)
        for name in names:
            if name == "peft":
                suite = peft_suite(workdir)
            elif options.transformers_tests is None:
                raise SystemExit("--suite transformers needs --transformers-tests PATH")
            else:
                suite = transformers_suite(options.transformers_tests.resolve())
            counts, walls = run_suite(suite, workdir)
            sections[name] = section(name, counts, walls, expected)
            print(sections[name])
            unexpected, fixed = verdict(name, counts, expected)
            failures += [
                f"passes on the reference, not on accel, not listed: {t}" for t in unexpected
            ]
            failures += [f"listed in {EXPECTED.name} but passes on accel now: {t}" for t in fixed]
    if options.out:
        write_page(options.out, sections)
    for failure in failures:
        print(failure)
    print(f"client suites: {len(failures)} unexpected difference(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
