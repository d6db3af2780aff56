"""Compiled decoders kept between runs (kdissect.run.codecache): where, when, and that they decode alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kdissect.run import codecache
from kdissect.run.codecache import DirectoryCodeCache

from tests.kdissect.conftest import REPO
from tests.kdissect.run.test_parallel import rows

SAMPLES = REPO / "samples"


def test_entries_are_written_whole_and_read_back(tmp_path: Path) -> None:
    cache = DirectoryCodeCache(tmp_path / "a" / "b")
    assert cache.load("k") is None
    cache.store("k", b"code")
    assert cache.load("k") == b"code"
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["k.code"]   # no temporary left behind


def test_what_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    blocked = DirectoryCodeCache(tmp_path / "file" / "below")              # a file where the directory would be
    blocked.store("k", b"code")
    assert blocked.load("k") is None and (tmp_path / "file").read_text() == ""
    readonly = DirectoryCodeCache(tmp_path / "ro", write=False)
    readonly.store("k", b"code")
    assert not (tmp_path / "ro").exists() and readonly.load("k") is None


def test_kept_where_python_keeps_bytecode(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dissector
    package = Path(dissector.__file__).resolve().parent
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cache = codecache.default_code_cache()
    assert cache.root == package / "__pycache__" / "decoders" and cache.write
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    cache = codecache.default_code_cache()
    assert cache.root == tmp_path / package.relative_to(package.anchor) / "decoders" and not cache.write


_DECODE = """
import sys, kdissect
from pathlib import Path
samples, out = Path(sys.argv[1]), Path(sys.argv[2])
kdissect.write_dataset(sorted(samples.glob("*.pcap")) + sorted((samples / "v07").glob("*.pcap")), out,
                       records=True, record_bytes=True)
"""


def _decode(out: Path, prefix: Path, write: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run([sys.executable, "-c", _DECODE, str(SAMPLES), str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_every_sample_decodes_alike_from_cached_code(tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    _decode(tmp_path / "cold", prefix, write=True)
    entries = list(prefix.rglob("decoders/*.code"))
    assert len(entries) > 20            # the samples hold dozens of kinds of message not compiled at install
    _decode(tmp_path / "warm", prefix, write=True)
    assert sorted(prefix.rglob("decoders/*.code")) == sorted(entries)      # all read back, none added
    _decode(tmp_path / "uncached", tmp_path / "none", write=False)
    assert not (tmp_path / "none").exists()
    cold = rows(tmp_path / "cold")
    assert cold["exchanges"] and cold == rows(tmp_path / "warm") == rows(tmp_path / "uncached")
