"""The environment contract holds across packages: every ``ACCEL_`` name in the sources is
declared in ``accel_state.environment_variables``, every launcher option that configures a
process has a declared variable, and the generated docs tables are current."""

import ast
import dataclasses
import importlib.util
import re
from pathlib import Path

from accel_launch.configs._engine_configs import SECTIONS
from accel_state import environment_variables as ev

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"\bACCEL_[A-Z0-9_]*")
NAMESPACE = {"ACCEL_"}
"""The bare prefix, used only to select the library's variables (``purge_accel_environment``)."""


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_every_accel_name_in_the_sources_is_declared():
    from accel_bigmodel._bigmodel_variables import VARIABLES as BIGMODEL_VARIABLES

    undeclared = []
    for path in sorted(ROOT.glob("packages/*/src/**/*.py")):
        # accel-bigmodel depends on no other accel package: it declares its own variables.
        declared = BIGMODEL_VARIABLES if "accel-bigmodel" in path.parts else ev.VARIABLES
        for line, text in _string_constants(path):
            for match in NAME.finditer(text):
                name = match.group()
                after = text[match.end() : match.end() + 1]
                if after in ("*", "<") or name in NAMESPACE:
                    continue  # a family named in prose (ACCEL_FSDP_*), or the namespace itself
                if name not in declared:
                    undeclared.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not undeclared, (
        "declare these in accel_state.environment_variables (accel-bigmodel's in "
        "accel_bigmodel._bigmodel_variables):\n" + "\n".join(undeclared)
    )


def test_no_variable_name_is_built_by_concatenation():
    # A string ending in "_" that starts like a variable is a prefix glued to a field name.
    prefixes = []
    for path in sorted(ROOT.glob("packages/*/src/**/*.py")):
        for line, text in _string_constants(path):
            if re.fullmatch(r"(ACCEL|ACCELERATE|FSDP|PARALLELISM_CONFIG)_[A-Z0-9_]*_", text):
                prefixes.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not prefixes, "\n".join(prefixes)


def test_every_launcher_option_sent_to_the_processes_has_a_declared_variable():
    for name in (
        "dynamo_config",
        "deepspeed_config",
        "fsdp_config",
        "megatron_lm_config",
        "parallelism_config",
    ):
        section = SECTIONS[name]
        fields = {field.name for field in dataclasses.fields(section)}
        sent = set(section.variables)
        assert sent | set(section.launcher_only) == fields, name
        for variable in section.variables.values():
            assert variable in ev.VARIABLES
            assert "accel launch" in ev.VARIABLES[variable].written_by


def test_the_generated_docs_tables_are_current():
    spec = importlib.util.spec_from_file_location(
        "gen_env_docs", ROOT / "tools" / "gen_env_docs.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for path, text in tool.expected().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale; run: python tools/gen_env_docs.py"
        )
    assert "`FSDP_SHARDING_STRATEGY`" in tool.fallbacks_table()
    # Every declared variable carries a docstring under its constant (the table's "meaning").
    assert set(ev.VARIABLES) <= set(tool.docstrings())
