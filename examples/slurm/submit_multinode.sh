#!/bin/bash
# Train on several machines: one `accel launch` per machine, each starting the processes of
# its machine. Submit with:
#
#     sbatch submit_multinode.sh                 # the machines and CPUs below
#     sbatch --nodes=4 submit_multinode.sh       # any directive can be overridden
#
# GPUs: add `#SBATCH --gpus-per-node=4`; the launcher then starts one process per GPU.
#SBATCH --job-name=accel-multinode
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --output=%x-%j.out
#SBATCH --time=01:00:00
set -euo pipefail

# Processes per machine: one per GPU when SLURM gave GPUs, else PROCESSES_PER_NODE (CPU).
export PROCESSES_PER_NODE=${SLURM_GPUS_ON_NODE:-${PROCESSES_PER_NODE:-2}}
export SCRIPT=${SCRIPT:-train.py}  # relative to the folder sbatch was called from
export HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export PORT=$((20000 + SLURM_JOB_ID % 10000))  # one port per job, the same on every machine
export NUM_PROCESSES=$((SLURM_NNODES * PROCESSES_PER_NODE))

# Single quotes: SLURM_NODEID is read by each task, on its own machine.
srun --ntasks-per-node=1 bash -c 'accel launch \
    --num_machines "$SLURM_NNODES" \
    --machine_rank "$SLURM_NODEID" \
    --main_process_ip "$HEAD_NODE" \
    --main_process_port "$PORT" \
    --num_processes "$NUM_PROCESSES" \
    "$SCRIPT" "$@"' accel-launch "$@"
