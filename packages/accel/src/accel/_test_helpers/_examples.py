"""Check that a "complete" example script contains what each by-feature example adds to the
base example, as the reference library's example tests do (``compare_against_test``)."""

from __future__ import annotations

import os
from pathlib import Path

_FUNCTIONS = {"training_function": "def main", "main": "if __name__"}
_LOADER_LINE = "train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)\n"
_TEST_MODE = "TESTING_MOCKED_DATALOADERS"
_TEMPLATE = os.path.join("examples", "nlp_example.py")


def get_function_contents_by_name(lines: list[str], name: str) -> list[str] | None:
    """The lines of the function ``name`` of a script, from its ``def`` line up to the next
    section (``def main`` after ``training_function``, ``if __name__`` after ``main``).

    Args:
        lines: The script's lines (``readlines()``).
        name: ``"training_function"`` or ``"main"``.

    Returns:
        The function's lines, or None when the script has no such function.

    Raises:
        ValueError: ``name`` is neither of the two.
    """
    if name not in _FUNCTIONS:
        raise ValueError(
            f"get_function_contents_by_name reads 'training_function' or 'main'; got {name!r}. "
            "Pass one of the two."
        )
    end = _FUNCTIONS[name]
    kept: list[str] = []
    for line in lines:
        if not kept:
            if f"def {name}" in line:
                kept.append(line)
            continue
        if end in line:
            return kept
        kept.append(line)
    return kept or None


def clean_lines(lines: list[str]) -> list[str]:
    """``lines`` without comment lines (first non-blank character ``#``) and empty lines."""
    return [line for line in lines if line != "\n" and not line.lstrip().startswith("#")]


def _function(path: str | os.PathLike[str], name: str) -> list[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    found = get_function_contents_by_name(lines, name)
    if found is None:
        raise ValueError(
            f"compare_against_test: {os.fspath(path)!r} has no function {name!r} to compare. "
            f"Pass an example script that defines `def {name}(...)`."
        )
    return clean_lines(found)


def compare_against_test(
    base_filename: str | os.PathLike[str],
    feature_filename: str | os.PathLike[str],
    parser_only: bool,
    secondary_filename: str | os.PathLike[str] | None = None,
    *,
    template_filename: str | os.PathLike[str] = _TEMPLATE,
) -> list[str]:
    """The lines that ``feature_filename`` adds to the template example and that
    ``base_filename`` lacks: an empty list when the complete example has every addition.

    Lines of the template (``examples/nlp_example.py`` from the working folder), the line that
    builds the dataloaders, and the test-mode lines (a line naming ``TESTING_MOCKED_DATALOADERS``
    and, in the feature script, the line after it) are not additions. The last line of the
    feature's function (its closing statement) is not compared.

    Args:
        base_filename: The complete example (``examples/complete_nlp_example.py``).
        feature_filename: A by-feature example (``examples/by_feature/checkpointing.py``).
        parser_only: Compare the ``main`` functions (the argument parsers) instead of the
            ``training_function`` functions.
        secondary_filename: A second template whose lines also do not count as additions
            (``examples/cv_example.py`` when the base is ``complete_cv_example.py``).
        template_filename: The template example.

    Raises:
        ValueError: A script lacks the function compared.
        FileNotFoundError: A script does not exist.
    """
    name = "main" if parser_only else "training_function"
    base = _function(base_filename, name)
    template_lines = Path(template_filename).read_text(encoding="utf-8").splitlines(keepends=True)
    template = _function(template_filename, name)
    feature = _function(feature_filename, name)

    def is_boilerplate(line: str) -> bool:
        return line in template or line.lstrip() == _LOADER_LINE

    added: list[str] = []
    skip_next = False
    for line in feature[:-1]:
        if skip_next:
            skip_next = False
        elif _TEST_MODE in line:
            skip_next = True
        elif not is_boilerplate(line):
            added.append(line)
    in_base = {line for line in base if not is_boilerplate(line) and _TEST_MODE not in line}
    missing = [line for line in added if line not in in_base]
    if secondary_filename is not None:
        secondary = set(_function(secondary_filename, name))
        template_only = {line for line in template_lines if line not in secondary}
        missing = [line for line in missing if line not in template_only]
    return missing


__all__ = ["clean_lines", "compare_against_test", "get_function_contents_by_name"]
