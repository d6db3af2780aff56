"""Which kdissect a Python process runs: so that ``spark-decode`` can tell when its workers run another.

Spark hands kdissect's objects between the driver and its Python workers by pickle, which names
modules and classes and leaves their code to whatever each side imports. A worker that imports
another copy of kdissect (another checkout in its working directory or first on its PYTHONPATH, a
pure-Python build beside a compiled one) fails in ways that name neither: ``KeyError: 0`` when the
driver unpickles a pure-Python worker's counts into its compiled class. :func:`fingerprint` is taken
on the driver and in one Spark task; :func:`probe` is pickled by value (:func:`by_value`), so that
the task runs this code whatever copy of kdissect, if any, the worker imports.

For the same reason it imports none of kdissect's modules but the worker's own ``hotpath``, which says its build.
"""

from __future__ import annotations

import hashlib
import os
import sys
from importlib.util import find_spec
from types import ModuleType
from typing import Any

# What a task imports (hotpath.PACKAGES, repeated: importing it here would tie the probe to the worker's copy).
PACKAGES = ("capture", "dissector", "hotpath", "kdissect", "payloads")
SOURCES = (".py", ".pyx", ".pxd")      # the code, compiled or not; .pxd: the compiled classes' layout

Fingerprint = tuple[str, str, str, str]     # (Python, directory holding kdissect or "", build, sources hash)


def fingerprint() -> Fingerprint:
    """This process's Python, the directory its ``kdissect`` package is imported from ("" when it
    cannot be), its build (``compiled`` or ``pure Python``: their pickles differ) and a hash of the
    sources of kdissect's packages (where they live left out: a cluster may install them anywhere)."""
    where = ""
    sources: list[tuple[str, str]] = []              # (path from the package's parent, path)
    for name in PACKAGES:
        spec = find_spec(name)
        for root in (spec.submodule_search_locations or []) if spec else []:
            if name == "kdissect":
                where = os.path.dirname(os.path.abspath(root))
            for here, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                paths = [os.path.join(here, f) for f in files if f.endswith(SOURCES)]
                sources += [(os.path.relpath(p, os.path.dirname(root)), p) for p in paths]
    digest = hashlib.sha256()
    for rel, path in sorted(sources):
        with open(path, "rb") as fh:
            digest.update(rel.encode() + b"\0" + fh.read() + b"\0")
    return sys.executable, where, _build() if where else "", digest.hexdigest()[:12]


def _build() -> str:
    try:
        import hotpath
        # The classes a task pickles are capture's, dissector's and kdissect's: hotpath's C helpers are not.
        compiled = any(not m.startswith("hotpath.") for m in hotpath.available()) and not hotpath.runs_as_python()
    except Exception:  # noqa: BLE001 - an older copy of kdissect without these functions
        return "unknown build"
    return "compiled" if compiled else "pure Python"


def probe(_: Any) -> Fingerprint:
    """:func:`fingerprint`, as a Spark task."""
    return fingerprint()


def by_value() -> ModuleType:
    """This module, made to travel to Spark tasks as code (pickled by value) rather than by name."""
    from pyspark import cloudpickle
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    return module
