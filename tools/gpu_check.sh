#!/usr/bin/env bash
# The GPU check: every test marked `cuda`, the checks of tests/gpu, the quick tour on the GPU
# and the GPU benchmarks (accel, the reference and the floor side by side), in one command of at
# most 330 s, and the large benchmarks in a second (--large) of at most 300 s; each step has its
# own timeout, so one hang costs one step.
#
#   bash tools/gpu_check.sh --prepare   # here, with network: carried wheels into build/gpu-wheels
#   bash tools/gpu_check.sh             # on the GPU machine (results under $OUT)
#   bash tools/gpu_check.sh --large     # the second call: a 7B-class model served, FP8 training
#   bash tools/gpu_check.sh --dry-run   # on a CPU: the same steps, CUDA parts skipped and named
#                                       # (with --large: the large benchmarks at tiny sizes)
#
# The GPU machine installs nothing from the network: the packages' src folders go on PYTHONPATH
# (tools/gpu_checks/setup_env.py writes their metadata and commands), and the wheels of
# dependencies missing there come from build/gpu-wheels. docs/gpu-check.md has the whole recipe.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
MODE=gpu
LARGE=0  # --large: the second call, the large benchmarks (a 7B-class model, FP8 training)
for arg in "$@"; do
    case "$arg" in
        --dry-run) MODE=dry ;;
        --prepare) MODE=prepare ;;
        --large) LARGE=1 ;;
        *) echo "usage: tools/gpu_check.sh [--large] [--dry-run | --prepare]; got '$arg'" >&2; exit 2 ;;
    esac
done

WHEELS="$ROOT/build/gpu-wheels"
if [ "$MODE" = prepare ]; then
    # Versions: torchao 0.17 is the release built against torch 2.11 (the GPU machine's); its
    # pure-Python wheel holds the FP8 training code. bitsandbytes' one x86-64 wheel holds its
    # CUDA 12 and 13 kernels. zlib-ng is the one runtime dependency of accel missing there.
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64
          --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${plat[@]}" -d "$WHEELS" \
        "zlib-ng==1.1.0" "torchao==0.17.0" "bitsandbytes==0.50.2" || exit 1
    ls -l "$WHEELS"
    du -sh "$WHEELS"
    exit 0
fi

if [ "$MODE" = dry ]; then
    PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
    OUT="${OUT:-$ROOT/build/gpu-check-dry}"
    BUDGET=720  # generous: on a busy 2-core CI machine importing torch alone can take 20 s
    export CUDA_VISIBLE_DEVICES=""  # a dry run never touches a GPU, even on a GPU machine
else
    PYTHON="${PYTHON:-python3}"
    OUT="${OUT:-$ROOT/build/gpu-check}"
    BUDGET=330  # with the --large call's 300 s, both fit in about 11 minutes with start-up
fi
if [ "$LARGE" = 1 ]; then
    OUT="$OUT-large"
    [ "$MODE" = gpu ] && BUDGET=300
fi
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1 ACCEL_BIGMODEL_QUIET=1
export GPU_CHECK_OUT="$OUT"  # tests/gpu/test_client_paths.py writes its rows there
START=$SECONDS
: >"$OUT/steps.tsv"
FAILED=()

# step NAME SECONDS COMMAND...: runs COMMAND under min(SECONDS, what is left of the budget).
step() {
    local name="$1" limit="$2"
    shift 2
    local left=$((BUDGET - (SECONDS - START)))
    [ "$limit" -gt "$left" ] && limit=$left
    printf '\n== %s (timeout %s s)\n' "$name" "$limit"
    if [ "$limit" -lt 5 ]; then
        echo "SKIPPED: the budget of $BUDGET s is spent"
        printf '%s\tskipped: budget spent\t0\n' "$name" >>"$OUT/steps.tsv"
        FAILED+=("$name")
        return
    fi
    local began=$SECONDS status
    timeout -s INT -k 20 "$limit" "$@"
    status=$?
    local took=$((SECONDS - began)) text=ok
    if [ "$status" = 124 ]; then text="timed out after $limit s"; FAILED+=("$name")
    elif [ "$status" != 0 ]; then text="failed (exit $status)"; FAILED+=("$name"); fi
    printf '%s\t%s\t%s\n' "$name" "$text" "$took" >>"$OUT/steps.tsv"
}

{
echo "GPU check ($MODE) with $PYTHON"
command -v nvidia-smi >/dev/null && [ "$MODE" = gpu ] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
# The working tree's packages, importable without an install (and the carried wheels).
SETUP=("$PYTHON" tools/gpu_checks/setup_env.py "$WORK/site" "$WORK/bin")
[ "$MODE" = gpu ] && SETUP+=("$WHEELS")
if ! PYPATH="$("${SETUP[@]}")"; then echo "setting up accel from the working tree failed" >&2; exit 1; fi
export PYTHONPATH="$PYPATH${PYTHONPATH:+:$PYTHONPATH}" PATH="$WORK/bin:$PATH"

step "dependencies" 120 "$PYTHON" tools/gpu_checks/deps.py --json "$OUT/deps.json"

if [ "$LARGE" = 1 ]; then
    LARGE_BENCH=("$PYTHON" tools/gpu_checks/bench_large.py --json "$OUT/large.json")
    [ "$MODE" = dry ] && LARGE_BENCH+=(--dry-run)
    step "large benchmarks" "$BUDGET" "${LARGE_BENCH[@]}" --budget $((BUDGET - (SECONDS - START) - 20))
    REPORT=("$PYTHON" tools/gpu_checks/report.py "$OUT" --large)
    [ "$MODE" = dry ] && REPORT+=(--dry-run)
    "${REPORT[@]}"
    rm -f "$OUT/steps.tsv" "$OUT/deps.json"
    echo "total: $((SECONDS - START)) s of a $BUDGET s budget; results in $OUT"
    if [ "${#FAILED[@]}" -gt 0 ]; then echo "FAILED: ${FAILED[*]}"; exit 1; fi
    echo "every step passed"
    exit 0
fi

# Every test file holding a test marked `cuda`, and tests/gpu (half of it runs on the CPU too).
mapfile -t CUDA_FILES < <(grep -rlE "mark\.cuda\b" --include='test_*.py' packages tests | grep -v '^tests/gpu/' | sort)
echo "test files with tests marked cuda: ${CUDA_FILES[*]}"
TESTS_LIMIT=300
[ "$MODE" = dry ] && TESTS_LIMIT=420  # the clients' paths start four interpreters importing transformers
step "tests (marked cuda, and tests/gpu)" "$TESTS_LIMIT" "$PYTHON" -m pytest -p no:cacheprovider -q -rsfE \
    -m "cuda or gpu_check" --timeout 150 --junitxml="$OUT/junit.xml" -o junit_family=xunit1 \
    "${CUDA_FILES[@]}" tests/gpu

if [ "$MODE" = gpu ]; then
    step "quick tour on cuda (bf16)" 60 "$PYTHON" -c "import runpy, sys, torch
assert torch.cuda.is_available(), 'no CUDA device'
sys.argv = ['quicktour.py', '--mixed_precision', 'bf16']
runpy.run_path('examples/quicktour.py', run_name='__main__')
from accel import PartialState
assert PartialState().device.type == 'cuda', PartialState().device
print('quick tour ran on', PartialState().device)"
else
    echo; echo "== quick tour on cuda"; echo "SKIPPED: no CUDA device (dry run)"
    printf 'quick tour on cuda\tskipped: no CUDA device (dry run)\t0\n' >>"$OUT/steps.tsv"
fi

BENCH=("$PYTHON" tools/gpu_checks/bench_gpu.py --json "$OUT/bench.json")
[ "$MODE" = dry ] && BENCH+=(--dry-run)
step "benchmarks" 330 "${BENCH[@]}" --budget $((BUDGET - (SECONDS - START) - 25))

REPORT=("$PYTHON" tools/gpu_checks/report.py "$OUT")
[ "$MODE" = dry ] && REPORT+=(--dry-run)
"${REPORT[@]}"
rm -f "$OUT/steps.tsv" "$OUT/deps.json"
echo "total: $((SECONDS - START)) s of a $BUDGET s budget; results in $OUT"
if [ "${#FAILED[@]}" -gt 0 ]; then echo "FAILED: ${FAILED[*]}"; exit 1; fi
echo "every step passed"
} 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
