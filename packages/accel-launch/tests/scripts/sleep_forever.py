"""Prints its pid, then sleeps: a job to interrupt. With ``PID_DIR`` set it also writes its pid
to a file there."""

import os
import time

# One write of the whole line: the workers share the launcher's stdout, and a line written in
# two parts (text, then newline, as print does unbuffered) can interleave with another's.
os.write(1, f"PID {os.getpid()}\n".encode())
if os.environ.get("PID_DIR"):
    path = os.path.join(os.environ["PID_DIR"], f"{os.getpid()}.pid")
    with open(path + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
time.sleep(600)
