"""Prints its pid, then sleeps: a job to interrupt."""

import os
import time

print(f"PID {os.getpid()}", flush=True)
time.sleep(600)
