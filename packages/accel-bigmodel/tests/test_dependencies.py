import importlib.metadata
import re
import subprocess
import sys


def test_required_dependencies_are_exactly_torch_and_safetensors():
    requires = importlib.metadata.requires("accel-bigmodel") or []
    required = sorted(
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in requires if "extra ==" not in r
    )
    assert required == ["safetensors", "torch"]


def test_importing_accel_bigmodel_imports_no_other_accel_package():
    code = (
        "import sys, accel_bigmodel\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0].startswith('accel')"
        " and m.split('.')[0] != 'accel_bigmodel')\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_importing_accel_bigmodel_does_not_import_optional_packages():
    code = (
        "import sys, accel_bigmodel\n"
        "print(','.join(m for m in ('transformers', 'accelerate', 'psutil') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
