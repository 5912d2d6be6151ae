"""The header every results page shares: the machine, the versions, the load average.

``benchmarks/run.py`` stamps each page a benchmark wrote with one ``Run `name`:`` line under
the page's title (date, duration, machine, versions, load average at start and end); running
the benchmark again replaces its own line and leaves the rest of the page as it is.

Scripts whose page is partly written by hand (the analysis under the tables) print their
tables and, given ``--out PAGE``, put them in a generated section of that page with
:func:`write_section`: the section is replaced on every run, the hand-written text is kept.
Scripts that write their whole page lose what was added by hand, except the blocks between
``<!-- kept -->`` and ``<!-- end kept -->``, which the runner carries over (:func:`kept_blocks`,
:func:`restore_kept`).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import platform
import re
import time
from collections.abc import Sequence
from pathlib import Path

ACCEL_PACKAGES = (
    "accel-torch",
    "accel-state",
    "accel-collectives",
    "accel-bigmodel",
    "accel-trackers",
    "accel-data",
    "accel-precision",
    "accel-pipeline",
    "accel-launch",
)
"""Every distribution of the workspace; their versions are shown together when they agree."""


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def machine() -> str:
    """``"Linux 6.1, x86_64, 2 cores (AMD EPYC), 23.5 GiB RAM"``."""
    ram = _ram_gib()
    memory = f", {ram:.1f} GiB RAM" if ram is not None else ""
    return (
        f"{platform.system()} {platform.release()}, {platform.machine()}, "
        f"{os.cpu_count()} cores ({_cpu_model()}){memory}"
    )


def versions(extra: Sequence[str] = ()) -> str:
    """Python, torch, the accel packages, the reference library and ``extra`` distributions.

    A distribution that is not installed is left out (``accelerate`` outside the ``bench``
    group, ``deepspeed`` where it is not needed).
    """
    parts = [f"Python {platform.python_version()}"]
    for name in ("torch", *extra):
        found = _version(name)
        if found is not None:
            parts.append(f"{name} {found}")
    ours = {name: _version(name) for name in ACCEL_PACKAGES}
    installed = {name: found for name, found in ours.items() if found is not None}
    if len(set(installed.values())) == 1:
        parts.append(f"accel packages {next(iter(installed.values()))}")
    else:
        parts += [f"{name} {found}" for name, found in installed.items()]
    reference = _version("accelerate")
    if reference is not None:
        parts.append(f"accelerate {reference} (reference)")
    return ", ".join(parts)


def status_bytes(field: str) -> int:
    """A memory line of ``/proc/self/status`` in bytes (``VmRSS``, ``RssAnon``, ``VmHWM`` ...);
    0 where the system has none."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def load_average() -> float:
    """The 1-minute load average (0.0 where the system does not report one)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def run_line(
    name: str,
    command: str,
    seconds: float,
    load_start: float,
    load_end: float,
    extra_versions: Sequence[str] = (),
) -> str:
    """The ``Run `name`:`` line that :func:`stamp` puts under a page's title."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"Run `{name}` (`{command}`): {when}, {seconds:.0f} s; {machine()}; "
        f"{versions(extra_versions)}; load average {load_start:.1f} at start, "
        f"{load_end:.1f} at end (the machine may be shared: compare rows of one run)."
    )


def stamp(page: str | Path, name: str, line: str) -> None:
    """Put ``line`` under the title of ``page``, replacing an earlier line of ``name``.

    Args:
        page: A markdown results page.
        name: The benchmark's name: the line it replaces starts with ``Run `name```.
        line: The line, from :func:`run_line`.
    """
    path = Path(page)
    prefix = f"Run `{name}` "
    lines: list[str] = []
    removed = False
    for text in path.read_text(encoding="utf-8").splitlines():
        if text.startswith(prefix):
            removed = True
            continue
        if removed and text == "" and lines[-1:] == [""]:
            removed = False
            continue  # the blank line that closed the removed stamp
        removed = False
        lines.append(text)
    title = next((i for i, text in enumerate(lines) if text.startswith("# ")), None)
    at = 0 if title is None else title + 1
    if title is not None:
        if at >= len(lines) or lines[at] != "":
            lines.insert(at, "")
        at += 1
    first = at
    while at < len(lines) and lines[at].startswith("Run `"):
        at += 1
    lines[at:at] = [line] if at > first else [line, ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def share_sizes(namespace: dict[str, object], **sizes: tuple[str, int]) -> None:
    """Set sizes from the command line as module constants and as environment variables.

    Workers started as fresh subprocesses read their sizes from the environment when their
    module is imported; the driver sets both from its flags.

    Args:
        namespace: The script's ``globals()``.
        **sizes: ``ENVIRONMENT_VARIABLE=("CONSTANT", value)``.
    """
    for variable, (constant, value) in sizes.items():
        os.environ[variable] = str(value)
        namespace[constant] = value


_KEPT = re.compile(r"<!-- kept -->.*?<!-- end kept -->", re.DOTALL)


def kept_blocks(page: str | Path) -> list[str]:
    """The ``<!-- kept -->`` blocks of ``page`` (none when it does not exist)."""
    path = Path(page)
    return _KEPT.findall(path.read_text(encoding="utf-8")) if path.exists() else []


_GENERATED = re.compile(r"<!-- generated: (\S+) -->.*?<!-- end generated: \1 -->", re.DOTALL)


def generated_blocks(page: str | Path) -> list[str]:
    """The sections of ``page`` written by :func:`write_section` (none when it does not exist):
    a script that rewrites a whole shared page puts them back with :func:`restore_kept`."""
    path = Path(page)
    if not path.exists():
        return []
    return [m.group(0) for m in _GENERATED.finditer(path.read_text(encoding="utf-8"))]


def restore_kept(page: str | Path, blocks: Sequence[str]) -> None:
    """Append to ``page`` each of ``blocks`` that a rewrite of the page dropped."""
    path = Path(page)
    text = path.read_text(encoding="utf-8")
    missing = [block for block in blocks if block not in text]
    if missing:
        path.write_text(text.rstrip("\n") + "\n\n" + "\n\n".join(missing) + "\n", "utf-8")


def write_section(page: str | Path, key: str, title: str, body: str) -> None:
    """Write ``body`` as the generated section ``key`` of ``page``, keeping the rest.

    The section sits between two HTML comments naming ``key``; a page without it gets it at
    the end (a page that does not exist yet is created with ``title`` as its heading).

    Args:
        page: The markdown page.
        key: Names the section (one script may own several, one per configuration).
        title: The page's title when the page is new.
        body: Markdown: the section's heading, tables and notes.
    """
    path = Path(page)
    begin, end = f"<!-- generated: {key} -->", f"<!-- end generated: {key} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else f"# {title}\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + f"\n\n{block}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    from _charts import write_charts  # benchmarks/_charts.py, beside this file

    write_charts(path)


LIBRARY_MODULES = (
    "accel",
    "accel_state",
    "accel_collectives",
    "accel_bigmodel",
    "accel_data",
    "accel_precision",
    "accel_pipeline",
    "accel_trackers",
    "accel_launch",
    "accelerate",
    "safetensors",
)
"""The packages both sides import: what :func:`compile_bytecode` compiles by default."""


def compile_bytecode(modules: Sequence[str] = LIBRARY_MODULES) -> None:
    """Byte-compiles the packages ``modules`` name, as an install does, before fresh processes
    time a first call.

    With ``PYTHONDONTWRITEBYTECODE`` set (it is on the development machine), no ``.pyc`` is ever
    written, so every fresh process compiles each module from source when it first imports it.
    A library that imports lazily then pays that compilation inside the timed call, while one
    that imports everything up front pays it before: both compiled is the state of a real
    install. The variable only stops writing; the files written here are read.
    """
    import compileall
    import importlib.util

    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                compileall.compile_dir(folder, quiet=1, workers=0)


COLD_SETTLE = 5.0
"""Seconds between evicting files and the cold read that follows: here a read right after the
eviction ran 3-4x faster than one a few seconds later (the virtual disk's host still held the
data), so every cold read of the benchmarks, their floors' included, starts this long after it."""
_MADV_PAGEOUT = 21


def page_out_own_mappings(files: Sequence[str]) -> None:
    """Reclaims this process's mapped pages of ``files`` (``madvise(MADV_PAGEOUT)``): pages a
    process maps stay cached through ``posix_fadvise(DONTNEED)``, as they would not under the
    memory pressure of a model bigger than its budget."""
    wanted = {os.path.realpath(f) for f in files}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open("/proc/self/maps") as handle:
        for line in handle:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() in wanted:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                libc.madvise(start, end - start, _MADV_PAGEOUT)


def evict(files: Sequence[str], settle: bool = True) -> None:
    """Makes the next read of ``files`` cold: pages this process's mappings of them out, flushes
    each file, drops it from the page cache (``posix_fadvise(DONTNEED)``), then waits
    :data:`COLD_SETTLE` seconds unless ``settle`` is false."""
    page_out_own_mappings(files)
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if settle:
        time.sleep(COLD_SETTLE)
