"""The fuzzing campaign runs in pieces: each piece merges its targets' rows into the section of
the results page, a target whose row reached the goal is skipped, and a target a piece left
short of its goal goes on counting. Also: the YAML mutator builds nested alias and merge-key
expansions (the "billion laughs" of a launch config) by itself.

Nothing here fuzzes: the tool's bookkeeping is checked on small pages and caches.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402
from fuzzing import report, runner  # noqa: E402
from fuzzing.mutate import mutate_yaml  # noqa: E402

GOAL = {"inputs": 1_000_000, "seconds": 3600.0}


def _row(inputs: int, seconds: float, goal: dict[str, float] | None = GOAL) -> dict[str, Any]:
    row: dict[str, Any] = {"engine": "atheris", "inputs": inputs, "seconds": seconds}
    row["findings"] = {}
    return {**row, "goal": goal} if goal else row


def test_reached_names_the_goal_a_row_reached() -> None:
    assert runner.reached(_row(1_000_000, 120)) == "1,000,000 inputs"
    assert runner.reached(_row(50_000, 3600)) == "1 h"
    assert runner.reached(_row(50_000, 1800)) is None
    assert runner.reached(_row(50_000, 3600, goal=None)) is None


def test_record_merges_the_rows_of_a_piece_into_the_section_of_its_label(tmp_path: Path) -> None:
    page = tmp_path / "fuzz.md"
    report.record(page, "other", "python tools/fuzz.py --short", "", {"safetensors": _row(9, 2)})
    first = {"environment": _row(10, 3600), "safetensors": _row(20, 1000)}
    report.record(page, "long", "python tools/fuzz.py --long --record", "a note", first)
    second = {"safetensors": _row(30, 3600), "command_line": _row(40, 500)}
    piece = "python tools/fuzz.py --long --record --targets safetensors,command_line"
    report.record(page, "long", piece, "", second)

    sections = json.loads(page.with_suffix(".json").read_text())
    long = sections["long"]
    assert list(long["results"]) == ["command_line", "environment", "safetensors"]
    assert long["results"]["safetensors"]["inputs"] == 30  # the piece's row replaced the old
    assert long["results"]["environment"]["inputs"] == 10  # the other target's row stayed
    assert long["note"] == "a note"
    assert long["command"] == ["python tools/fuzz.py --long --record", piece]
    assert sections["other"]["results"] == {"safetensors": _row(9, 2)}

    text = page.read_text()
    assert f"- `{piece}`" in text and "goal reached" in text
    assert "| `safetensors` | atheris | 30 | 3,600 | 0 | - | - | - | 0 | 1 h |" in text
    assert "| `command_line` | atheris | 40 | 500 | 0 | - | - | - | 0 | no |" in text
    assert report.done(page, "long", GOAL) == {"environment": "1 h", "safetensors": "1 h"}
    assert report.done(page, "long", {"inputs": 5, "seconds": 3600.0}) == {}  # other goal


def test_a_target_that_reached_its_goal_is_skipped_unless_forced(
    tmp_path: Path, capsys: Any
) -> None:
    page = tmp_path / "fuzz.md"
    goal = {"inputs": 5, "seconds": 1.0}
    report.record(page, "piece", "python tools/fuzz.py", "", {"environment": _row(5, 0.5, goal)})
    before = page.with_suffix(".json").read_text()
    argv = ["--targets", "environment", "--inputs", "5", "--seconds", "1", "--label", "piece"]
    argv += ["--cache", str(tmp_path / "cache"), "--page", str(page), "--record"]

    assert fuzz.main(argv) == 0
    assert "environment" in capsys.readouterr().out.split("skipped")[0]
    assert page.with_suffix(".json").read_text() == before  # nothing ran, nothing recorded
    assert not (tmp_path / "cache").exists()

    # --force (here with --collect, which reads the empty cache and runs nothing) keeps it
    assert fuzz.main([*argv, "--force", "--collect"]) == 0
    assert "skipped" not in capsys.readouterr().out


def _cache(tmp_path: Path, goal: dict[str, float], inputs: int, seconds: float) -> runner.Plan:
    plan = runner.Plan(["environment"], "random", 100, 60.0, 5.0, 2048, tmp_path, resume=True)
    stats = tmp_path / "stats"
    stats.mkdir(parents=True, exist_ok=True)
    (stats / "environment.goal.json").write_text(json.dumps(goal))
    row = {"inputs": inputs, "seconds": seconds, "lines": 7, "findings": {}}
    (stats / "environment.json").write_text(json.dumps(row))
    return plan


def test_a_piece_left_short_of_its_goal_goes_on_counting(tmp_path: Path) -> None:
    plan = _cache(tmp_path, {"inputs": 100, "seconds": 60.0}, 40, 20.0)
    runner.start_counts(plan)
    kept = json.loads((tmp_path / "stats" / "environment.json").read_text())
    assert kept["inputs"] == 40 and kept["seconds"] == 20.0
    assert "lines" not in kept  # measured again when the piece ends

    for goal, inputs, resume in [
        ({"inputs": 100, "seconds": 60.0}, 100, True),  # reached: a new run starts over
        ({"inputs": 5, "seconds": 60.0}, 40, True),  # another goal
        ({"inputs": 100, "seconds": 60.0}, 40, False),  # --force
    ]:
        plan = _cache(tmp_path, goal, inputs, 20.0)
        plan.resume = resume
        runner.start_counts(plan)
        assert not (tmp_path / "stats" / "environment.json").exists()
        assert json.loads((tmp_path / "stats" / "environment.goal.json").read_text()) == plan.goal


def _expanded(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values a YAML node stands for once its aliases and merge keys are expanded."""
    if id(node) not in memo:
        memo[id(node)] = 1  # a node that holds itself counts once
        if isinstance(node, yaml.SequenceNode):
            memo[id(node)] = 1 + sum(_expanded(item, memo) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            pairs = (_expanded(k, memo) + _expanded(v, memo) for k, v in node.value)
            memo[id(node)] = 1 + sum(pairs)
    return memo[id(node)]


def test_the_yaml_mutator_builds_nested_alias_and_merge_key_expansions() -> None:
    # A launch config's shape: plain `key: value` lines and a few empty mappings.
    seed = "".join(f"key_{i}: {i if i % 3 else '{}'}\n" for i in range(30)).encode()
    rng = random.Random(0)
    biggest = {"merge": 0, "alias": 0}
    corpus = [seed]
    for _ in range(400):
        data = mutate_yaml(rng.choice(corpus), rng)
        try:
            node = yaml.compose(data.decode())
        except yaml.YAMLError:
            continue
        corpus.append(data)  # what parses is mutated further, as a fuzzer's corpus grows
        kind = "merge" if b"<<: [*" in data else "alias"
        biggest[kind] = max(biggest[kind], _expanded(node, {}))
    # A reader that expands them builds millions of values from a file of a few kB.
    assert biggest["merge"] > 1_000_000 and biggest["alias"] > 1_000_000, biggest
