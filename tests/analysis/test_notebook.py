"""The notebooks: valid nbformat 4, saved without outputs, and run top to bottom headless (nbclient)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = {
    # notebook: texts its outputs must show (real figures from the bundled samples)
    "explore.ipynb": ("UNKNOWN_TOPIC_OR_PARTITION", "TOPIC_ALREADY_EXISTS", "UNKNOWN_PRODUCER_ID", "p99_ms"),
    "latency.ipynb": ("p999_ms", "max_wait_ms", "size_bucket"),
    "consumer-groups.ipynb": ("kd-rb-tansu", "kd-848-mock", "consumer (KIP-848)", "kd-lag-tansu"),
}
PLOTS = {"explore.ipynb": 0, "latency.ipynb": 4, "consumer-groups.ipynb": 3}


def load(name: str) -> dict:
    return json.loads((REPO / "notebooks" / name).read_text())


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_is_nbformat_4_without_outputs(name):
    nb = load(name)
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["language"] == "python"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.reads((REPO / "notebooks" / name).read_text(), as_version=4))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_top_to_bottom_headless(name, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The checkout on the kernel's path, as `pip install -e .` would have it.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    nb = nbformat.reads((REPO / "notebooks" / name).read_text(), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO / "notebooks")}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if any cell fails
    texts, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", ""))
            data = out.get("data", {})
            texts.append(data.get("text/plain", ""))
            images += "image/png" in data
    printed = "\n".join(texts)
    for text in NOTEBOOKS[name]:
        assert text in printed, (name, text)
    assert images >= PLOTS[name], (name, images)
