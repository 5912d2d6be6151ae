#!/usr/bin/env bash
# uv, installed first when this machine has none: `bash tools/uv.sh run ...` is `uv run ...`.
#
# Where uv is missing it is installed from PyPI with the Python on PATH (PYTHON=... picks
# another), in the first way that works:
#   1. `python3 -m pip install uv`: a virtual environment, conda, pyenv or any Python that lets
#      pip install;
#   2. a Python that refuses (PEP 668: "externally-managed-environment", the system Python of
#      Debian, Ubuntu, Fedora ...): into a virtual environment of its own,
#      ~/.cache/accel/uv-venv (the system's packages are not touched);
#   3. where that Python has no venv module (Debian without python3-venv): `pipx install uv`;
#   4. else `pip install --user --break-system-packages uv`: the user's site-packages only,
#      never the system's.
# Usage: bash tools/uv.sh UV-ARGUMENTS...     (tools/test.sh installs uv this way too)
#        bash tools/uv.sh --path              print the uv it runs, installing it when missing
set -euo pipefail

PYTHON="${PYTHON:-python3}"
VENV="${ACCEL_UV_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/accel/uv-venv}"
SPEC="uv>=0.8"

say() { echo "tools/uv.sh: $*" >&2; }

# The uv this script would run without installing anything, or nothing.
found_uv() {
    local candidate
    for candidate in "$(command -v uv 2>/dev/null || true)" "$VENV/bin/uv" "$HOME/.local/bin/uv"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    # installed by pip into a user or environment site-packages whose bin is not on PATH
    "$PYTHON" -c 'import uv, sys; sys.stdout.write(uv.find_uv_bin())' 2>/dev/null || true
}

install_uv() {
    local log
    log="$(mktemp)"
    if "$PYTHON" -m pip install --quiet "$SPEC" 2>"$log"; then
        rm -f "$log"
        return 0
    fi
    if ! grep -q "externally-managed-environment" "$log"; then
        cat "$log" >&2
        rm -f "$log"
        say "pip could not install uv with $PYTHON (above); install uv another way: https://docs.astral.sh/uv/"
        return 1
    fi
    rm -f "$log"
    say "$PYTHON is managed by the system (PEP 668): installing uv into $VENV"
    if "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/python" -m pip install --quiet "$SPEC"; then
        return 0
    fi
    rm -rf "$VENV"
    if command -v pipx >/dev/null 2>&1; then
        say "no venv module for $PYTHON (Debian: apt install python3-venv): installing uv with pipx"
        pipx install --quiet uv && return 0
    fi
    say "no venv module and no pipx: installing uv into the user's site-packages only (--user)"
    "$PYTHON" -m pip install --quiet --user --break-system-packages "$SPEC"
}

uv_bin="$(found_uv)"
if [ -z "$uv_bin" ]; then
    install_uv
    uv_bin="$(found_uv)"
fi
if [ -z "$uv_bin" ]; then
    say "uv was installed but cannot be found; add ~/.local/bin to PATH, or install uv: https://docs.astral.sh/uv/"
    exit 1
fi
if [ "${1:-}" = "--path" ]; then
    echo "$uv_bin"
    exit 0
fi
exec "$uv_bin" "$@"
