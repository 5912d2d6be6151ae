"""Pin what accel-trackers requires: nothing of ours, no torch; backends only as extras.

Read from the installed metadata (not pyproject.toml), so that it runs on every Python the
package supports and checks what a wheel really declares.
"""

import re
from importlib.metadata import requires
from pathlib import Path

REQUIRES = requires("accel-trackers") or []


def _names(requirements):
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def _extras():
    extras = {}
    for req in REQUIRES:
        found = re.search(r"extra == ['\"]([\w-]+)['\"]", req)
        if found:
            extras.setdefault(found.group(1), []).append(req)
    return extras


def test_no_required_dependency():
    assert [r for r in REQUIRES if "extra ==" not in r] == []


def test_no_accel_package_or_torch_anywhere():
    extras = _extras()
    every = _names(r for reqs in extras.values() for r in reqs)
    assert not {n for n in every if n.startswith("accel")}
    assert "torch" not in every


def test_each_backend_is_an_extra_and_all_holds_them_all():
    extras = _extras()
    expected = {
        "tensorboard": {"tensorboardx"},
        "wandb": {"wandb"},
        "comet": {"comet-ml"},
        "dvclive": {"dvclive"},
        "mlflow": {"mlflow"},
        "aim": {"aim"},
        "clearml": {"clearml"},
        "swanlab": {"swanlab"},
        "trackio": {"trackio"},
    }
    for extra, names in expected.items():
        assert _names(extras[extra]) == names, extra
    assert _names(extras["all"]) == set().union(*expected.values())


def test_source_imports_no_other_accel_package():
    src = Path(__file__).resolve().parents[1] / "src" / "accel_trackers"
    pattern = re.compile(r"^\s*(?:from|import)\s+(accel\w*|torch)\b", re.MULTILINE)
    found = {m.group(1) for f in src.glob("*.py") for m in pattern.finditer(f.read_text())}
    assert found == set(), found
