import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path


def test_required_dependencies_are_exactly_torch_and_safetensors():
    requires = importlib.metadata.requires("accel-bigmodel") or []
    required = sorted(
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in requires if "extra ==" not in r
    )
    assert required == ["safetensors", "torch"]


def test_importing_accel_bigmodel_imports_no_other_accel_package_nor_optional_ones():
    code = (
        "import sys, accel_bigmodel\n"
        "[getattr(accel_bigmodel, name) for name in accel_bigmodel.__all__]\n"  # every module
        "ours = sorted(m for m in sys.modules if m.split('.')[0].startswith('accel')"
        " and m.split('.')[0] != 'accel_bigmodel')\n"
        "optional = [m for m in ('transformers', 'accelerate', 'psutil') if m in sys.modules]\n"
        "print(repr((ours, optional)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "([], [])"


def test_the_lazy_map_matches_the_typing_surface_and_loads_nothing_heavy():
    import accel_bigmodel

    # The type stub beside the package, generated from _EXPORTS (tools/gen_reexports.py).
    stub = Path(accel_bigmodel.__file__).with_suffix(".pyi")
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    surface = {a.name: "." + s.module for s in imports for a in s.names}
    assert surface == accel_bigmodel._EXPORTS
    assert sorted(n for n in accel_bigmodel.__all__ if n != "__version__") == sorted(surface)
    code = "import sys, accel_bigmodel\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
