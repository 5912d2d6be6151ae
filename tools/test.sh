#!/usr/bin/env bash
# The project's whole check: lint, import layers, types, every test, minimal installs (each
# package alone, on each declared Python, on its lowest declared versions).
# Usage: bash tools/test.sh              every step, in two lanes (BESIDE below), then the test
#                                        steps alone (installs uv when missing: tools/uv.sh)
#        bash tools/test.sh lint types   only the steps named, in the order given (CI runs the
#                                        steps as parallel jobs: .github/workflows/ci.yml)
#        bash tools/test.sh --list       the steps
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=(lint imports deps types fuzz minimal pythons lowest release cluster docs benchmarks gpu_dry_run tests reference_suite client_suites xla)
# When every step runs, the steps that mostly wait on downloads and work in environments of their
# own (system packages; accel-bigmodel and accel-trackers on the other Pythons and on the lowest
# versions; XLA; the release dry run) run in a second lane beside the steps that time nothing
# (lint ... the GPU dry run). The steps whose tests start several processes under timeouts
# (minimal, tests, reference_suite, client_suites) start once both lanes are done, alone on
# the machine.
# Same steps, same checks, less waiting: the downloads overlap the single-threaded checks.
BESIDE=(cluster pythons lowest xla release)
FIRST=(lint imports deps types fuzz docs benchmarks gpu_dry_run)
AFTER=(minimal tests reference_suite client_suites)

step() { printf '\n== %s\n' "$*"; }

run_lint() {
    step "lint"
    uv run --no-sync ruff check packages tests tools examples benchmarks
    uv run --no-sync ruff format --check packages tests tools examples benchmarks
}

run_imports() {
    step "import layers"
    uv run --no-sync lint-imports
}

run_deps() {
    step "declared dependencies (deptry, per package)"
    for pkg in packages/*/; do
        (cd "$pkg" && uv run --no-sync deptry src --no-ansi >/dev/null 2>&1) || {
            (cd "$pkg" && uv run --no-sync deptry src --no-ansi); exit 1; }
    done
    echo "every package declares exactly what it imports"
}

run_types() {
    step "types"
    uv run --no-sync mypy packages/*/src --no-error-summary
}

# Two packages at a time: their installs and the tests' process start-ups leave a core idle.
run_minimal() {
    step "minimal installs"
    # Each test that passes here, with its package alone, is not run again by the tests step.
    uv run --no-sync python tools/check_minimal_installs.py --jobs 2 --record-passed "$passed"
    echo "$(wc -l <"$passed") tests passed with their package alone"
}

# The two packages meant for reuse, on the other Pythons they declare. The Pythons must be
# installed (pyenv or PATH). accel-trackers leaves out Python 3.12 for now: its ClearML
# offline-session test hangs there past its timeout (tracked in the changelog).
run_pythons() {
    step "minimal installs: other Pythons (accel-bigmodel: 3.10, 3.12, 3.13; accel-trackers: 3.10, 3.13)"
    uv run --no-sync python tools/check_minimal_installs.py --jobs 2 --pythons 3.10,3.12,3.13 accel-bigmodel
    uv run --no-sync python tools/check_minimal_installs.py --jobs 2 --pythons 3.10,3.13 accel-trackers
}

# Every direct dependency at the lowest version its declared range allows (lowest-direct).
# Here only accel-bigmodel, the package meant for reuse that depends on torch: 80 s on 2 shared
# cores with torch 2.5 in uv's cache (the first run downloads it with its CUDA libraries: 5 min).
# Measured and left to CI, which runs the lowest job of every package (.github/workflows/ci.yml):
# accel-trackers takes 11 min (its backends' lowest releases) and fails on swanlab and trackio;
# the packages that declare numpy>=1.23 build numpy 1.23.0 from source on Python 3.11.
run_lowest() {
    step "minimal installs: lowest versions (accel-bigmodel)"
    uv run --no-sync python tools/check_minimal_installs.py --lowest accel-bigmodel
}

# The whole release of one package, on a copy of the workspace (bump, changelog draft, build,
# twine check, installed alone with its freshly built siblings, its tests): accel-collectives
# is the cheapest with tests (about 3.5 min); every package is installed alone above anyway.
run_release() {
    step "release dry run (accel-collectives)"
    uv run --no-sync python tools/release.py accel-collectives patch --dry-run
}

run_cluster() {
    step "system packages: SLURM, munge and Open MPI for the cluster tests, Chromium for the docs (apt, once)"
    local wanted=()
    command -v slurmctld >/dev/null 2>&1 || wanted+=(slurm-wlm)
    command -v munged >/dev/null 2>&1 || wanted+=(munge)
    command -v mpirun >/dev/null 2>&1 || wanted+=(openmpi-bin)
    have_chromium || wanted+=(chromium)
    if [ "${#wanted[@]}" = 0 ]; then
        echo "already installed"
    elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}" >/dev/null
        echo "installed ${wanted[*]}"
    else
        echo "skipped: installing ${wanted[*]} needs apt-get as root; tests/slurm and the browser check skip with the reason"
    fi
}

have_chromium() { command -v chromium >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; }

run_docs() {
    step "docs: build --strict, examples, browser check"
    local docs_start=$SECONDS site_status=0
    if [ -n "${LANE_DIR:-}" ]; then  # the other lane installs Chromium: wait for it (20 min at most)
        local waited=0
        while [ ! -e "$LANE_DIR/cluster.done" ] && [ "$waited" -lt 1200 ]; do sleep 2; waited=$((waited + 2)); done
    fi
    if have_chromium; then
        echo "a Chromium browser is installed"
    elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        echo "installed chromium"
    fi
    NO_MKDOCS_2_WARNING=1 uv run --no-sync mkdocs build --strict -d build/site
    # every python block of docs/ and README.md; the charts helper; the browser check's own test
    uv run --no-sync pytest tests/docs -q -p no:cacheprovider
    # the home page and one API page in headless Chromium: any console error fails; screenshots
    uv run --no-sync python tools/check_site.py build/site --pages / api/state/ \
        --screenshots build/artifacts || site_status=$?
    if [ "$site_status" = 2 ]; then
        echo "browser check skipped: no Chromium, and installing it needs apt-get as root"
    elif [ "$site_status" != 0 ]; then
        exit "$site_status"
    fi
    echo "docs step: $((SECONDS - docs_start)) s"
}

# Every benchmark at tiny sizes, pages into a temporary folder (the committed results are not
# touched): a benchmark that no longer runs fails here. The slow ones are listed as skipped.
run_benchmarks() {
    step "benchmarks smoke (benchmarks/run.py --short)"
    local bench_start=$SECONDS bench_out
    bench_out="$(mktemp -d)"
    uv run --no-sync python benchmarks/run.py --short --out "$bench_out"
    rm -rf "$bench_out"
    echo "benchmarks step: $((SECONDS - bench_start)) s"
}

# The GPU check's dry run: the same script as on a GPU, every CUDA part skipped and named, so
# that it still runs when a GPU is there (docs/gpu-check.md). tests/gpu runs here, not below.
# Every reader of outside bytes (files, environment, command line) fed mutated real saves for
# 2 s each, with the random engine in one process (tools/fuzz.py; the campaign with atheris is
# `python tools/fuzz.py --long`, docs/untrusted-files.md). A finding fails the step.
run_fuzz() {
    step "fuzz: every reader of outside bytes, a few seconds each (tools/fuzz.py --short)"
    local fuzz_out
    fuzz_out="$(mktemp -d)"
    OMP_NUM_THREADS=1 uv run --no-sync python tools/fuzz.py --short --seconds 2 --cache "$fuzz_out"
    rm -rf "$fuzz_out"
}

run_gpu_dry_run() {
    step "GPU check, dry run on the CPU (tools/gpu_check.sh --dry-run, then with --large)"
    bash tools/gpu_check.sh --dry-run && bash tools/gpu_check.sh --dry-run --large
}

# Two pytest-xdist workers, a test file each at a time (a file's fixtures stay in one process):
# on 2 cores the suite waits on process start-ups, rendezvous and SLURM's scheduler, and one
# worker alone left a core idle about half of the time. Every multi-process test picks a free
# port (accel_state.testing.free_port), so two files' launches never share one.
run_tests() {
    step "tests"
    ACCEL_SKIP_PASSED="$passed" PYTHONPATH="$PWD/tools/pytest_plugins" \
        uv run --no-sync pytest -p accel_run_once packages tests -q -p no:cacheprovider \
        -n 2 --dist loadfile --durations=25 --ignore=tests/docs --ignore=tests/gpu  # tests/docs ran in the docs step, tests/gpu in the GPU check's
}

# The reference's own CPU test suite (its sdist's tests/), with its imports served by accel: a
# failure not listed in tests/parity/reference_suite/expected_failures.txt fails, and so does a
# listed test that passes (the list only shrinks).
run_reference_suite() {
    step "the reference's own test suite on accel"
    uv run --no-sync python tests/parity/reference_suite/run.py
}

# The clients' own test suites, each run on the reference and on accel at once (one process a
# side, in this environment): PEFT's tests that reach accelerate, from its sdist on PyPI (cached
# in ~/.cache/accel/client-suites). A test passing on the reference and not on accel, unless
# listed in tools/client_suites_expected.txt, fails (benchmarks/results/client-suites.md).
run_client_suites() {
    step "the clients' own test suites, reference and accel side by side"
    uv run --no-sync python tools/client_suites.py
}

# torch_xla pins torch 2.9: its tests run in their own cached venv (skipped, exit 0, when PyPI
# cannot be reached).
run_xla() {
    step "XLA on CPU (own venv)"
    uv run --no-sync python tools/xla_env.py
}

if [ "${1:-}" = "--list" ]; then
    printf '%s\n' "${STEPS[@]}"
    exit 0
fi
if [ "$#" = 0 ]; then selected=("${STEPS[@]}"); else selected=("$@"); fi
for name in "${selected[@]}"; do
    if ! declare -F "run_$name" >/dev/null; then
        echo "tools/test.sh: no step '$name'; the steps are: ${STEPS[*]}" >&2
        exit 2
    fi
done

if ! command -v uv >/dev/null 2>&1; then  # installed from PyPI, PEP 668-safe (tools/uv.sh says how)
    uv_bin="$(bash tools/uv.sh --path)"
    export PATH="$(dirname "$uv_bin"):$PATH"
fi
export UV_LINK_MODE="${UV_LINK_MODE:-hardlink}"
# DeepSpeed compiles its CPU ops on first use; keep them between runs.
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$HOME/.cache/accel/torch_extensions}"

# Tests that passed with their package alone (minimal step), left out by the tests step.
passed="$(mktemp)"
trap 'rm -f "$passed"' EXIT

timings=()
run_steps() {
    local name started
    for name in "$@"; do
        started=$SECONDS
        "run_$name"
        timings+=("$(printf '%-16s %5d s' "$name" $((SECONDS - started)))")
    done
}

sync_workspace() {
    step "sync the workspace (locked)"
    uv sync --locked --all-packages --group bench --group docs --group release --group ecosystem --group fuzz --quiet  # bench: the reference library, for the differential tests in tests/parity; docs: mkdocs; release: towncrier; ecosystem: transformers, peft, trl, diffusers for tests/ecosystem; fuzz: atheris
}

if [ "$#" != 0 ]; then
    sync_workspace
    run_steps "${selected[@]}"
else
    LANE_DIR="$(mktemp -d)"
    trap 'rm -f "$passed"; rm -rf "$LANE_DIR"' EXIT
    # The second lane starts with the system packages (apt) while the workspace syncs; its other
    # steps run the workspace's Python, so they wait for the sync.
    (
        set +e
        for name in "${BESIDE[@]}"; do
            if [ "$name" != cluster ]; then
                while [ ! -e "$LANE_DIR/synced" ]; do
                    [ -e "$LANE_DIR/sync-failed" ] && exit 1
                    sleep 1
                done
            fi
            started=$SECONDS
            (set -e; "run_$name") >"$LANE_DIR/$name.log" 2>&1
            status=$?
            printf '%s %s %s\n' "$name" "$status" $((SECONDS - started)) >>"$LANE_DIR/status"
            touch "$LANE_DIR/$name.done"
            [ "$status" = 0 ] || exit "$status"
        done
    ) &
    lane=$!
    # A failing step ends the script (set -e): the second lane goes with it.
    trap 'kill "$lane" 2>/dev/null || true; rm -f "$passed"; rm -rf "$LANE_DIR"' EXIT
    started=$SECONDS
    sync_workspace || { touch "$LANE_DIR/sync-failed"; exit 1; }
    touch "$LANE_DIR/synced"
    timings+=("$(printf '%-16s %5d s' sync $((SECONDS - started)))")
    step "beside the next steps, in a second lane: ${BESIDE[*]} (their output follows when they end)"
    run_steps "${FIRST[@]}"
    lane_status=0
    wait "$lane" || lane_status=$?
    for name in "${BESIDE[@]}"; do
        if [ -e "$LANE_DIR/$name.log" ]; then cat "$LANE_DIR/$name.log"; fi
    done
    while read -r name status took; do
        timings+=("$(printf '%-16s %5d s (second lane)' "$name" "$took")")
        [ "$status" = 0 ] || { echo "step $name failed (exit $status)" >&2; lane_status=1; }
    done <"$LANE_DIR/status"
    [ "$lane_status" = 0 ] || exit 1
    run_steps "${AFTER[@]}"
fi
step "time per step"
printf '%s\n' "${timings[@]}"
echo "total: $SECONDS s"
