"""Compiled body decoders kept on disk between runs (a :class:`dissector.decoders.CodeCache`).

A decode compiles a decoder for every kind of message it meets, 1-3 ms each: on a
short capture with dozens of kinds that was a fifth of the run. Kept like Python
keeps bytecode: in ``__pycache__`` beside the ``dissector`` package (or under
``sys.pycache_prefix``), written only when the interpreter writes bytecode (not under
``PYTHONDONTWRITEBYTECODE``). A file that cannot be read or written is ignored: that
decoder is compiled again, as without a cache. Trusted as bytecode is: whoever can
write there can already change the package's own ``.pyc`` files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class DirectoryCodeCache:
    """One file per key in ``root``, written whole or not at all."""

    def __init__(self, root: Path, write: bool = True) -> None:
        self.root = root
        self.write = write

    def load(self, key: str) -> bytes | None:
        try:
            return (self.root / f"{key}.code").read_bytes()
        except OSError:
            return None

    def store(self, key: str, data: bytes) -> None:
        if not self.write:
            return
        path = self.root / f"{key}.code"
        # Under a name of this process's own, then renamed: workers of one decode store the same key at once.
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass


def default_code_cache() -> DirectoryCodeCache:
    import dissector
    package = Path(dissector.__file__).resolve().parent
    if sys.pycache_prefix:
        root = Path(sys.pycache_prefix) / package.relative_to(package.anchor) / "decoders"
    else:
        root = package / "__pycache__" / "decoders"
    return DirectoryCodeCache(root, write=not sys.dont_write_bytecode)


def use_default_code_cache() -> None:
    """Give the process's shared decoders (:func:`dissector.decoders.default_decoders`) the cache,
    unless a caller gave them one already."""
    from dissector.decoders import default_decoders
    decoders = default_decoders()
    if decoders.code_cache is None:
        decoders.code_cache = default_code_cache()
