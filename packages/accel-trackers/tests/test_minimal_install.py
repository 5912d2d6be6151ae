"""accel-trackers alone in a fresh environment: no Accelerator, no other accel package, no torch."""

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import glob, importlib.util, sys
    import accel_trackers
    from accel_trackers import filter_trackers, init_trackers

    assert importlib.util.find_spec("torch") is None, "torch must not be needed"
    assert not [m for m in sys.modules if m.startswith("accel") and m.split(".")[0] != "accel_trackers"]
    assert accel_trackers.get_available_trackers() == ["tensorboard"]
    trackers = init_trackers("tensorboard", "plain", config={"lr": 0.1}, logging_dir=sys.argv[1])
    trackers.log({"loss": 0.25, "nested": {"acc": 0.5}}, step=1)
    trackers.finish()
    assert len(glob.glob(sys.argv[1] + "/plain/events.out.tfevents.*")) == 1
    try:
        filter_trackers("wandb")
    except ImportError as err:
        print(err)
    installed = {d.metadata["Name"].lower() for d in __import__("importlib.metadata").metadata.distributions()}
    print(sorted(n for n in installed if n.startswith("accel")))
    """
)


@pytest.mark.slow
def test_runs_in_a_fresh_venv_with_only_this_package(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH; it builds the throw-away environment")
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")
    }
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", "3.11", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(python), f"{PACKAGE}[tensorboard]"],
        check=True,
        env=env,
    )
    script = tmp_path / "plain_script.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [str(python), str(script), str(tmp_path / "logs")],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert 'pip install "accel-trackers[wandb]"' in out
    assert "['accel-trackers']" in out
