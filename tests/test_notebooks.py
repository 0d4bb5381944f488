"""The tutorial notebooks in notebooks/: each runs top to bottom in a fresh kernel with no
network, and the repository stores them without outputs."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
EXPECTED = [
    "01_hooks_and_cache.ipynb",
    "02_induction_heads.ipynb",
    "03_activation_patching.ipynb",
    "04_logit_lens_and_attribution.ipynb",
    "05_gpt2.ipynb",
]
# A guard against a hung kernel, not a speed test: each notebook takes well under a minute.
NOTEBOOK_TIMEOUT_S = 300
KERNEL_NAME = "interp-test-python"


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory) -> KernelSpecManager:
    """A kernel spec that runs this interpreter, so the notebooks import the interp under test
    even where a registered "python3" kernel points at another Python (or none is registered)."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec_dir = kernels / KERNEL_NAME
    spec_dir.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "interp tests",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return KernelSpecManager(kernel_dirs=[str(kernels)])


def kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    env["INTERP_NOTEBOOK_OFFLINE"] = "1"  # 05_gpt2 builds a random GPT-2-shaped model
    env["HF_HUB_OFFLINE"] = "1"  # nothing may download
    env["TRANSFORMERS_OFFLINE"] = "1"
    # The notebooks' models are small: one thread each avoids oversubscribing a shared CPU.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def test_the_tutorials_are_all_there():
    assert [path.name for path in NOTEBOOKS] == EXPECTED


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_top_to_bottom(path, kernel_specs, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    deadline = time.monotonic() + NOTEBOOK_TIMEOUT_S
    client = NotebookClient(
        notebook,
        # nbclient's own kind of manager: with a blocking one its cell timeouts never fire.
        km=AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=kernel_specs),
        # Each cell may use what is left of the notebook's time budget.
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
        allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}},  # files a notebook writes land here
    )
    client.execute(env=kernel_env())  # raises CellExecutionError, with the cell, on any error
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells)
    figures = [
        output
        for cell in code_cells
        for output in cell.outputs
        if "application/vnd.plotly.v1+json" in output.get("data", {})
    ]
    views = [
        output
        for cell in code_cells
        for output in cell.outputs
        if "CircuitsVis.render" in output.get("data", {}).get("text/html", "")
    ]
    assert figures, "the notebook should show plotly figures inline"
    assert views, "the notebook should show circuitsvis views inline"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [], f"cell {index} of {path.name} has stored outputs; clear them"
        assert cell.execution_count is None, f"cell {index} of {path.name} has an execution count"
    assert "widgets" not in notebook.metadata, f"{path.name} stores widget state; clear it"


def test_readme_links_every_notebook():
    readme = (NOTEBOOKS_DIR.parent / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in readme, f"README.md does not link {path.name}"
