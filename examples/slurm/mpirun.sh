#!/bin/bash
# Two ways to start the example on 2 processes with Open MPI (apt-get install openmpi-bin):
#
#     bash mpirun.sh direct     # mpirun starts python; each rank reads OMPI_COMM_WORLD_*
#     bash mpirun.sh hostfile   # accel launch starts mpirun on the hosts of a hostfile
#
# As root, Open MPI also needs --allow-run-as-root; --oversubscribe lets 2 ranks share fewer
# cores. Extra flags for mpirun: MPIRUN_FLAGS="..." bash mpirun.sh direct
set -euo pipefail
cd "$(dirname "$0")"
NUM_PROCESSES=${NUM_PROCESSES:-2}
FLAGS=(--oversubscribe --mca btl self,tcp)
if [ "$(id -u)" = 0 ]; then FLAGS+=(--allow-run-as-root); fi
# The ranks meet at MASTER_ADDR:MASTER_PORT (rank 0's machine).
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
export MASTER_PORT=${MASTER_PORT:-29500}

case "${1:-direct}" in
direct)
    shift || true
    # shellcheck disable=SC2086
    mpirun -np "$NUM_PROCESSES" "${FLAGS[@]}" ${MPIRUN_FLAGS:-} -x MASTER_ADDR -x MASTER_PORT \
        python train.py "$@"
    ;;
hostfile)
    shift
    HOSTFILE=${HOSTFILE:-$(mktemp)}
    [ -s "$HOSTFILE" ] || echo "localhost slots=$NUM_PROCESSES" >"$HOSTFILE"
    # accel launch adds -x for its own variables; these reach Open MPI through the environment.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,tcp
    accel launch --mpirun_hostfile "$HOSTFILE" --num_processes "$NUM_PROCESSES" \
        --main_process_port "$MASTER_PORT" train.py "$@"
    ;;
*)
    echo "usage: bash mpirun.sh [direct|hostfile] [script arguments]; got '$1'" >&2
    exit 2
    ;;
esac
