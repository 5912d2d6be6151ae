"""CRC-32 of checkpoint files on several cores.

The file is cut into contiguous parts that threads checksum at once (the CRC function releases
the GIL); each thread maps its part a window at a time (no copy out of the page cache, little
resident memory), and the parts' CRCs are joined with `crc32_combine`, so the result is
exactly ``zlib.crc32`` of the whole file.

The CRC function is zlib-ng's (a dependency of accel: the same CRC-32 as zlib's, computed with
the processor's carry-less multiply, 5-8x faster), and so is the join of the parts' CRCs;
without it, the standard library's ``zlib`` and `crc32_combine` give the same values more
slowly (the join in Python costs about 2 ms of one core per part of a large file).
"""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_crc32: Callable[..., int]
"""The CRC-32 function used (zlib-ng's when installed)."""
_combine: Callable[[int, int, int], int] | None
"""zlib-ng's ``crc32_combine`` when installed (else `crc32_combine`, in Python)."""
try:
    from zlib_ng.zlib_ng import crc32 as _crc32
    from zlib_ng.zlib_ng import crc32_combine as _combine
except ImportError:  # a platform without a zlib-ng wheel: the same values, more slowly
    _crc32, _combine = zlib.crc32, None

_POLYNOMIAL = 0xEDB88320  # CRC-32 (IEEE 802.3, as zlib), bit-reflected
_MIN_PART = 32 << 20
"""Smallest part a thread checksums: below it, starting a thread costs more than it saves."""
_WINDOW = 8 << 20
"""Bytes a thread maps at once: the resident memory the checksum adds is one window per thread
(64 MiB windows were 15% faster and added 128 MiB to the peak on 2 threads)."""


def _times(matrix: list[int], vector: int) -> int:
    """The GF(2) product of a 32x32 bit matrix (one int per column) and a 32-bit vector."""
    total = 0
    column = 0
    while vector:
        if vector & 1:
            total ^= matrix[column]
        vector >>= 1
        column += 1
    return total


def _squared(matrix: list[int]) -> list[int]:
    return [_times(matrix, column) for column in matrix]


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of ``a + b`` from ``crc1 = crc32(a)``, ``crc2 = crc32(b)`` and ``len(b)``.

    Appending ``length2`` zero bytes to ``a`` is a linear map of its CRC; the map for one zero
    bit is squared repeatedly (2, 4, 8 ... bits) and applied for each set bit of the length.
    """
    if length2 <= 0:
        return crc1
    one_bit = [_POLYNOMIAL] + [1 << n for n in range(31)]
    operator = _squared(_squared(_squared(one_bit)))  # one zero byte
    while length2:
        if length2 & 1:
            crc1 = _times(operator, crc1)
        length2 >>= 1
        if length2:
            operator = _squared(operator)
    return crc1 ^ crc2


def _crc_of_range(path: str, start: int, end: int, window: int) -> int:
    """CRC-32 of bytes ``[start, end)`` of ``path``, mapped ``window`` bytes at a time (each
    window is unmapped before the next, so the process's resident memory stays small)."""
    crc = 0
    granularity = mmap.ALLOCATIONGRANULARITY
    with open(path, "rb") as handle:
        position = start
        while position < end:
            offset = position - position % granularity
            length = min(end, position + window) - offset
            with mmap.mmap(
                handle.fileno(), length, access=mmap.ACCESS_READ, offset=offset
            ) as mapped:
                if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
                    mapped.madvise(mmap.MADV_SEQUENTIAL)
                view = memoryview(mapped)
                try:
                    crc = _crc32(view[position - offset :], crc)
                finally:
                    view.release()
            position = offset + length
    return crc


def crc32_of_file(
    path: str, threads: int | None = None, min_part: int = _MIN_PART, window: int = _WINDOW
) -> int:
    """``zlib.crc32`` of the whole file at ``path``, computed by up to ``threads`` threads.

    Args:
        path: The file.
        threads: How many parts to checksum at once (default: accel-bigmodel's reader threads,
            the usable cores up to 4).
        min_part: Smallest part given to a thread, in bytes.
        window: Bytes each thread maps at a time.
    """
    size = os.path.getsize(path)
    if size == 0:
        return 0
    if threads is None:
        from accel_bigmodel import default_threads

        threads = default_threads()
    count = max(1, min(threads, size // max(1, min_part)))
    bounds = [size * i // count for i in range(count + 1)]
    ranges = list(zip(bounds, bounds[1:]))
    if count == 1:
        crcs = [_crc_of_range(path, 0, size, window)]
    else:
        # The calling thread checksums the first part itself: one thread fewer to start and
        # to wait for (on a busy machine each start can wait for a core).
        with ThreadPoolExecutor(count - 1, thread_name_prefix="accel-crc") as pool:
            futures = [
                pool.submit(_crc_of_range, path, start, end, window) for start, end in ranges[1:]
            ]
            first = _crc_of_range(path, *ranges[0], window)
            crcs = [first, *(future.result() for future in futures)]
    combine = _combine or crc32_combine
    crc = crcs[0]
    for part_crc, (start, end) in zip(crcs[1:], ranges[1:]):
        crc = combine(crc, part_crc, end - start)
    return crc
