"""The results page of the fuzzing campaign (``benchmarks/results/fuzz.md``), made from the
sections the runs recorded (``benchmarks/results/fuzz.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .registry import load_all
from .runner import reached

_HEAD = """# Fuzzing the readers of outside bytes

Made by `python tools/fuzz.py` (`--record`); how to run it:
[untrusted files](../untrusted-files.md#fuzzing-the-readers). The property checked on
every input: the reader returns, or raises one of accel's own errors (or an error raised by a
`raise` of accel's code, with its message); a raw `KeyError`, `TypeError`, `OverflowError`,
`json.JSONDecodeError`, `MemoryError` (the address-space cap), a hang past the wall time per
input, or a death by a signal is a finding. *Lines* are the lines of accel's own code
(`packages/*/src`) that the target's corpus runs, measured by replaying it under a line tracer;
*cov* / *ft* are libFuzzer's edge and feature counts (atheris engine only). A section run in
pieces (a few `--targets` at a time, the same `--label`) lists the command of each piece; each
target's row comes from the last piece that ran it, and *goal reached* says whether it reached
the run's goal per target (`1,000,000 inputs` or `1 h` for the campaign) or not.
"""


def _row(name: str, stats: dict[str, Any], goals: bool) -> str:
    findings = stats.get("findings", {})
    inputs = stats.get("inputs", 0)
    seconds = stats.get("seconds", 0) or 0
    rate = f"{inputs / seconds:,.0f}" if seconds else "-"
    cov = f"{stats['cov']} / {stats['ft']}" if stats.get("cov") is not None else "-"
    hit = reached(stats) or ("no" if "goal" in stats else "-")
    goal = f" {hit} |" if goals else ""
    return (
        f"| `{name}` | {stats.get('engine', '-')} | {inputs:,} | {seconds:,.0f} | {rate} | "
        f"{stats.get('corpus', '-')} | {stats.get('lines', '-')} | {cov} | {len(findings)} |" + goal
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


def section(
    label: str, command: str | list[str], note: str, results: dict[str, dict[str, Any]]
) -> str:
    """One run's section: its command (or the commands of its pieces), a row per target and
    a row per finding."""
    commands = [command] if isinstance(command, str) else command
    lines = [f"## {label}", ""]
    if len(commands) > 1:
        lines += ["Run in pieces; each command wrote the rows of the targets it ran:", ""]
        lines += [f"- `{c}`" for c in commands]
    else:
        lines.append(f"`{commands[0]}`")
    lines.append("")
    if note:
        lines += [note, ""]
    goals = any("goal" in stats for stats in results.values())
    lines += [
        "| target | engine | inputs | s | inputs/s | corpus | lines | cov / ft | findings |"
        + (" goal reached |" if goals else ""),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        + (" --- |" if goals else ""),
    ]
    lines += [_row(name, stats, goals) for name, stats in results.items()]
    found = [row for name, stats in results.items() for row in _findings(name, stats)]
    if found:
        lines += ["", "| target | finding | raised at | first found | message |"]
        lines += ["| --- | --- | --- | --- | --- |", *found]
    return "\n".join(lines) + "\n"


def _sections(page: Path) -> dict[str, Any]:
    store = page.with_suffix(".json")
    return json.loads(store.read_text()) if store.exists() else {}


def done(page: Path, label: str, goal: dict[str, float]) -> dict[str, str]:
    """The targets whose row in the page's section ``label`` reached ``goal``, with the goal
    each reached ("1,000,000 inputs", "1 h")."""
    results = _sections(page).get(label, {}).get("results", {})
    return {
        name: hit
        for name, stats in results.items()
        if stats.get("goal") == goal and (hit := reached(stats))
    }


def record(page: Path, label: str, command: str, note: str, results: dict[str, Any]) -> None:
    """Merge this run's rows into the section ``label`` stored beside the page (a target's new
    row replaces its old one, the other targets' rows stay; an empty ``note`` keeps the
    section's), and write the page again from every section."""
    store = page.with_suffix(".json")
    sections = _sections(page)
    old = sections.get(label, {})
    commands = old.get("command", [])
    commands = [commands] if isinstance(commands, str) else commands
    if command not in commands:
        commands.append(command)
    sections[label] = {
        "command": commands[0] if len(commands) == 1 else commands,
        "note": note or old.get("note", ""),
        "results": dict(sorted({**old.get("results", {}), **results}.items())),
    }
    store.write_text(json.dumps(sections, indent=1, sort_keys=True) + "\n")
    write(page, sections)


def write(page: Path, sections: dict[str, Any]) -> None:
    """Write the page from the sections stored beside it."""
    targets = load_all()
    body = [_HEAD, "## Targets", "", "| target | reads |", "| --- | --- |"]
    body += [f"| `{t.name}` | {t.reads} |" for t in targets.values()]
    body.append("")
    for name, sec in sections.items():
        body.append(section(name, sec["command"], sec["note"], sec["results"]))
    page.write_text("\n".join(body))
