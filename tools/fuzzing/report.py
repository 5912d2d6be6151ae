"""The results page of the fuzzing campaign (``benchmarks/results/fuzz.md``), made from the
sections the runs recorded (``benchmarks/results/fuzz.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .registry import load_all

_HEAD = """# Fuzzing the readers of outside bytes

Made by `python tools/fuzz.py` (`--record`); how to run it:
[untrusted files](../untrusted-files.md#fuzzing-the-readers). The property checked on
every input: the reader returns, or raises one of accel's own errors (or an error raised by a
`raise` of accel's code, with its message); a raw `KeyError`, `TypeError`, `OverflowError`,
`json.JSONDecodeError`, `MemoryError` (the address-space cap), a hang past the wall time per
input, or a death by a signal is a finding. *Lines* are the lines of accel's own code
(`packages/*/src`) that the target's corpus runs, measured by replaying it under a line tracer;
*cov* / *ft* are libFuzzer's edge and feature counts (atheris engine only).
"""


def _row(name: str, stats: dict[str, Any]) -> str:
    findings = stats.get("findings", {})
    inputs = stats.get("inputs", 0)
    seconds = stats.get("seconds", 0) or 0
    rate = f"{inputs / seconds:,.0f}" if seconds else "-"
    cov = f"{stats['cov']} / {stats['ft']}" if stats.get("cov") is not None else "-"
    return (
        f"| `{name}` | {stats.get('engine', '-')} | {inputs:,} | {seconds:,.0f} | {rate} | "
        f"{stats.get('corpus', '-')} | {stats.get('lines', '-')} | {cov} | {len(findings)} |"
    )


def _findings(name: str, stats: dict[str, Any]) -> list[str]:
    rows = []
    for signature, f in sorted(stats.get("findings", {}).items()):
        when = f"input {f['input']:,}, {f['seconds']} s" if f.get("input") else "worker died"
        rows.append(
            f"| `{name}` | `{signature}` | `{f['where']}` | {when} | "
            f"{f['message'].replace('|', '/')[:160]} |"
        )
    return rows


def section(label: str, command: str, note: str, results: dict[str, dict[str, Any]]) -> str:
    """One run's section: its command, a row per target and a row per finding."""
    lines = [f"## {label}", "", f"`{command}`", ""]
    if note:
        lines += [note, ""]
    lines += [
        "| target | engine | inputs | s | inputs/s | corpus | lines | cov / ft | findings |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [_row(name, stats) for name, stats in results.items()]
    found = [row for name, stats in results.items() for row in _findings(name, stats)]
    if found:
        lines += ["", "| target | finding | raised at | first found | message |"]
        lines += ["| --- | --- | --- | --- | --- |", *found]
    return "\n".join(lines) + "\n"


def record(page: Path, label: str, command: str, note: str, results: dict[str, Any]) -> None:
    """Store this run's section beside the page and write the page again from every section."""
    store = page.with_suffix(".json")
    sections = json.loads(store.read_text()) if store.exists() else {}
    sections[label] = {"command": command, "note": note, "results": results}
    store.write_text(json.dumps(sections, indent=1, sort_keys=True) + "\n")
    targets = load_all()
    body = [_HEAD, "## Targets", "", "| target | reads |", "| --- | --- |"]
    body += [f"| `{t.name}` | {t.reads} |" for t in targets.values()]
    body.append("")
    for name, sec in sections.items():
        body.append(section(name, sec["command"], sec["note"], sec["results"]))
    page.write_text("\n".join(body))
