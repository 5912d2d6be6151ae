"""notebook_launcher inside a real Jupyter kernel (ipykernel, driven by nbclient): a training
function defined in a cell runs on two forked processes whose output reaches the notebook, and
a kernel that already holds a process group gets the launcher's refusal as the cell's error."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from accel_state.testing import free_port, run_command

nbformat = pytest.importorskip(
    "nbformat", reason="the Jupyter tools are not installed (the workspace's dev group has them)"
)
pytest.importorskip("nbclient", reason="nbclient is not installed (the dev group has it)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (the dev group has it)")

EXECUTE = Path(__file__).parent / "scripts" / "execute_notebook.py"
KERNEL = "accel-notebook-test"

TRAIN = """
import torch
from accel import Accelerator, notebook_launcher


def train(steps):
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for _, (x, y) in zip(range(steps), loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    losses = accelerator.gather(loss.detach().reshape(1))
    weight = accelerator.unwrap_model(model).weight.detach().flatten().tolist()
    print("RESULT " + __import__("json").dumps({
        "rank": accelerator.process_index,
        "world": accelerator.num_processes,
        "weight": weight,
        "gathered": losses.tolist(),
    }), flush=True)
"""


def kernel_environment(tmp_path: Path) -> dict[str, str]:
    """A kernel spec for this interpreter in a folder of its own, found through JUPYTER_PATH."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "accel test kernel",
                "language": "python",
            }
        )
    )
    return {
        "JUPYTER_PATH": str(tmp_path / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
    }


def execute(tmp_path: Path, name: str, cells: list[str]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    source, target = tmp_path / f"{name}.ipynb", tmp_path / f"{name}.out.ipynb"
    nbformat.write(notebook, source)
    run_command(
        [sys.executable, str(EXECUTE), str(source), str(target), KERNEL],
        timeout=420,
        env=kernel_environment(tmp_path),
    )
    return nbformat.read(target, as_version=4)


def text_of(cell: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def errors_of(cell: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [out for out in cell.outputs if out.output_type == "error"]


def test_a_notebook_trains_on_two_processes(tmp_path):
    launch = f"notebook_launcher(train, args=(3,), num_processes=2, use_port='{free_port()}')"
    executed = execute(tmp_path, "train", [TRAIN, launch, "print('after the launch')"])
    define, launched, after = executed.cells
    assert not errors_of(define) and not errors_of(launched), launched.outputs
    output = text_of(launched)
    assert "Launching training on 2 CPU processes." in output
    # The two processes write to the kernel's output at once: their lines may interleave.
    results = sorted(
        (json.loads(found) for found in re.findall(r"RESULT (\{[^{}]*\})", output)),
        key=lambda row: row["rank"],
    )
    assert [row["rank"] for row in results] == [0, 1], output
    assert all(row["world"] == 2 and len(row["gathered"]) == 2 for row in results)
    # Data-parallel training keeps both replicas equal, and the steps moved the weights.
    assert results[0]["weight"] == results[1]["weight"]
    assert results[0]["gathered"] == results[1]["gathered"]
    import torch

    torch.manual_seed(0)
    initial = torch.nn.Linear(4, 1).weight.detach().flatten().tolist()
    assert results[0]["weight"] != pytest.approx(initial)
    assert text_of(after) == "after the launch\n"


def test_a_kernel_holding_a_process_group_gets_the_refusal(tmp_path):
    group = (
        "import torch.distributed as dist\n"
        f"dist.init_process_group('gloo', init_method='tcp://127.0.0.1:{free_port()}', "
        "rank=0, world_size=1)"
    )
    launch = "notebook_launcher(train, args=(1,), num_processes=2)"
    executed = execute(tmp_path, "refused", [TRAIN, group, launch])
    assert not errors_of(executed.cells[1]), executed.cells[1].outputs
    (error,) = errors_of(executed.cells[2])
    assert error.ename == "RuntimeError"
    assert "must not have one; got a torch.distributed process group" in error.evalue
    assert "destroy_process_group()" in error.evalue
    assert "RESULT " not in text_of(executed.cells[2])
