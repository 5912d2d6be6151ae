"""Run on 2 processes: the logger's main_process_only / in_order, and wait_for_everyone."""

import logging
import sys

from accel_state import PartialState, get_logger, wait_for_everyone

logging.basicConfig(stream=sys.stderr, format="%(message)s", level=logging.INFO)
state = PartialState(cpu=True)
logger = get_logger("checks", log_level="INFO")
logger.info("LOG main only")
logger.info(f"LOG in order {state.process_index}", main_process_only=False, in_order=True)
wait_for_everyone()
sys.stderr.flush()
print(f"rank {state.process_index} OK", flush=True)
