"""Run on 2 processes: tqdm draws on the local main process only, unless told otherwise."""

import io

from accel_state import PartialState, tqdm

state = PartialState(cpu=True)
rank = state.local_process_index
out = io.StringIO()
bar = tqdm(range(5), file=out, desc="main-only")
assert bar.disable is (rank != 0), (rank, bar.disable)
assert list(bar) == [0, 1, 2, 3, 4], rank
assert ("main-only" in out.getvalue()) is (rank == 0), (rank, out.getvalue())
everywhere = tqdm(range(3), main_process_only=False, file=io.StringIO())
assert everywhere.disable is False
assert list(everywhere) == [0, 1, 2]
hidden = tqdm(range(3), main_process_only=False, disable=True, file=io.StringIO())
assert hidden.disable is True
print(f"rank {state.process_index} OK", flush=True)
