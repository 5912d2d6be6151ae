"""Start the trackers of one job, on the process that logs, and drive them together."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._registry import LogWith, filter_trackers, get_tracker_class
from ._tracker_interface import GeneralTracker, NoOpTracker, logger

__all__ = ["TrackerSet", "init_trackers", "resolve_main_process"]


def _env_rank(var: str) -> int | None:
    raw = os.environ.get(var)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"The environment variable {var} must be an integer process rank; got {raw!r}. "
            f"Unset it or set it to the rank of this process (0 for the main one)."
        ) from None


def resolve_main_process(
    is_main_process: bool | None = None, process_index: int | None = None
) -> bool:
    """Decide whether this process is the one that talks to the tracking backends.

    Order: `is_main_process` if given, else `process_index == 0` if given, else the
    environment variable `RANK`, else `LOCAL_RANK`, else True (a single process).

    Args:
        is_main_process: Explicit answer from the caller.
        process_index: Global index of this process.

    Returns:
        True on the main process.
    """
    if is_main_process is not None:
        return bool(is_main_process)
    if process_index is not None:
        return int(process_index) == 0
    for var in ("RANK", "LOCAL_RANK"):
        rank = _env_rank(var)
        if rank is not None:
            return rank == 0
    return True


class TrackerSet:
    """The trackers of one job: log to all, look one up, finish all once.

    On a process that is not the main one, trackers with `main_process_only=True` are
    replaced by `NoOpTracker` stand-ins, so every call is safe and nothing reaches the
    backend: one job gives one run.

    Args:
        trackers: The trackers (real ones and stand-ins).
        is_main_process: Whether this process is the main one.
    """

    def __init__(self, trackers: Iterable[GeneralTracker] = (), is_main_process: bool = True):
        self.trackers: list[GeneralTracker] = list(trackers)
        self.is_main_process = is_main_process
        self._finished = False

    def __iter__(self) -> Iterator[GeneralTracker]:
        return iter(self.trackers)

    def __len__(self) -> int:
        return len(self.trackers)

    def __getitem__(self, index: int) -> GeneralTracker:
        return self.trackers[index]

    def __repr__(self) -> str:
        names = [t.name for t in self.trackers]
        return f"TrackerSet({names}, is_main_process={self.is_main_process})"

    @property
    def names(self) -> list[str]:
        """Names of the trackers, in order."""
        return [t.name for t in self.trackers]

    def _live(self) -> list[GeneralTracker]:
        return [t for t in self.trackers if not isinstance(t, NoOpTracker)]

    def store_init_configuration(self, config: Mapping[str, Any]) -> None:
        """Store the run's hyper-parameters in every tracker that logs here."""
        for tracker in self._live():
            tracker.store_init_configuration(dict(config))

    def log(
        self,
        values: Mapping[str, Any],
        step: int | None = None,
        log_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Log `values` to every tracker.

        Args:
            values: Name -> value; nested dicts, tensors, numpy scalars and None are fine.
            step: The step number.
            log_kwargs: Per-tracker keyword arguments, keyed by tracker name, e.g.
                ``{"wandb": {"commit": False}}``.
        """
        log_kwargs = log_kwargs or {}
        for tracker in self._live():
            tracker.log(dict(values), step=step, **dict(log_kwargs.get(tracker.name, {})))

    def get(self, name: str, unwrap: bool = False) -> Any:
        """The tracker called `name`, or its native object when `unwrap` is True.

        On a process that does not log, a no-op stand-in is returned (its `.tracker`
        and every method call are harmless).

        Raises:
            ValueError: On the main process, if no tracker has that name.
        """
        key = str(getattr(name, "value", name)).lower()
        for tracker in self.trackers:
            if tracker.name == key:
                return tracker.tracker if unwrap else tracker
        if not self.is_main_process:
            stand_in = NoOpTracker(key)
            return stand_in.tracker if unwrap else stand_in
        raise ValueError(
            f"No tracker named {name!r} was started; started trackers are {self.names}. "
            "Add it to log_with before init_trackers."
        )

    def finish(self) -> None:
        """Finish every tracker. Calling it again, or a backend that already ended, is fine."""
        if self._finished:
            return
        self._finished = True
        for tracker in self._live():
            try:
                tracker.finish()
            except Exception as err:
                logger.warning("%s: finish() raised %r; ignored", tracker.name, err)

    end_training = finish


def _build(
    name: str,
    project_name: str,
    logging_dir: str | os.PathLike[str] | None,
    kwargs: dict[str, Any],
) -> GeneralTracker:
    # Adapters take (project_name, [logging_dir], **options); the base class does not.
    cls: Any = get_tracker_class(name)
    if cls.requires_logging_directory:
        return cls(project_name, logging_dir, **kwargs)
    if logging_dir is not None and "logging_dir" not in kwargs:
        # An adapter whose signature is the reference's (run_name, **kwargs) says by a
        # class attribute that it takes logging_dir among its keyword arguments.
        try:
            accepts = "logging_dir" in inspect.signature(cls).parameters
        except (TypeError, ValueError):
            accepts = False
        accepts = accepts or bool(cls.takes_logging_dir)
        if accepts:
            kwargs = {**kwargs, "logging_dir": logging_dir}
    return cls(project_name, **kwargs)


def init_trackers(
    log_with: LogWith | Iterable[LogWith] | None,
    project_name: str,
    config: Mapping[str, Any] | None = None,
    init_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    logging_dir: str | os.PathLike[str] | None = None,
    is_main_process: bool | None = None,
    process_index: int | None = None,
) -> TrackerSet:
    """Start the trackers of a job and store its configuration.

    Only the main process creates backend runs (see `resolve_main_process`); the other
    processes get no-op stand-ins for trackers with `main_process_only=True`.

    Args:
        log_with: Tracker names, `LoggerType` members, tracker instances, or "all".
        project_name: Project / run name given to each backend.
        config: Hyper-parameters to store (nested dicts, tensors and None are accepted).
        init_kwargs: Per-tracker constructor keyword arguments, keyed by tracker name,
            e.g. ``{"wandb": {"mode": "offline"}}``.
        logging_dir: Directory for trackers that write locally.
        is_main_process: Whether this process logs; read from RANK / LOCAL_RANK if None.
        process_index: Global rank of this process, used when `is_main_process` is None.

    Returns:
        A `TrackerSet` with `.log`, `.get` and `.finish`.
    """
    main = resolve_main_process(is_main_process, process_index)
    init_kwargs = init_kwargs or {}
    trackers: list[GeneralTracker] = []
    for entry in filter_trackers(log_with, logging_dir):
        if isinstance(entry, GeneralTracker):
            tracker = entry
        else:
            name = str(entry)
            cls = get_tracker_class(name)
            if cls.main_process_only and not main:
                trackers.append(NoOpTracker(name))
                continue
            tracker = _build(name, project_name, logging_dir, dict(init_kwargs.get(name, {})))
        if getattr(tracker, "main_process_only", True) and not main:
            trackers.append(NoOpTracker(tracker.name))
            continue
        tracker.start()
        trackers.append(tracker)
    result = TrackerSet(trackers, is_main_process=main)
    if config is not None:
        result.store_init_configuration(config)
    return result
