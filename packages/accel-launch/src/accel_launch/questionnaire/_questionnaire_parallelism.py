"""``accel config``: the parallelism layout section (``parallelism_config``), asked after the
FSDP2 questions once the number of processes is known."""

from __future__ import annotations

from collections.abc import Callable

from accel_state import environment_variables as env

from ..configs._engine_configs import ParallelismSection
from ._prompts import Prompter, whole

CP_COMM_STRATEGIES = tuple(env.ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY.choices)
CP_BACKENDS = tuple(env.ACCEL_PARALLELISM_CONFIG_CP_BACKEND.choices)


def _fits(processes: int, before: int, last: bool) -> Callable[[int], str | None]:
    """The check of one size: >= 1, and with the sizes before it, a divisor of the processes
    (the product itself for the last size)."""

    def check(size: int) -> str | None:
        product = before * size
        if size < 1:
            return f"a size is >= 1 (1: this kind of parallelism is off), got {size}"
        if last and product != processes:
            return (
                f"the sizes must multiply to the {processes} processes of the run; got "
                f"{before} (the sizes before) x {size} = {product}. Answer {processes // before}"
            )
        if processes % product:
            return (
                f"the sizes must multiply to the {processes} processes of the run; got {size}, "
                f"and the product so far, {product}, does not divide {processes}. Answer a "
                f"divisor of {processes // before}"
            )
        return None

    return check


def ask_parallelism(ask: Prompter, processes: int) -> ParallelismSection:
    """Ask for a ``ParallelismConfig`` layout over ``processes`` processes: data-parallel
    replicas, FSDP shard size, tensor and context parallel sizes (their product is the number
    of processes), and how context-parallel processes exchange keys and values.

    Args:
        ask: Where questions go and answers come from.
        processes: The run's number of processes (over all machines).
    """
    layout = ParallelismSection()
    if not ask.yes_no(
        "Do you want to set a parallelism layout (ParallelismConfig: replicas x shards x "
        "tensor x context parallel)?",
        False,
    ):
        return layout
    questions = (
        ("dp_replicate", "How many replicas of the model (data parallel replicate size)?"),
        ("dp_shard", "Over how many processes is one replica sharded (FSDP shard size)?"),
        ("tp", "Over how many processes is each layer split (tensor parallel size)?"),
        ("cp", "Over how many processes is each sequence split (context parallel size)?"),
    )
    before = 1
    for index, (name, question) in enumerate(questions):
        last = index == len(questions) - 1
        default = 1 if name == "dp_replicate" else processes // before
        size = ask.ask(question, default, whole, _fits(processes, before, last))
        setattr(layout, f"parallelism_config_{name}_size", size)
        before *= size
    if (layout.parallelism_config_cp_size or 1) > 1:
        layout.parallelism_config_cp_comm_strategy = CP_COMM_STRATEGIES[
            ask.choose(
                "How do context-parallel processes exchange keys and values?",
                CP_COMM_STRATEGIES,
            )
        ]
        if len(CP_BACKENDS) > 1:
            layout.parallelism_config_cp_backend = CP_BACKENDS[
                ask.choose("Which context parallel implementation?", CP_BACKENDS)
            ]
    layout.validate("parallelism_config")
    return layout


__all__ = ["CP_BACKENDS", "CP_COMM_STRATEGIES", "ask_parallelism"]
