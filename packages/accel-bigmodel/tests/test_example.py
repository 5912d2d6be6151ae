import os
import runpy

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "big_model_inference.py")


def test_big_model_inference_example_runs(capsys):
    runpy.run_path(EXAMPLE, run_name="__main__")
    out = capsys.readouterr().out
    assert "ok: outputs match the original model" in out
    assert "on disk: ['blocks." in out
