"""``PartialState``: the process's view of the job, shared by every object that asks for it."""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed as dist

from .. import environment_variables as env
from .._enums import DistributedType
from .._env._launcher import detect_world
from .._machine._families import default_device, device_for_process, distributed_family
from .._machine._support import unsupported_distributed_type
from .._machine._xla_runtime import torch_xla_usable, xla_rendezvous, xla_replica
from ..hang_watchdog import collective
from ._process_group import init_default_group
from ._split import split_inputs
from ._teardown import register_teardown, teardown_process_group

F = TypeVar("F", bound=Callable[..., Any])


def is_debug_mode() -> bool:
    """Whether debug checks are on (``ACCEL_DEBUG_MODE``, else ``ACCELERATE_DEBUG_MODE``)."""
    return bool(env.read_env(env.ACCEL_DEBUG_MODE, False))


def _refuse_unsupported(distributed_type: DistributedType, family: str) -> None:
    message = unsupported_distributed_type(
        distributed_type.value, f"{distributed_type.value} (torch.{family} devices were detected)"
    )
    if message is not None:
        raise NotImplementedError(message)


def _device_from_environment(text: str, cpu: bool) -> torch.device:
    """The device named by ``ACCEL_TORCH_DEVICE`` (or ``ACCELERATE_TORCH_DEVICE``)."""
    names = (str(env.ACCEL_TORCH_DEVICE), *env.ACCEL_TORCH_DEVICE.fallbacks)
    name = next(n for n in names if os.environ.get(n, "").strip())
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ValueError(
            f"environment variable {name} must name a torch device; got {text!r}. Set it to a "
            "device such as 'cuda:1' or 'cpu', or unset it to let the state pick one."
        ) from None
    if cpu and device.type != "cpu":
        raise ValueError(
            f"The CPU was asked for (cpu=True or ACCEL_USE_CPU=1), but environment variable "
            f"{name} names {text!r}. Unset one of the two."
        )
    return device


def join_shared_state(self: Any, state: dict[str, Any]) -> None:
    """``__setstate__`` of the shared-state classes: an unpickled state is a view of this
    process's shared state, like every other instance; a process whose state is not set up yet
    takes the pickled values."""
    shared = type(self)._shared_state
    if not shared:
        shared.update(state)
    self.__dict__ = shared


class PartialState:
    """Singleton-like view of the distributed environment of this process.

    Every instance shares one state: the first one reads the launcher's environment (torchrun,
    MPI or SLURM variables), starts the process group (gloo on CPU, nccl on CUDA) and later
    instances just read it. Where ``torch_xla`` is usable (and ``cpu`` is not set) the state is
    an XLA replica: ``distributed_type`` XLA, an ``xla`` device, torch_xla's world size and
    ordinal. A 2-process torchrun on a CPU-only machine is a 2-process gloo run
    with no extra argument.

    ``ACCEL_TORCH_DEVICE`` (or the reference's ``ACCELERATE_TORCH_DEVICE``), when set, names
    the device instead of the one picked here.

    Args:
        cpu: Force the CPU even when an accelerator is present (also ``ACCEL_USE_CPU=1``).
        **kwargs: Passed to ``torch.distributed.init_process_group`` (``backend``,
            ``init_method``, ``timeout`` as a ``datetime.timedelta`` ...).
    """

    _shared_state: dict[str, Any] = {}
    device: torch.device
    backend: str | None
    distributed_type: DistributedType
    __setstate__ = join_shared_state

    def __init__(self, cpu: bool = False, **kwargs: Any) -> None:
        self.__dict__ = self._shared_state
        if self.initialized:
            if cpu and self.device.type != "cpu":
                warnings.warn(
                    "PartialState(cpu=True) was called after the state was created on "
                    f"{self.device}; the existing state is kept. Create it with cpu=True first.",
                    stacklevel=2,
                )
            return
        # Every variable of the contract is read now, on every process: a bad value fails
        # here rather than at the first call that uses it (a save_state after training).
        env.check_environment()
        cpu = cpu or bool(env.read_env(env.ACCEL_USE_CPU, False))
        world = detect_world()
        self.debug = is_debug_mode()
        self.fork_launched = bool(env.read_env(env.ACCEL_FORK_LAUNCHED, False))
        """Whether the processes were forked from one parent (``ACCEL_FORK_LAUNCHED``)."""
        self._cpu = cpu
        self.launcher = world.launcher
        backend = kwargs.pop("backend", None)
        if not cpu and torch_xla_usable():
            # torch_xla owns the replicas (PJRT): no torch.distributed group of ours.
            replica = xla_replica()
            self.backend = "xla"
            self.num_processes = replica.num_processes
            self.process_index = replica.process_index
            self.local_process_index = replica.local_process_index
            self.num_processes_per_node = replica.num_processes_per_node
            self.distributed_type = DistributedType.XLA
            self.device = replica.device
        elif world.world_size > 1 or dist.is_initialized():
            family = distributed_family(cpu)
            _refuse_unsupported(family.distributed_type, family.device)
            if not dist.is_initialized():
                backend = backend or family.backend
                if world.master_addr is not None:
                    os.environ.setdefault("MASTER_ADDR", world.master_addr)
                if world.master_port is not None:
                    os.environ.setdefault("MASTER_PORT", str(world.master_port))
                if isinstance(kwargs.get("timeout"), (int, float)):
                    kwargs["timeout"] = datetime.timedelta(seconds=kwargs["timeout"])
                kwargs = {k: v for k, v in kwargs.items() if v is not None}
                init_default_group(backend, world, kwargs)
                register_teardown()
            self.backend = str(dist.get_backend())
            self.num_processes = dist.get_world_size()
            self.process_index = dist.get_rank()
            self.local_process_index = world.local_rank
            self.num_processes_per_node = world.local_world_size
            self.distributed_type = family.distributed_type
            self.device = device_for_process(family.device, self.local_process_index)
        else:
            self.backend = None
            self.num_processes = 1
            self.process_index = 0
            self.local_process_index = 0
            self.num_processes_per_node = 1
            self.distributed_type = DistributedType.NO
            self.device = default_device(cpu)
            if self.device.type == "mps":
                os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"
        chosen = env.read_env(env.ACCEL_TORCH_DEVICE)
        if chosen is not None:
            self.device = _device_from_environment(chosen, cpu)
        self._is_initialized = True

    # ----------------------------------------------------------------- properties
    @property
    def initialized(self) -> bool:
        """Whether the shared state has been created in this process."""
        return self._shared_state.get("_is_initialized", False)

    @property
    def default_device(self) -> torch.device:
        """The device this process would use without ``cpu=True``: MPS, else the first
        accelerator family present, else the CPU (the device type only, no index)."""
        return default_device(cpu=False)

    @property
    def use_distributed(self) -> bool:
        """Whether more than one process takes part."""
        return self.num_processes > 1

    @property
    def is_main_process(self) -> bool:
        """Whether this is the process of global index 0."""
        return self.process_index == 0

    @property
    def is_local_main_process(self) -> bool:
        """Whether this is the first process of its machine."""
        return self.local_process_index == 0

    @property
    def is_last_process(self) -> bool:
        """Whether this is the process of the highest global index."""
        return self.process_index == self.num_processes - 1

    @property
    def num_machines(self) -> int:
        """Number of machines (worlds with the same local world size on every node)."""
        return max(1, self.num_processes // max(1, self.num_processes_per_node))

    def __repr__(self) -> str:
        return (
            f"Distributed environment: {self.distributed_type}"
            f"{('  Backend: ' + self.backend) if self.backend else ''}\n"
            f"Num processes: {self.num_processes}\n"
            f"Process index: {self.process_index}\n"
            f"Local process index: {self.local_process_index}\n"
            f"Device: {self.device}\n"
        )

    # ------------------------------------------------------------ process control
    def wait_for_everyone(self) -> None:
        """Block until every process has reached this point."""
        if self.distributed_type == DistributedType.XLA:
            if self.use_distributed:
                xla_rendezvous("accel.wait_for_everyone")
            return
        if self.use_distributed:
            with collective("barrier"):
                dist.barrier()

    @contextlib.contextmanager
    def _first(self, is_first: bool) -> Iterator[None]:
        if not is_first:
            self.wait_for_everyone()
        yield
        if is_first:
            self.wait_for_everyone()

    def main_process_first(self) -> contextlib.AbstractContextManager[None]:
        """Context manager: the main process runs the block first, then all the others."""
        return self._first(self.is_main_process)

    def local_main_process_first(self) -> contextlib.AbstractContextManager[None]:
        """Context manager: each machine's first process runs the block before the others."""
        return self._first(self.is_local_main_process)

    @contextlib.contextmanager
    def split_between_processes(self, inputs: Any, apply_padding: bool = False) -> Iterator[Any]:
        """Give each process its contiguous share of ``inputs`` inside a ``with`` block.

        Lists, tuples, tensors, dicts of equal-length values and ``datasets.Dataset`` tables
        (any sized object with ``select(indices)``, split with it) are split; the first
        ``len % num_processes`` processes get one item more. With ``apply_padding`` every share
        is padded to the same length with the input's last item, so results can be gathered
        (drop the padding afterwards). 3 prompts on 2 processes give ``["a dog", "a cat"]`` and
        ``["a chicken"]`` (padded: ``["a chicken", "a chicken"]``); 4 items on 3 processes give
        ``[0, 1]``, ``[2]`` and ``[3]`` (padded: ``[2, 3]`` and ``[3, 3]``). A process with
        nothing to do gets an empty share, or the input's last item repeated when padding.
        """
        yield split_inputs(inputs, self.num_processes, self.process_index, apply_padding)

    def _run_if(self, condition: Callable[[], bool], function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if condition():
                return function(*args, **kwargs)
            return None

        return wrapper  # type: ignore[return-value]

    def on_main_process(self, function: F | None = None) -> Any:
        """Decorator: run ``function`` on the main process only (returns None elsewhere)."""
        if function is None:
            return self.on_main_process
        return self._run_if(lambda: self.is_main_process, function)

    def on_local_main_process(self, function: F | None = None) -> Any:
        """Decorator: run ``function`` on each machine's first process only."""
        if function is None:
            return self.on_local_main_process
        return self._run_if(lambda: self.is_local_main_process, function)

    def on_last_process(self, function: F) -> F:
        """Decorator: run ``function`` on the last process only."""
        return self._run_if(lambda: self.is_last_process, function)

    def on_process(self, function: F | None = None, process_index: int | None = None) -> Any:
        """Decorator: run ``function`` on the process of global index ``process_index`` only."""
        if process_index is None:
            raise ValueError(
                "on_process needs process_index; got None. Use @state.on_process(process_index=1)."
            )
        if function is None:
            return functools.partial(self.on_process, process_index=process_index)
        return self._run_if(lambda: self.process_index == process_index, function)

    def on_local_process(
        self, function: F | None = None, local_process_index: int | None = None
    ) -> Any:
        """Decorator: run ``function`` on the process of local index ``local_process_index``."""
        if local_process_index is None:
            raise ValueError(
                "on_local_process needs local_process_index; got None. "
                "Use @state.on_local_process(local_process_index=0)."
            )
        if function is None:
            return functools.partial(self.on_local_process, local_process_index=local_process_index)
        return self._run_if(lambda: self.local_process_index == local_process_index, function)

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` once per machine (on the local main process)."""
        if self.is_local_main_process:
            print(*args, **kwargs)

    def set_device(self) -> None:
        """Make ``self.device`` the current device of its backend (no-op on CPU)."""
        if self.device.type not in ("cpu", "mps", "hpu", "neuron", "xla"):
            getattr(torch, self.device.type).set_device(self.device)

    def destroy_process_group(self, group: Any = None) -> None:
        """Tear the process group down in order (barrier, then destroy)."""
        if group is not None:
            dist.destroy_process_group(group)
        else:
            teardown_process_group()

    @classmethod
    def _reset_state(cls) -> None:
        """Forget the shared state (tests only; does not touch the process group)."""
        cls._shared_state.clear()

    if not TYPE_CHECKING:  # for type checkers, every attribute stays declared or an error

        def __getattr__(self, name: str) -> Any:
            # Only reached when normal lookup fails: name what is missing and why.
            raise missing_state_attribute(type(self), name, _STATE_ATTRIBUTES)


_STATE_ATTRIBUTES = frozenset(
    {
        "_cpu",
        "backend",
        "debug",
        "device",
        "distributed_type",
        "fork_launched",
        "launcher",
        "local_process_index",
        "num_processes",
        "num_processes_per_node",
        "process_index",
    }
)
"""The attributes ``PartialState.__init__`` sets (gone after ``_reset_state()``)."""


def missing_state_attribute(cls: type, name: str, known: frozenset[str]) -> AttributeError:
    """The error for attribute ``name`` that an instance of the shared-state class ``cls`` lacks.

    An attribute the state's creation sets (or a property that reads one) is missing only
    after ``cls._reset_state()``: the error says so and how to recreate the state. Any other
    name gets Python's usual message.
    """
    if name in known or isinstance(getattr(cls, name, None), property):
        return AttributeError(
            f"`{cls.__name__}` object has no attribute `{name}`. This happens if "
            f"`{cls.__name__}._reset_state()` was called and an `Accelerator` or `PartialState` "
            f"was not reinitialized: create one (`{cls.__name__}()`) before reading the state.",
            name=name,
        )
    return AttributeError(f"'{cls.__name__}' object has no attribute '{name}'", name=name)
