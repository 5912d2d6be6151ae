"""Prints its pid, then sleeps: a job to interrupt. With ``PID_DIR`` set it also writes its pid
to a file there."""

import os
import time

print(f"PID {os.getpid()}", flush=True)
if os.environ.get("PID_DIR"):
    path = os.path.join(os.environ["PID_DIR"], f"{os.getpid()}.pid")
    with open(path + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
time.sleep(600)
