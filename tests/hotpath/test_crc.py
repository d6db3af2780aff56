"""hotpath.crc: the crc32c package's C function, without the package's slow import."""

from __future__ import annotations

import subprocess
import sys

import crc32c as package

from hotpath import crc


def test_same_function_as_the_package() -> None:
    data = bytes(range(256)) * 37
    for view in (data, data[:1], b"", memoryview(data)[3:1001], bytearray(data[:9])):
        assert crc.crc32c(view) == package.crc32c(view)
    assert crc.crc32c(b"123456789") == 0xE3069283


def test_the_package_metadata_is_not_imported() -> None:
    code = "import sys, hotpath.crc; print('importlib.metadata' in sys.modules, 'crc32c' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_falls_back_to_the_package_import(monkeypatch) -> None:
    monkeypatch.setattr(crc.importlib.util, "find_spec", lambda name: None)
    assert crc._load() is package.crc32c
