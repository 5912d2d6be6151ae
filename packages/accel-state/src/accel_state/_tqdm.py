"""A tqdm progress bar drawn by one process of a job instead of by every process."""

from __future__ import annotations

from typing import Any


def tqdm(*args: Any, main_process_only: bool = True, **kwargs: Any) -> Any:
    """``tqdm.auto.tqdm`` that, by default, draws only on the local main process.

    Every other process gets a disabled bar, which still iterates and counts, so the loop body
    is the same on every process.

    Args:
        *args: Positional arguments of ``tqdm.tqdm`` (the iterable first).
        main_process_only: Draw on the process of local index 0 only; ``False`` draws on every
            process.
        **kwargs: Keyword arguments of ``tqdm.tqdm``; ``disable=True`` hides the bar everywhere.

    Raises:
        ImportError: tqdm is not installed.
        ValueError: the first positional argument is a bool (the old form of
            ``main_process_only``).

    Example:
        >>> for batch in tqdm(loader, desc="train"):  # doctest: +SKIP
        ...     ...
    """
    if args and isinstance(args[0], bool):
        raise ValueError(
            "tqdm's first positional argument is the iterable, not a bool; got "
            f"{args[0]!r}. Pass the flag by keyword: tqdm(iterable, "
            f"main_process_only={args[0]!r})."
        )
    try:
        from tqdm.auto import tqdm as _tqdm
    except ImportError:
        raise ImportError(
            "accel's tqdm wrapper draws with the tqdm library, which is not installed. "
            "Install it: pip install tqdm"
        ) from None
    disable = bool(kwargs.pop("disable", False))
    if main_process_only and not disable:
        from ._process._partial_state import PartialState

        disable = PartialState().local_process_index != 0
    return _tqdm(*args, disable=disable, **kwargs)
