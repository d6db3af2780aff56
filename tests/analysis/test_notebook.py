"""The notebooks: valid nbformat 4, saved without outputs, run top to bottom headless (nbclient) on the
embedded engine with no Java to be found; the ``notebooks`` extra brings a front end, and the way the README
gives to install it leaves the compiled kdissect as it is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
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
# Run after a notebook's own cells: which Spark it ran on, and whether the kernel could have found a Java.
PROBE = ("from analysis.session import is_remote, java_command\n"
         "print('spark connect:', is_remote(spark), 'java:', java_command())")


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
def test_notebook_runs_top_to_bottom_headless_without_java(name, monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The checkout on the kernel's path, as `pip install -e .` would have it.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    # The default engine, whatever the caller's environment picks, and no Java: JAVA_HOME points nowhere and
    # PATH is an empty directory (the kernel's Python is started by its full path).
    for var in ("KDISSECT_ENGINE", "KDISSECT_SPARK_REMOTE", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojava"))
    monkeypatch.setenv("PATH", str(tmp_path))
    nb = nbformat.reads((REPO / "notebooks" / name).read_text(), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
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
    assert "spark connect: True java: None" in printed, printed[-500:]
    for text in NOTEBOOKS[name]:
        assert text in printed, (name, text)
    assert images >= PLOTS[name], (name, images)


COMMAND = "pip install 'kafka-dissect[notebooks]'"


def test_the_notebooks_extra_has_a_front_end_and_the_readme_says_how_to_run_them():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["notebooks"]
    assert {re.split(r"[<>=\[ ;]", e)[0] for e in extra} >= {"jupyterlab", "ipykernel", "matplotlib"}
    readme = (REPO / "README.md").read_text()
    for text in (f".venv/bin/{COMMAND}", ".venv/bin/jupyter lab notebooks/",
                 ".venv/bin/jupyter nbconvert --to notebook --execute notebooks/latency.ipynb"):
        assert text in readme, text
    for name in NOTEBOOKS:
        assert COMMAND in "".join(load(name)["cells"][0]["source"]), name


def _would_install(*args: str) -> dict[str, bool]:
    """What ``pip install ARGS`` would install (name -> named directly), from pip's own dry-run report."""
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args],
                       capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout)
    return {i["metadata"]["name"].lower(): bool(i.get("is_direct")) for i in report["install"]}


@pytest.mark.slow
def test_the_extra_by_name_leaves_the_compiled_kdissect_alone():
    """pip, asked for the installed project's extra by name, adds the extra's packages only; asked for the
    checkout's, it installs the checkout again, which compiles the hot path again: what the README warns of."""
    import kdissect
    assert _installed("kafka-dissect")
    by_name = _would_install(COMMAND.split(" ", 2)[2].strip("'"))
    assert "kafka-dissect" not in by_name
    assert "jupyterlab" in by_name or _installed("jupyterlab")
    assert _would_install("-e", ".[notebooks]").get("kafka-dissect") is True
    assert kdissect.__file__.startswith(str(REPO))


def _installed(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version
    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True
