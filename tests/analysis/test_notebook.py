"""notebooks/explore.ipynb: valid nbformat 4, saved without outputs, and its code cells run in order."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "explore.ipynb"
SAMPLES = ("mixed.pcap", "tansu-admin-errors.pcap", "legacy-clients.pcap")

# Run like a kernel would: a fresh interpreter in notebooks/, cells in one namespace, in order.
RUNNER = """
import json, sys
cells = [c for c in json.load(open(sys.argv[1]))["cells"] if c["cell_type"] == "code"]
ns = {"__name__": "__main__"}
for i, cell in enumerate(cells, 1):
    print(f"--- cell {i}", flush=True)
    exec(compile("".join(cell["source"]), f"<cell {i}>", "exec"), ns)
"""


def load() -> dict:
    return json.loads(NOTEBOOK.read_text())


def test_notebook_is_nbformat_4_without_outputs():
    nb = load()
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["language"] == "python"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    try:
        import nbformat
    except ImportError:
        return
    nbformat.validate(nbformat.reads(NOTEBOOK.read_text(), as_version=4))


def test_notebook_code_cells_run_in_order():
    kdissect = pytest.importorskip("kdissect")
    missing = [n for n in ("write_dataset", "exchanges_frame") if not hasattr(kdissect, n)]
    if missing:
        pytest.skip(f"kdissect does not provide {', '.join(missing)} yet")
    absent = [n for n in SAMPLES if not (REPO / "samples" / n).exists()]
    if absent:
        pytest.skip(f"bundled samples missing: {', '.join(absent)}")
    # The checkout on the path, as `pip install -e .` would have it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK)], cwd=NOTEBOOK.parent, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    n_code = sum(c["cell_type"] == "code" for c in load()["cells"])
    assert f"--- cell {n_code}" in out
    # Spark's show() printed the errors job's table with the sample's real failures.
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out and "TOPIC_ALREADY_EXISTS" in out
    assert re.search(r"\|Produce\s*\|legacy-kp-0\.10\.0-gzip\s*\|59\s*\|UNKNOWN_PRODUCER_ID", out)  # by_topic
    assert "|api_name" in out and "p99_ms" in out
