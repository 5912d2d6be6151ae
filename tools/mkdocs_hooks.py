"""Pages of the documentation site generated when it is built, so that none can go stale.

- ``cli.md``: every ``accel`` subcommand's ``--help`` (``tools/gen_cli_docs.py``);
- ``api/*.md``: one page per package, one entry per name of its ``__all__``, grouped by the
  private module that defines it (the module's docstring gives the heading); the facade's page
  documents what ``accel`` defines and links every re-exported name to its package's page;
- ``benchmarks/*.md`` and their charts: the committed results of ``benchmarks/results/``;
- ``examples.md`` and ``changelog.md``: the scripts of ``examples/`` and the packages'
  changelogs (``tools/docs_pages.py``); every ``examples/...`` path of a guide links to its file;
- ``repository.md``: the repository's README, its links to files outside ``docs/`` made to point
  at the repository (``ACCEL_REPO_URL``) or written as paths when the build has no address.

The header shows the version of ``accel-torch``. With ``ACCEL_REPO_URL`` set when building,
``mkdocs.yml`` links the header to the repository and each page of ``docs/`` gets "edit this
page" (``ACCEL_EDIT_URI``, ``edit/main/docs/`` by default).

Each chart (an image alone on its line, ``![title](chart.png)``) links to its full-size file: the
charts are drawn for the text column and saved at twice its resolution.

mkdocs loads this file through ``hooks:`` in ``mkdocs.yml``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from docs_pages import changelog_page, example_target, examples_page, link_example_paths  # noqa: E402
from gen_cli_docs import render as render_cli  # noqa: E402

# Page, package, title, one-line summary: the groups of the specification.
API_PAGES = [
    ("state", "accel_state", "State", "Process state, enums, plugins, kwargs, environment, RNG."),
    ("collectives", "accel_collectives", "Collectives", "Operations on nested tensors."),
    ("data", "accel_data", "Data", "Sharded, dispatched and resumable data loaders."),
    ("bigmodel", "accel_bigmodel", "Big model", "Empty init, device maps, offload, checkpoints."),
    ("pipeline", "accel_pipeline", "Pipeline", "Pipeline-parallel inference."),
    ("precision", "accel_precision", "Precision", "Autocast, grad scaling, FP8, quantization."),
    ("trackers", "accel_trackers", "Trackers", "Experiment trackers."),
    ("launch", "accel_launch", "Launch", "The launcher's Python API and config file model."),
]
FACADE_MODULES = ["accel", "accel.utils", "accel.inference"]


def _defining_module(package: ModuleType, name: str) -> str:
    """The module of ``package`` that defines ``name`` (its own name for constants)."""
    obj = getattr(package, name)
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and module.startswith(package.__name__):
        return module
    return package.__name__


def _section_title(module_name: str, package_name: str) -> str:
    """The first sentence of the module's docstring, or "Constants" for the package itself."""
    if module_name == package_name:
        return "Constants and other names"
    doc = inspect.getdoc(importlib.import_module(module_name)) or module_name
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    return links_to_code(first.split(". ")[0].rstrip("."))


DOCSTRING_LINK = re.compile(r"\[(`[^`\]]+`)\]\[[\w.]+\]")
"""A cross-reference of a docstring: ``[`prepare`][accel.Accelerator.prepare]``."""


def links_to_code(text: str) -> str:
    """``text`` with each cross-reference as its code span alone (for a heading)."""
    return DOCSTRING_LINK.sub(r"\1", text)


def _entries(package_name: str, names: list[str], section_level: int = 2) -> list[str]:
    """``:::`` blocks for ``names`` of ``package_name``, grouped by defining module under
    headings of ``section_level``; each name's heading is one level below."""
    package = importlib.import_module(package_name)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(_defining_module(package, name), []).append(name)
    lines: list[str] = []
    for module_name in sorted(groups, key=lambda m: (m == package_name, m)):
        lines += [f"{'#' * section_level} {_section_title(module_name, package_name)}", ""]
        for name in groups[module_name]:
            lines += [f"::: {package_name}.{name}", "    options:"]
            lines.append(f"      heading_level: {section_level + 1}")
            if _hidden_bases(package, getattr(package, name)):
                # the members of the method groups shown with the class, not the groups
                lines.append("      inherited_members: true")
                lines.append("      show_bases: false")
            lines.append("")
    return lines


def _hidden_bases(package: ModuleType, obj: Any) -> list[type]:
    """Base classes of ``obj`` from ``package``'s own private modules that its ``__all__`` does
    not name (the Accelerator's method groups): their members are documented with ``obj``,
    since no page shows them otherwise."""
    if not inspect.isclass(obj):
        return []
    top = package.__name__.split(".")[0]
    return [
        base
        for base in obj.__mro__[1:]
        if base.__module__.split(".")[0] == top
        and not (base.__name__ in package.__all__ and getattr(package, base.__name__) is base)
    ]


def api_page(package_name: str, title: str, summary: str) -> str:
    """The reference page of one package: every name of its ``__all__``."""
    package = importlib.import_module(package_name)
    names = [name for name in package.__all__ if not name.startswith("__")]
    doc = (inspect.getdoc(package) or "").strip()
    lines = [
        f"# {title}: `{package_name}`",
        "",
        f"{summary} `pip install {package_name.replace('_', '-')}`; {len(names)} public names.",
        "",
        doc,
        "",
        *_entries(package_name, names),
    ]
    return "\n".join(lines)


def _owner(obj: Any, name: str) -> str | None:
    """The package of ``API_PAGES`` whose ``__all__`` holds ``obj`` under ``name``."""
    for _, package_name, *_ in API_PAGES:
        package = importlib.import_module(package_name)
        if name in package.__all__ and getattr(package, name) is obj:
            return package_name
    return None


def facade_page() -> str:
    """``accel``, ``accel.utils``, ``accel.inference``: own names documented, the others linked."""
    lines = [
        "# Accelerator and the facade: `accel`",
        "",
        "`pip install accel-torch` installs every package. Its modules give each name of the other",
        "packages at the path of the reference library too (`accel.utils.gather` is",
        "`accel_collectives.gather`). Names `accel` defines are documented here; the others link",
        "to the page of the package that owns them.",
        "",
    ]
    for module_name in FACADE_MODULES:
        module = importlib.import_module(module_name)
        names = [name for name in module.__all__ if not name.startswith("__")]
        own, linked = [], []
        for name in names:
            owner = _owner(getattr(module, name), name)
            (linked if owner else own).append((name, owner))
        lines += [f"## `{module_name}`", ""]
        if own:
            lines += _entries(module_name, [name for name, _ in own], section_level=3)
        if linked:
            lines += [f"### Re-exported by `{module_name}`", "", "| name | documented at |"]
            lines.append("| --- | --- |")
            for name, owner in linked:
                lines.append(f"| `{module_name}.{name}` | [`{owner}.{name}`][{owner}.{name}] |")
            lines.append("")
    return "\n".join(lines)


def api_index() -> str:
    """The landing page of the API reference."""
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings when the site is built: every name of every package's",
        "`__all__`, grouped like the specification.",
        "",
        "| page | package | what it holds |",
        "| --- | --- | --- |",
        "| [Accelerator and the facade](accel.md) | `accel` | `Accelerator`, the reference "
        "library's module paths |",
    ]
    for page, package_name, title, summary in API_PAGES:
        lines.append(f"| [{title}]({page}.md) | `{package_name}` | {summary} |")
    return "\n".join(lines) + "\n"


def benchmark_files(config: Any) -> list[File]:
    """``benchmarks/results/*.md`` and their charts, as pages under ``benchmarks/``."""
    results = ROOT / "benchmarks" / "results"
    files = []
    for path in sorted(results.iterdir()):
        if path.suffix in (".md", ".png"):
            files.append(File.generated(config, f"benchmarks/{path.name}", abs_src_path=str(path)))
    return files


NO_ADDRESS = """\
!!! note "The repository"
    The repository has no public address yet, so this site links to no repository page and
    has no "edit this page" button: below is the repository's README, as the root of a clone
    shows it. Paths are relative to that root. A build with `ACCEL_REPO_URL=<address>` links
    the header to the repository and every guide to its source.
"""

_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def readme_page(repo_url: str | None, branch: str = "main") -> str:
    """The repository's README as a page of the site: links into ``docs/`` stay site links,
    links to other files of the repository go to ``repo_url`` (or become their path)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")

    def link(match: re.Match[str]) -> str:
        text, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        if "://" in target:
            return match.group(0)
        if target.startswith("docs/"):
            return f"[{text}]({target.removeprefix('docs/')}{anchor})"
        if repo_url:
            return f"[{text}]({repo_url.rstrip('/')}/blob/{branch}/{target}{anchor})"
        if target.startswith("examples"):
            folder = target.removesuffix("README.md")
            return f"[{text}]({example_target(folder, None, 'repository.md')})"
        return f"{text} (`{target}`)" if text.strip("`") != target else f"`{target}`"

    page = _LINK.sub(link, readme)
    return page if repo_url else page.replace("\n", "\n\n" + NO_ADDRESS + "\n", 1)


def edit_uri_for(repo_url: str | None, edit_uri: str | None) -> str | None:
    """The "edit this page" address of the build: ``edit_uri`` joined to ``repo_url``; with no
    repository address only a full URL (``ACCEL_EDIT_URI=https://...``) is kept, since mkdocs
    warns on each page for a relative one (and ``--strict`` aborts)."""
    if repo_url or not edit_uri:
        return edit_uri
    return edit_uri if "://" in edit_uri else None


def on_config(config: Any) -> Any:
    """Show the version of accel-torch in the header and the footer of every page; drop the
    edit link when the build has no repository address."""
    version = importlib.metadata.version("accel-torch")
    config.site_name = f"accel {version}"
    config.copyright = f"accel {version} · Apache License 2.0"
    config.edit_uri = edit_uri_for(config.repo_url, config.edit_uri)
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages to the site."""
    files.append(File.generated(config, "repository.md", content=readme_page(config.repo_url)))
    files.append(File.generated(config, "cli.md", content=render_cli()))
    files.append(File.generated(config, "examples.md", content=examples_page(config.repo_url)))
    files.append(File.generated(config, "changelog.md", content=changelog_page()))
    files.append(File.generated(config, "api/index.md", content=api_index()))
    files.append(File.generated(config, "api/accel.md", content=facade_page()))
    for page, package_name, title, summary in API_PAGES:
        content = api_page(package_name, title, summary)
        files.append(File.generated(config, f"api/{page}.md", content=content))
    for file in benchmark_files(config):
        files.append(file)
    return files


CHART = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+\.png)\)\s*$", re.MULTILINE)
"""A chart of a page: an image alone on its line."""


def link_charts(markdown: str) -> str:
    """Each chart of ``markdown`` wrapped in a link to its own file (opened full size)."""
    return CHART.sub(
        r'[![\1](\2)](\2){ .chart-full-size title="Open the chart full size" }', markdown
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Link every chart of the page to its full-size image, and each path of ``examples/`` to
    the file (in the repository, or on the examples page)."""
    if page.file.src_uri != "examples.md":
        markdown = link_example_paths(markdown, config.repo_url, page.file.src_uri)
    return link_charts(markdown)
