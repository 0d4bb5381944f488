"""The tutorial notebooks in notebooks/: each runs top to bottom in a fresh kernel with no
network, and the repository stores them without outputs. Running them needs the
``notebooks`` extra (``pip install -e ".[notebooks]"``); without it those tests skip."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
EXPECTED = [
    "01_hooks_and_cache.ipynb",
    "02_induction_heads.ipynb",
    "03_activation_patching.ipynb",
    "04_logit_lens_and_attribution.ipynb",
    "05_gpt2.ipynb",
    "06_sparse_autoencoders.ipynb",
    "07_harvesting.ipynb",
    "08_dashboard.ipynb",
    "09_model_families.ipynb",
    "10_circuit_tracing.ipynb",
    "11_attention_circuits.ipynb",
]
# A guard against a hung kernel, not a speed test: each notebook takes well under a minute.
NOTEBOOK_TIMEOUT_S = 300
KERNEL_NAME = "interp-test-python"
NEEDS_EXTRA = 'the notebooks extra: pip install -e ".[notebooks]"'


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory):
    """A kernel spec that runs this interpreter, so the notebooks import the interp under test
    even where a registered "python3" kernel points at another Python (or none is registered)."""
    kernelspec = pytest.importorskip("jupyter_client.kernelspec", reason=NEEDS_EXTRA)
    pytest.importorskip("ipykernel", reason=NEEDS_EXTRA)
    kernels = tmp_path_factory.mktemp("kernels")
    spec_dir = kernels / KERNEL_NAME
    spec_dir.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "interp tests",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return kernelspec.KernelSpecManager(kernel_dirs=[str(kernels)])


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
    nbformat = pytest.importorskip("nbformat", reason=NEEDS_EXTRA)
    nbclient = pytest.importorskip("nbclient", reason=NEEDS_EXTRA)
    from jupyter_client.manager import AsyncKernelManager

    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    deadline = time.monotonic() + NOTEBOOK_TIMEOUT_S
    client = nbclient.NotebookClient(
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
    # With ipywidgets (the notebooks extra), tqdm draws its notebook bar instead of warning.
    warnings = [
        output["text"]
        for cell in code_cells
        for output in cell.outputs
        if output.get("name") == "stderr" and "IProgress not found" in output["text"]
    ]
    assert not warnings, warnings[0] if warnings else ""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_stored_without_outputs(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))  # plain JSON: no extra needed
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert cell["outputs"] == [], f"cell {index} of {path.name} has stored outputs; clear them"
        assert cell["execution_count"] is None, f"cell {index} of {path.name} has a count"
    assert "widgets" not in notebook["metadata"], f"{path.name} stores widget state; clear it"


def test_readme_links_every_notebook():
    readme = (NOTEBOOKS_DIR.parent / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in readme, f"README.md does not link {path.name}"
