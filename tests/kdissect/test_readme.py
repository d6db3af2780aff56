"""The README's Python example runs as written (output directory moved to a temp dir), and writes
somewhere else than ./run-sample.sh's dataset."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.kdissect.conftest import REPO


def test_python_api_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / "README.md").read_text()
    code = re.search(r"## Python API\n\n```python\n(.*?)```", text, re.S)
    assert code, "README has no Python API example"
    if not (REPO / "samples" / "mixed.pcap").exists():
        pytest.skip("samples/mixed.pcap not recorded")
    monkeypatch.chdir(REPO)
    (outdir,) = re.findall(r'write_dataset\(\[[^]]*\], "([^"]+)"', code.group(1))
    sample_out = re.search(r"kdissect decode \S+ -o (\S+)", (REPO / "run-sample.sh").read_text())
    assert sample_out and outdir.rstrip("/") != sample_out.group(1).rstrip("/"), (outdir, sample_out)
    code_text = code.group(1).replace(f'"{outdir}"', repr(os.fspath(tmp_path / "out")))
    exec(compile(code_text, "README.md", "exec"), {})
    assert any((tmp_path / "out" / "exchanges").glob("mixed.pcap-*.parquet"))
