"""Print what this process received from the launcher, one JSON line per process."""

import json
import os
import sys

keys = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ACCEL_MIXED_PRECISION",
    "ACCEL_USE_CPU",
    "ACCEL_DEBUG_MODE",
    "ACCEL_DISTRIBUTED_TYPE",
    "ACCEL_DYNAMO_BACKEND",
    "OMP_NUM_THREADS",
]
from accel_state import PartialState  # noqa: E402

state = PartialState()
record = {k: os.environ.get(k) for k in keys}
record.update({k: v for k, v in os.environ.items() if k.startswith("ACCEL_")})
record["restart"] = os.environ.get("TORCHELASTIC_RESTART_COUNT")
record["num_processes"] = state.num_processes
record["process_index"] = state.process_index
record["argv"] = sys.argv[1:]
sys.stdout.write("REPORT " + json.dumps(record) + "\n")
sys.stdout.flush()
