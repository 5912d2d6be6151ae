"""Pages of the site generated from files outside ``docs/`` (``tools/mkdocs_hooks.py`` adds them):

- ``examples.md``: the scripts of ``examples/``, their READMEs and each file's source, one
  anchor per file, so that a path like ``examples/quicktour.py`` in a guide links somewhere
  even when the build has no repository address (``link_example_paths``);
- ``changelog.md``: every package's ``CHANGELOG.md`` and the fragments of ``changes/`` waiting
  for the next release.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHOWN = (".py", ".sh", ".json")
_LANGUAGE = {".py": "python", ".sh": "bash", ".json": "json"}


def example_anchor(path: str) -> str:
    """The anchor of ``examples/...`` on the examples page: ``by_feature-checkpointing-py``;
    a folder's is its name (``by_feature``), the folder ``examples/`` itself ``examples``."""
    inner = path.removeprefix("examples").strip("/")
    return re.sub(r"[^A-Za-z0-9_]+", "-", inner).strip("-") or "examples"


def example_target(path: str, repo_url: str | None, page_uri: str, branch: str = "main") -> str:
    """Where a mention of ``path`` (``examples/...``) on the page ``page_uri`` links: the file in
    the repository when the build has its address, else its section of the examples page."""
    if repo_url:
        kind = "tree" if (ROOT / path).is_dir() else "blob"
        return f"{repo_url.rstrip('/')}/{kind}/{branch}/{path.rstrip('/')}"
    examples_page = posixpath.relpath("examples.md", posixpath.dirname(page_uri) or ".")
    return f"{examples_page}#{example_anchor(path)}"


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_PATH = re.compile(r"(?<![\[\w])`(examples/[\w./-]*|ARCHITECTURE\.md|CONTRIBUTING\.md)`(?!\]\()")
"""An inline path to link: an example, or a file of the repository's root for contributors
(linked only when the build has the repository's address: the site has no page of it)."""


def link_example_paths(markdown: str, repo_url: str | None, page_uri: str) -> str:
    """Each inline ``examples/...`` path of ``markdown`` (outside code blocks and links) that
    names an existing file or folder becomes a link (``example_target``); so do
    ``ARCHITECTURE.md`` and ``CONTRIBUTING.md`` when the build has the repository's address."""
    out, fence = [], ""
    for line in markdown.split("\n"):
        match = _FENCE.match(line)
        if match and (not fence or match.group(1).startswith(fence)):
            fence = "" if fence else match.group(1)[:3]
        elif not fence:

            def link(found: re.Match[str]) -> str:
                path = found.group(1)
                if not (ROOT / path).exists():
                    return found.group(0)
                if not path.startswith("examples"):
                    if not repo_url:
                        return found.group(0)
                    return f"[`{path}`]({repo_url.rstrip('/')}/blob/main/{path})"
                return f"[`{path}`]({example_target(path, repo_url, page_uri)})"

            line = _PATH.sub(link, line)
        out.append(line)
    return "\n".join(out)


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _readme_body(readme: Path, repo_url: str | None) -> list[str]:
    """A README of ``examples/``, one heading level down, its relative links made site links."""
    folder = readme.parent.relative_to(ROOT).as_posix()
    text = readme.read_text(encoding="utf-8").split("\n", 1)[1]  # its title is the section's

    def link(match: re.Match[str]) -> str:
        label, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        if "://" in target:
            return match.group(0)
        path = posixpath.normpath(posixpath.join(folder, target))
        if path.startswith("docs/"):
            return f"[{label}]({path.removeprefix('docs/')}{anchor})"
        if path.endswith("README.md"):
            path = posixpath.dirname(path)
        if path.startswith("examples") and (ROOT / path).exists():
            return f"[{label}]({example_target(path, repo_url, 'examples.md')})"
        return label

    text = _LINK.sub(link, text)
    return [("#" + line) if line.startswith("#") else line for line in text.split("\n")]


def _source(path: Path) -> list[str]:
    code = path.read_text(encoding="utf-8").rstrip("\n")
    ticks = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`{3,}", code))])
    fence = f"    {ticks}{_LANGUAGE[path.suffix]}"
    body = ["    " + line if line else "" for line in code.split("\n")]
    return [f'??? example "The source of `{path.name}`"', "", fence, *body, f"    {ticks}", ""]


def examples_page(repo_url: str | None) -> str:
    """Every example of the repository: what each shows (the READMEs) and its source."""
    lines = [
        "# Examples",
        "",
        "The scripts of the repository's `examples/` folder, with their source. Each runs on one",
        "process (`python examples/quicktour.py`) or several (`accel launch --num_processes 2",
        "examples/quicktour.py`) from the root of a clone; `tests/test_examples.py` and",
        "`tests/examples/` run them on 2 CPU processes.",
        "",
    ]
    folders = [EXAMPLES, *sorted(p for p in EXAMPLES.iterdir() if p.is_dir())]
    for folder in folders:
        relative = folder.relative_to(ROOT).as_posix() + "/"
        lines += [f"## `{relative}` {{#{example_anchor(relative)}}}", ""]
        if (folder / "README.md").exists():
            lines += [*_readme_body(folder / "README.md", repo_url), ""]
        for path in sorted(folder.iterdir()):
            if path.suffix not in SHOWN or not path.is_file():
                continue
            name = path.relative_to(ROOT).as_posix()
            lines += [f"### `{name}` {{#{example_anchor(name)}}}", ""]
            if repo_url:
                lines += [
                    f"[In the repository]({example_target(name, repo_url, 'examples.md')})",
                    "",
                ]
            lines += _source(path)
    return "\n".join(lines) + "\n"


_TYPES = {"added": "Added", "changed": "Changed", "fixed": "Fixed", "removed": "Removed"}


def changelog_page() -> str:
    """The changelog of every package, the facade first, with the changes not yet released."""
    packages = sorted(
        ROOT.glob("packages/*/CHANGELOG.md"),
        key=lambda p: (p.parent.name != "accel", p.parent.name),
    )
    lines = [
        "# Changelog",
        "",
        "Each package has its own changelog (`packages/<package>/CHANGELOG.md`, written from the",
        "fragments of `packages/<package>/changes/` at each release); this page shows them all,",
        "and the changes waiting for the next release. The facade `accel` is published as",
        "`accel-torch`.",
        "",
    ]
    for changelog in packages:
        name = changelog.parent.name
        published = "accel-torch" if name == "accel" else name
        text = changelog.read_text(encoding="utf-8").split("\n", 1)[1]
        text = re.sub(r"<!--.*?-->\n?", "", text, flags=re.S)
        lines += [f"## {published}", ""]
        fragments = sorted((changelog.parent / "changes").glob("*.md"))
        if fragments:
            lines += ["### Not released yet", ""]
            for fragment in fragments:
                kind = _TYPES.get(fragment.name.rsplit(".", 2)[-2], "Changed")
                body = " ".join(fragment.read_text(encoding="utf-8").split())
                lines.append(f"- {kind}: {body}")
            lines.append("")
        lines += [("#" + line) if line.startswith("#") else line for line in text.split("\n")]
        lines.append("")
    return "\n".join(lines)
