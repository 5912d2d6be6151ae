#!/bin/bash
# One machine, no topology flags: `accel launch` reads the allocation (SLURM_NTASKS, the job
# id for the port) from the batch job. Submit with:
#
#     sbatch --ntasks=2 submit_detected.sh
#
#SBATCH --job-name=accel-detected
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=%x-%j.out
#SBATCH --time=01:00:00
set -euo pipefail
accel launch "${SCRIPT:-train.py}" "$@"
