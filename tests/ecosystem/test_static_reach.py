"""Every name that transformers, PEFT, TRL and diffusers use from ``accelerate`` resolves
under accel (``accelerate.<path>.<name>`` is ``accel.<path>.<name>`` under
``install_as_accelerate()``): the names they import and the names they reach through attribute
chains (``accelerate.big_modeling.check_device_map``).

The clients' installed sources are parsed (``ast``, ``probe/scan.py``), so a new release of a
client that uses a new name fails here at once, naming it. Each client is skipped, with the
reason, when it is not installed (``uv sync --group ecosystem``, Python 3.11+).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest


def _load_scan() -> ModuleType:
    path = Path(__file__).parent / "probe" / "scan.py"
    spec = importlib.util.spec_from_file_location("accel_ecosystem_scan", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scan = _load_scan()
CLIENTS = scan.CLIENTS


def unresolved(module: str, name: str | None) -> str | None:
    """Why ``from module import name`` (or ``import module``) fails under accel, or None."""
    ours = "accel" + module[len("accelerate") :]
    try:
        target = importlib.import_module(ours)
    except ImportError as err:
        return f"{ours} does not import ({err})"
    if name is None or name == "*":
        return None
    try:
        getattr(target, name)
    except AttributeError:
        try:
            importlib.import_module(f"{ours}.{name}")
        except ImportError:
            return f"{ours} has no {name!r}"
    except ImportError as err:
        return f"{ours}.{name} fails to load ({err})"
    return None


@pytest.mark.parametrize("client", CLIENTS)
def test_every_accelerate_import_of_the_client_resolves_under_accel(client: str) -> None:
    if importlib.util.find_spec(client) is None:
        pytest.skip(f"{client} is not installed (uv sync --group ecosystem, Python 3.11+)")
    imports = scan.client_uses(client)
    assert imports, f"found no accelerate use in {client}: the scan is broken"
    problems = []
    for (module, name), files in sorted(imports.items(), key=lambda item: str(item[0])):
        why = unresolved(module, name)
        if why is not None:
            what = module if name is None else f"from {module} import {name}"
            problems.append(f"{what}: {why} (imported by {', '.join(sorted(files)[:3])})")
    assert not problems, f"{len(problems)} imports of {client} do not resolve under accel:\n" + (
        "\n".join(problems)
    )


def test_the_scan_names_a_missing_name() -> None:
    assert unresolved("accelerate.utils", "no_such_name") == "accel.utils has no 'no_such_name'"
    assert "does not import" in str(unresolved("accelerate.no_such_module", "x"))
    assert unresolved("accelerate.parallelism_config", "ParallelismConfig") is None


def test_the_scan_reads_attribute_chains_and_aliases() -> None:
    source = """
import accelerate
import accelerate.utils as au
from accelerate.hooks import AlignDevicesHook

def patch():
    import accelerate.big_modeling
    accelerate.big_modeling.check_device_map = None
    au.modeling.get_max_memory({0: 1})
    getattr(accelerate.hooks, "SequentialHook")
    return accelerate.__version__, accelerate.hooks.CpuOffload
"""
    found = scan.uses_in_source(source, "client/x.py")
    assert set(found) == {
        ("accelerate", None),
        ("accelerate.utils", None),
        ("accelerate.big_modeling", None),
        ("accelerate.hooks", "AlignDevicesHook"),
        ("accelerate.big_modeling", "check_device_map"),
        ("accelerate.utils.modeling", "get_max_memory"),
        ("accelerate.hooks", None),
        ("accelerate", "__version__"),
        ("accelerate.hooks", "CpuOffload"),
    }


def test_the_clients_names_reached_only_through_attribute_chains_are_in_the_scan() -> None:
    installed = scan.installed_clients()
    if not {"transformers", "peft"} <= set(installed):
        pytest.skip("transformers and peft are not installed (uv sync --group ecosystem)")
    uses = scan.all_uses()
    # transformers patches check_device_map; peft reads the version and looks hooks up by name
    assert (
        "transformers/integrations/accelerate.py"
        in uses[("accelerate.big_modeling", "check_device_map")]
    )
    assert "peft/utils/other.py" in uses[("accelerate", "__version__")]
    assert "peft/utils/other.py" in uses[("accelerate.hooks", None)]
