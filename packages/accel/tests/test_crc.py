"""The multi-threaded CRC-32 of checkpoint files equals zlib's CRC-32 of the whole file."""

import mmap
import random
import zlib

import pytest

from accel._training_checkpoints.files._crc import crc32_combine, crc32_of_file


def test_combined_crcs_equal_the_crc_of_the_joined_bytes():
    rng = random.Random(0)
    for _ in range(40):
        first = rng.randbytes(rng.randrange(0, 300))
        second = rng.randbytes(rng.randrange(0, 5000))
        joined = crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second))
        assert joined == zlib.crc32(first + second)


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 4097, 100_003])
@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_file_crc_in_parts_equals_zlib(tmp_path, size, threads):
    data = random.Random(size).randbytes(size)
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    assert crc32_of_file(
        str(path), threads=threads, min_part=1024, window=mmap.ALLOCATIONGRANULARITY
    ) == zlib.crc32(data)


@pytest.mark.parametrize("threads", [2, 3])
def test_file_crc_in_parts_joined_in_python_equals_zlib(tmp_path, monkeypatch, threads):
    """Without zlib-ng the parts' CRCs are joined by `crc32_combine`: the same value."""
    from accel._training_checkpoints.files import _crc

    monkeypatch.setattr(_crc, "_crc32", zlib.crc32)
    monkeypatch.setattr(_crc, "_combine", None)
    data = random.Random(threads).randbytes(50_001)
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    assert crc32_of_file(str(path), threads=threads, min_part=1024) == zlib.crc32(data)


def test_the_checksum_runs_on_zlib_ng_a_dependency_of_accel():
    from zlib_ng import zlib_ng

    from accel._training_checkpoints.files import _crc

    assert _crc._crc32 is zlib_ng.crc32
    assert _crc._combine is zlib_ng.crc32_combine  # the join in C, not in Python
    data = random.Random(1).randbytes(70_000)
    assert zlib_ng.crc32(data) == zlib.crc32(data)
