"""The README's main job and the seed examples run end to end through the launcher."""

import re
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = [sys.executable, "-m", "accel_launch.cli", "launch", "--quiet"]


@pytest.mark.multiprocess
def test_quicktour_on_two_processes():
    out = run_command(
        [*LAUNCH, "--num_processes", "2", str(ROOT / "examples/quicktour.py"), "--epochs", "2"],
        timeout=300,
    ).stdout
    assert "on 509 samples (2 processes)" in out
    accuracy = float(out.strip().splitlines()[-1].split("eval accuracy ")[1].split()[0])
    assert accuracy > 0.85, out


def _epoch_accuracies(out: str, unit: str) -> list[float]:
    """The accuracy of each ``epoch N: loss L, accuracy A on M <unit>`` line, in order."""
    return [
        float(a)
        for a in re.findall(
            rf"^epoch \d+: loss [\d.]+, accuracy ([\d.]+) on \d+ {unit}$", out, re.M
        )
    ]


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_cv_example_learns_the_digits_on_two_processes():
    pytest.importorskip("sklearn", reason="the example reads scikit-learn's bundled digits")
    out = run_command(
        [*LAUNCH, "--cpu", "--num_processes", "2", str(ROOT / "examples/cv_example.py")],
        timeout=360,
    ).stdout
    accuracies = _epoch_accuracies(out, "images")
    assert len(accuracies) == 5, out  # one line per epoch, printed by the main process only
    assert "on 359 images" in out  # every held-out image counted once by gather_for_metrics
    assert accuracies[-1] > 0.9, out  # chance is 0.1
    assert accuracies[-1] > accuracies[0], out


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_nlp_example_learns_the_languages_on_two_processes():
    pytest.importorskip("wordfreq", reason="the example reads wordfreq's bundled word lists")
    out = run_command(
        [*LAUNCH, "--cpu", "--num_processes", "2", str(ROOT / "examples/nlp_example.py")],
        timeout=360,
    ).stdout
    accuracies = _epoch_accuracies(out, "words")
    assert len(accuracies) == 5, out
    assert "on 3213 words" in out
    assert accuracies[-1] > 0.6, out  # chance is 0.2
    assert accuracies[-1] > accuracies[0], out


@pytest.mark.multiprocess
def test_distributed_inference_on_two_processes():
    out = run_command(
        [*LAUNCH, "--num_processes", "2", str(ROOT / "examples/distributed_inference.py")],
        timeout=300,
    ).stdout
    assert "process 0: ['a dog', 'a cat']" in out
    assert "process 1: ['a chicken']" in out
    assert "3 completions gathered from 2 processes" in out


@pytest.mark.multiprocess
def test_accel_test_command_on_two_processes():
    result = run_command(
        [sys.executable, "-m", "accel_launch.cli", "test", "--num_processes", "2"], timeout=300
    )
    assert "[process 0/2, MULTI_CPU, cpu] all checks passed" in result.stdout
    assert "accel test: all checks passed." in result.stdout
    # It says what it is doing: the start, the launch line, each check as it passes.
    assert result.stdout.startswith("accel test: starting the processes")
    assert "accel launch: 2 processes on 1 machine via torchrun, MULTI_CPU" in result.stderr
    assert "accel test: 2 process(es) ready (MULTI_CPU, cpu); 4 checks" in result.stdout
    for check in ("state", "process_control", "split_between_processes", "collectives"):
        assert re.search(rf"accel test: ok   {check} \(\d+\.\d\ds\)", result.stdout), check


def test_examples_readme_lists_every_example():
    readme = (ROOT / "examples" / "README.md").read_text()
    for script in sorted((ROOT / "examples").glob("*.py")):
        assert f"[`{script.name}`]({script.name})" in readme, script.name
