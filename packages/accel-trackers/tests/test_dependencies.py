"""Pin what accel-trackers requires: nothing of ours, no torch; backends only as extras."""

import re
from pathlib import Path

import tomllib

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())


def _names(requirements):
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_no_required_dependency():
    assert PYPROJECT["project"]["dependencies"] == []


def test_no_accel_package_or_torch_anywhere():
    extras = PYPROJECT["project"]["optional-dependencies"]
    every = _names(r for reqs in extras.values() for r in reqs)
    assert not {n for n in every if n.startswith("accel")}
    assert "torch" not in every


def test_each_backend_is_an_extra_and_all_holds_them_all():
    extras = PYPROJECT["project"]["optional-dependencies"]
    expected = {
        "tensorboard": {"tensorboardx"},
        "wandb": {"wandb"},
        "comet": {"comet-ml"},
        "dvclive": {"dvclive"},
        "mlflow": {"mlflow"},
        "aim": {"aim"},
        "clearml": {"clearml"},
    }
    for extra, names in expected.items():
        assert _names(extras[extra]) == names, extra
    assert _names(extras["all"]) == set().union(*expected.values())


def test_source_imports_no_other_accel_package():
    src = Path(__file__).resolve().parents[1] / "src" / "accel_trackers"
    pattern = re.compile(r"^\s*(?:from|import)\s+(accel\w*|torch)\b", re.MULTILINE)
    found = {m.group(1) for f in src.glob("*.py") for m in pattern.finditer(f.read_text())}
    assert found == set(), found
