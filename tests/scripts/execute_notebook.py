"""Execute a notebook in a real Jupyter kernel: ``python execute_notebook.py IN.ipynb OUT.ipynb
KERNEL_NAME``. The kernel spec is looked up on ``JUPYTER_PATH``; errors in cells are kept in the
outputs (the caller reads them) instead of stopping the run."""

import sys

import nbformat
from nbclient import NotebookClient

source, target, kernel_name = sys.argv[1:4]
notebook = nbformat.read(source, as_version=4)
client = NotebookClient(
    notebook,
    kernel_name=kernel_name,
    timeout=300,
    startup_timeout=120,
    allow_errors=True,
    resources={"metadata": {"path": str(__import__("pathlib").Path(source).parent)}},
)
client.execute()
nbformat.write(notebook, target)
