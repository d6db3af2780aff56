"""Compiles the per-packet hot path with Cython at install time (issue #8).

Decoding small messages in pure Python ran at a third of tshark's rate, spread over reading,
reassembly, framing, body decoding and row building with no single hot spot left. Compiling
those modules as they are removes most of the interpreter's dispatch cost without a second
implementation: the ``.py`` files stay the only source, and the fallback when there is no
compiler (or with ``KDISSECT_PURE=1``, see ``hotpath/__init__.py``) is the same code.

A ``.pxd`` file beside a module (``dissector/events.pxd``, ``kdissect/dataset/rows.pxd``, ...) tells Cython,
and only Cython, that some of its classes are extension types and of what type a few locals and
attributes are. Their fields are then read from C structs, not looked up by name, and calls between
their methods are C calls: attribute look-ups were the largest single cost left per exchange. The
``.py`` stays the only source of behaviour; Python ignores the ``.pxd``. A dataclass declared there is
built by Cython at compile time, where Python would exec its generated methods at import, ~0.6 ms
each: that was 24 ms of every run's start-up for the 38 a decode loaded.

What cannot be said in Python at any speed (a CRC over raw bytes, a list's storage) is C in one
module, ``hotpath/_speedups.pyx`` (``C_MODULES``), with a pure-Python twin of each function;
compiled modules cimport the C functions, their ``.py`` imports ``hotpath.speedups``. It is built
first: the modules that cimport it cannot load without it, so if it does not compile, nothing is.

Everything else is in ``pyproject.toml``. A failed compile is a warning, never a failed
install: kdissect then runs as Python.

The build runs on every core (Cython's translation and the C compiles alike), the largest modules
first so none is left compiling alone at the end, and says how far it is: one line per module, which
``pip install -v`` shows (``run-sample.sh`` does, filtered, keeping pip's whole log). Modules are
compiled without debug information (``-g0``): the generated C is ~35 MB, and debug information for it
was a third of the compile time and nine tenths of the modules' size, for nobody's debugger.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The modules every packet or exchange passes through. Packages' __init__ files stay Python:
# hotpath/__init__.py, which each of them imports first, installs the KDISSECT_PURE switch.
HOT_MODULES = [
    "capture/capfile.py", "capture/causal.py", "capture/control.py", "capture/delivery.py", "capture/detect.py",
    "capture/events.py", "capture/fastpath.py", "capture/flows.py", "capture/options.py", "capture/packet.py",
    "capture/pcapfile.py", "capture/pcapng.py", "capture/pipeline.py", "capture/reassembly.py",
    "capture/records.py", "capture/release.py", "capture/shard.py", "capture/stats.py", "capture/stream.py",
    "capture/tlsflow.py", "capture/tracker.py", "capture/tls/records.py", "capture/tls/session.py",
    "dissector/batchheader.py", "dissector/codecs.py", "dissector/connection.py", "dissector/decoders.py",
    "dissector/embedded.py", "dissector/events.py", "dissector/framing.py", "dissector/held.py", "dissector/infer.py",
    "dissector/ints.py", "dissector/legacy.py", "dissector/primitives.py", "dissector/protocols.py",
    "dissector/records.py", "dissector/recordset.py", "dissector/redact.py", "dissector/resync.py", "dissector/skim.py",
    "dissector/schema/_decoders.py", "dissector/topics.py", "dissector/views.py", "dissector/v07/connection.py",
    "dissector/v07/messages.py", "dissector/v07/wire.py", "dissector/v07/views.py",
    "kdissect/dataset/bodies.py", "kdissect/dataset/columns.py", "kdissect/dataset/writer.py", "kdissect/run/decode.py",
    "kdissect/metrics/fold.py", "kdissect/metrics/shares.py", "kdissect/dataset/payload_columns.py",
    "kdissect/dataset/rows.py",
    "kdissect/dataset/record_rows.py",
    "payloads/avro.py", "payloads/avrofast.py", "payloads/decoder.py", "payloads/framing.py", "payloads/render.py",
]

# The C helpers, with their pure twins beside them (hotpath/_speedups_pure.py).
C_MODULES = ["hotpath/_speedups.pyx", "hotpath/_cells.pyx"]

# Python semantics exactly: annotations are not C types (a Counter stays a valid dict argument),
# and nothing that changes arithmetic or indexing is switched on.
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": False}


def _warn(msg: str) -> None:
    print(f"kafka-dissect: {msg}; kdissect will run as pure Python (slower, same output)", file=sys.stderr)


def _say(msg: str) -> None:
    print(f"kafka-dissect: {msg}", file=sys.stderr, flush=True)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: a module that does not compile stays Python."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None or self.parallel is True:
            self.parallel = _cores()

    def run(self) -> None:
        # Largest first: a big module started last would compile alone while the other cores idle.
        self.extensions.sort(key=lambda e: -sum(os.path.getsize(s) for s in e.sources if os.path.exists(s)))
        self._done, self._lock, self._started = 0, threading.Lock(), time.monotonic()
        self._total, self._helpers_failed = len(self.extensions), False
        if self.extensions:
            _say(f"compiling {len(self.extensions)} modules with {self.parallel} parallel jobs, largest first")
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers: the .py files still work
            _warn(f"compiling the hot path failed ({exc})")

    def build_extensions(self) -> None:
        # The C helpers alone first: every module that cimports them needs them to load.
        helpers = [e for e in self.extensions if _is_helper(e)]
        for ext in helpers:
            self.build_extension(ext)
        if self._helpers_failed:
            _warn("the C helpers (hotpath/_speedups.pyx) did not compile, so no module is")
            return
        everything, self.extensions = self.extensions, [e for e in self.extensions if not _is_helper(e)]
        try:
            super().build_extensions()
        finally:
            self.extensions = everything        # an in-place build copies them all next to their sources

    def build_extension(self, ext) -> None:
        if self.compiler.compiler_type == "unix":
            ext.extra_compile_args = [*ext.extra_compile_args, "-g0"]
        try:
            super().build_extension(ext)
            outcome = "compiled"
        except Exception as exc:
            _warn(f"{ext.name} did not compile ({exc})")
            outcome = "left as Python"
            self._helpers_failed |= _is_helper(ext)
        with self._lock:
            self._done += 1
            _say(f"{outcome} {ext.name} ({self._done}/{self._total}, "
                 f"{time.monotonic() - self._started:.0f} s)")


def _is_helper(ext) -> bool:
    return ext.name in {m[:-len(".pyx")].replace("/", ".") for m in C_MODULES}


def extensions() -> list:
    if os.environ.get("KDISSECT_PURE", "") not in ("", "0"):   # as hotpath.pure_requested
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        _warn("Cython is not available")
        return []
    started = time.monotonic()
    _say(f"translating {len(C_MODULES) + len(HOT_MODULES)} modules to C with Cython ({_cores()} processes) ...")
    modules = cythonize(C_MODULES + HOT_MODULES, compiler_directives=DIRECTIVES, nthreads=_cores(), quiet=True)
    _say(f"translated in {time.monotonic() - started:.0f} s")
    return modules


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
