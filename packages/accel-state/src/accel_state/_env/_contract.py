"""How a variable of the launcher-to-process contract is declared and read.

The declarations themselves live in the public module ``accel_state.environment_variables``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

from .._enums import DistributedType, DynamoBackend, PrecisionType

ShardingStrategy = Literal[
    "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"
]
"""FSDP sharding strategies (their 1-based position is the legacy numeric form)."""
SHARDING_STRATEGIES: Final[tuple[str, ...]] = get_args(ShardingStrategy)
WrapPolicy = Literal["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"]
"""FSDP auto-wrap policies."""
WRAP_POLICIES: Final[tuple[str, ...]] = get_args(WrapPolicy)
BackwardPrefetch = Literal["BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"]
"""FSDP1 backward prefetch modes."""
BACKWARD_PREFETCH: Final[tuple[str, ...]] = get_args(BackwardPrefetch)
StateDictType = Literal["FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"]
"""How FSDP checkpoints are written."""
STATE_DICT_TYPES: Final[tuple[str, ...]] = get_args(StateDictType)
FSDPVersion = Literal[1, 2]
"""1 (``FullyShardedDataParallel``) or 2 (``fully_shard``)."""
FSDP_VERSIONS: Final[tuple[int, ...]] = get_args(FSDPVersion)
OffloadDevice = Literal["none", "cpu", "nvme"]
"""Where DeepSpeed offloads optimizer states or parameters."""
OFFLOAD_DEVICES: Final[tuple[str, ...]] = get_args(OffloadDevice)
ZeroStage = Literal[0, 1, 2, 3]
"""DeepSpeed ZeRO stages."""
ZERO_STAGES: Final[tuple[int, ...]] = get_args(ZeroStage)
MIXED_PRECISIONS: Final[tuple[str, ...]] = tuple(PrecisionType.list())
"""Mixed precision modes (the values of ``PrecisionType``)."""
DISTRIBUTED_TYPES: Final[tuple[str, ...]] = tuple(DistributedType.list())
"""Distributed types (the values of ``DistributedType``)."""
DYNAMO_BACKENDS: Final[tuple[str, ...]] = tuple(DynamoBackend.list())
"""``torch.compile`` backends (the values of ``DynamoBackend``)."""

MpiFlavour = Literal["openmpi", "mpich"]
"""Which ``mpirun`` command line the launcher builds."""
MPI_FLAVOURS: Final[tuple[str, ...]] = get_args(MpiFlavour)

Kind = Literal["bool", "int", "float", "text", "choice"]
"""How the text of a variable is read."""

_TRUE = ("1", "true", "yes", "y", "on")
_FALSE = ("0", "false", "no", "n", "off")


class EnvironmentVariable(str):
    """The name of one variable of the contract, with how it is read.

    The value is the name itself, so the constant goes wherever a name goes
    (``os.environ[ACCEL_USE_CPU]``).
    """

    kind: Kind
    """How the text is read (`Kind`)."""
    choices: tuple[Any, ...]
    """The vocabulary of a ``choice`` variable (empty otherwise)."""
    fallbacks: tuple[str, ...]
    """The reference library's names, read in order when this one is unset."""
    written_by: str
    """Who sets it: a launcher option, or the user."""
    read_by: str
    """Which code reads it."""
    minimum: float | None
    """Smallest valid number of an ``int`` / ``float`` variable."""
    above_minimum: bool
    """The number must be greater than ``minimum`` (``minimum`` itself is refused)."""
    numbered: bool
    """A ``choice`` variable also takes the 1-based position of a choice (legacy FSDP form)."""
    maximum: float | None
    """Largest valid number (a duration: the longest wait the timers it feeds can hold)."""

    def __new__(
        cls,
        name: str,
        kind: Kind,
        *,
        written_by: str,
        read_by: str,
        fallbacks: tuple[str, ...] = (),
        choices: tuple[Any, ...] = (),
        minimum: float | None = None,
        above_minimum: bool = False,
        numbered: bool = False,
        maximum: float | None = None,
    ) -> EnvironmentVariable:
        """Declare a variable (only this module declares them)."""
        self = super().__new__(cls, name)
        self.kind = kind
        self.choices = choices
        self.fallbacks = fallbacks
        self.written_by = written_by
        self.read_by = read_by
        self.minimum = minimum
        self.above_minimum = above_minimum
        self.numbered = numbered
        self.maximum = maximum
        return self

    def vocabulary(self) -> str:
        """The valid values, in words (for errors and the docs table)."""
        if self.kind == "bool":
            return "1/0, true/false, yes/no, on/off"
        if self.kind == "choice":
            numbers = " (or 1-based number)" if self.numbered else ""
            return ", ".join(str(choice) for choice in self.choices) + numbers
        if self.kind == "text":
            return "any text"
        word = "an integer" if self.kind == "int" else "a finite number"
        if self.minimum is None:
            return word
        return f"{word} {'>' if self.above_minimum else '>='} {self.minimum:g}"

    def parse(self, raw: str, source: str | None = None) -> Any:
        """Read ``raw`` as this variable's type.

        Args:
            raw: The text of the variable.
            source: The name actually read (a fallback name), for the error message.

        Raises:
            ValueError: naming the variable, the value and the vocabulary.
        """
        text = raw.strip()
        value: Any = text
        if self.kind == "bool" and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        if self.kind in ("int", "float"):
            try:
                value = int(text) if self.kind == "int" else float(text)
            except ValueError:
                value = None
            if value is not None and (
                (self.kind == "float" and not math.isfinite(value))
                or (self.minimum is not None and value < self.minimum)
                or (self.above_minimum and value == self.minimum)
            ):
                value = None
            if value is not None and self.maximum is not None and value > self.maximum:
                raise ValueError(
                    f"environment variable {source or str(self)} must be at most "
                    f"{self.maximum:g} seconds, the longest wait the timers it sets can hold; "
                    f"got {raw!r}. Set it to a number of seconds up to {self.maximum:g}, or "
                    "unset it."
                )
            if value is not None and (not self.choices or value in self.choices):
                return value
        elif self.kind == "choice":
            for choice in self.choices:
                if text.lower() == str(choice).lower():
                    return choice
            if self.numbered and text.isdecimal() and 1 <= int(text) <= len(self.choices):
                return self.choices[int(text) - 1]
        elif self.kind == "text":
            return text
        rule = self._rule()
        raise ValueError(
            f"environment variable {source or str(self)} must be {rule}; got {raw!r}. Set it to "
            f"{rule}, or unset it."
        )

    def _rule(self) -> str:
        if self.choices:
            numbers = f" (or its number, 1 to {len(self.choices)})" if self.numbered else ""
            return f"one of {', '.join(str(choice) for choice in self.choices)}{numbers}"
        return {"bool": "a boolean (1/0, true/false, yes/no, on/off)"}.get(
            self.kind, self.vocabulary()
        )


def read_env(variable: str, default: Any = None, environ: Mapping[str, str] | None = None) -> Any:
    """Read a declared variable as its type: its ``ACCEL_*`` name first, then its reference fallbacks.

    An unset or empty variable counts as unset.

    Args:
        variable: One of the constants of this module (or its name).
        default: Returned when neither the variable nor a fallback is set.
        environ: Where to read (default ``os.environ``).

    Returns:
        A ``bool``, ``int``, ``float`` or ``str`` as the variable declares, or ``default``.

    Raises:
        KeyError: for a name that is not declared here.
        ValueError: for a value outside the variable's vocabulary (naming variable, value and
            vocabulary).
    """
    spec = declared(variable)
    source = os.environ if environ is None else environ
    for name in (str(spec), *spec.fallbacks):
        raw = source.get(name)
        if raw is not None and raw.strip():
            return spec.parse(raw, name)
    return default


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Read every declared variable that is set, so that a bad value fails now, on every
    process, rather than when the code that uses it first runs.

    ``PartialState()`` (and so ``Accelerator()``) calls it when the state is created.

    Args:
        environ: Where to read (default ``os.environ``).

    Raises:
        ValueError: for the first variable whose value is outside its vocabulary, naming the
            variable, the value, the rule and the fix.
    """
    from ..environment_variables import VARIABLES

    for spec in VARIABLES.values():
        read_env(spec, None, environ)


def is_set(variable: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the variable or one of its fallbacks holds a non-empty value."""
    spec = declared(variable)
    source = os.environ if environ is None else environ
    return any((source.get(name) or "").strip() for name in (str(spec), *spec.fallbacks))


def declared(name: str) -> EnvironmentVariable:
    """The declaration of ``name``.

    Raises:
        KeyError: when ``name`` is not a variable of the contract.
    """
    from ..environment_variables import VARIABLES

    spec = VARIABLES.get(str(name))
    if spec is None:
        raise KeyError(
            f"{name!r} is not a declared accel environment variable. Declare it in "
            "accel_state.environment_variables, or use one of: " + ", ".join(sorted(VARIABLES))
        )
    return spec


def env_text(value: Any) -> str:
    """How a value is written into a variable (booleans as 1/0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
