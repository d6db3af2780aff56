"""The compiled hot path (setup.py, Cython) and its pure-Python fallback give the same dataset.

CI sets ``KDISSECT_REQUIRE_COMPILED=1``: there a build that silently fell back to Python fails
these tests instead of passing slowly.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hotpath as compiled
from tests.kdissect.run.test_parallel import rows

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
PUBLIC = REPO.parent / "shared" / "public-captures"


def _setup_list(name: str) -> list[str]:
    """A list of paths in setup.py (read, not imported: setup.py runs setup())."""
    tree = ast.parse((REPO / "setup.py").read_text())
    return ast.literal_eval(next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == name))


def hot_modules() -> list[str]:
    """setup.py's HOT_MODULES and C_MODULES as module names."""
    return [p.rpartition(".")[0].replace("/", ".") for p in _setup_list("HOT_MODULES") + _setup_list("C_MODULES")]


def _require_compiled() -> None:
    if not compiled.available():
        if os.environ.get("KDISSECT_REQUIRE_COMPILED"):
            pytest.fail("no compiled module: the install fell back to Python (see pip's output for why)")
        pytest.skip("kdissect is installed without its compiled modules")


def _run(code: str, *, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"}
    if pure:
        env["KDISSECT_PURE"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


_LOADED = """
import json, capture.pipeline, kdissect.run.decode, kdissect.dataset.writer, dissector.v07.connection, capture.tlsflow
import hotpath as compiled
print(json.dumps(compiled.compiled_modules()))
"""


def test_every_hot_module_is_compiled() -> None:
    _require_compiled()
    assert compiled.available() == sorted(hot_modules())
    loaded = json.loads(_run(_LOADED, pure=False))
    assert {"capture.pipeline", "dissector.connection", "kdissect.dataset.rows", "dissector.v07.connection",
            "hotpath._speedups"} <= set(loaded)
    assert set(loaded) <= set(hot_modules())


def test_kdissect_pure_loads_only_python_sources() -> None:
    _require_compiled()
    assert json.loads(_run(_LOADED, pure=True)) == []


def test_kdissect_pure_holds_for_whichever_package_loads_first() -> None:
    """The switch is installed by ``hotpath``, which each package imports first: a program that loads
    only the payload decoders (no dissector) still gets them from source."""
    _require_compiled()
    code = "import json, payloads.avrofast, hotpath; print(json.dumps(hotpath.compiled_modules()))"
    assert "payloads.avrofast" in json.loads(_run(code, pure=False))
    assert json.loads(_run(code, pure=True)) == []


_VERSION = "import sys; from kdissect.commands.cli import main; sys.argv = ['kdissect', '--version']; main()"


def test_version_says_which_build_runs() -> None:
    _require_compiled()
    # Also says that nothing is stale: an edited, not rebuilt checkout would be named here.
    assert f"(compiled hot path, {len(hot_modules())} modules)" in _run(_VERSION, pure=False)
    assert "(pure Python: KDISSECT_PURE is set)" in _run(_VERSION, pure=True)


def test_hot_modules_exist() -> None:
    assert all((REPO / p).is_file() for p in _setup_list("HOT_MODULES") + _setup_list("C_MODULES"))


def test_every_pxd_declares_a_compiled_module() -> None:
    # A .pxd beside a module that is not compiled would declare types nothing uses; but one of inline
    # functions alone (dissector/fixedwidth.pxd) is code its compiled cimporters inline, and its module
    # must stay Python: compiled, its functions would be defined twice.
    pxds = [p for pkg in ("capture", "dissector", "kdissect", "payloads", "hotpath")
            for p in (REPO / pkg).rglob("*.pxd")]
    assert pxds
    inline_only = {p for p in pxds if "cdef inline" in p.read_text()
                   and not any(w in p.read_text() for w in ("cdef class", "cpdef"))}
    assert {Path("dissector/fixedwidth.pxd")} <= {p.relative_to(REPO) for p in inline_only}
    assert not {".".join(p.relative_to(REPO).with_suffix("").parts) for p in inline_only} & set(hot_modules())
    assert {".".join(p.relative_to(REPO).with_suffix("").parts) for p in set(pxds) - inline_only} <= set(hot_modules())


_TYPES = """
import json
from dissector import events, records, decoders, framing
from capture import flows, pipeline, reassembly
from kdissect.dataset import rows
from kdissect.dataset import writer as dataset
HEAP = 1 << 9
classes = [events.Request, events.Response, events.Exchange, events.Anomaly, events.DecodeFailure,
           records.RecordsSummary, decoders.Decoded, framing.RequestHeader, pipeline.CaptureEvent,
           rows.RowBuilder, rows.Tally, dataset.Counts, dataset.CaptureWriter, flows.Flow, reassembly.HalfStream]
print(json.dumps({c.__qualname__: not c.__flags__ & HEAP for c in classes}))
"""


def test_the_pxd_classes_are_extension_types_only_when_compiled() -> None:
    _require_compiled()
    assert set(json.loads(_run(_TYPES, pure=False)).values()) == {True}
    assert set(json.loads(_run(_TYPES, pure=True)).values()) == {False}


_DECODE = """
import sys, kdissect
from pathlib import Path
samples, out = Path(sys.argv[1]), Path(sys.argv[2])
plain = sorted(samples.glob("*.pcap")) + sorted((samples / "v07").glob("*.pcap"))
kdissect.write_dataset(plain, out / "plain", records=True, record_bytes=True)
tls = sorted((samples / "tls").glob("*.pcap"))
kdissect.write_dataset(tls, out / "tls", records=True, tls_keylog=sorted((samples / "tls").glob("*.keys")))
public = Path(sys.argv[3])
if public.is_dir():
    kdissect.write_dataset([public], out / "public", records=True, record_bytes=True)
"""


@pytest.mark.slow
def test_pure_and_compiled_decode_every_sample_alike(tmp_path: Path) -> None:
    _require_compiled()
    for mode in ("compiled", "pure"):
        code = f"import sys; sys.argv = ['-', {str(SAMPLES)!r}, {str(tmp_path / mode)!r}, {str(PUBLIC)!r}]\n"
        _run(code + _DECODE, pure=mode == "pure")
    for part in ("plain", "tls", "public"):
        if (tmp_path / "compiled" / part).exists():
            pure, comp = rows(tmp_path / "pure" / part), rows(tmp_path / "compiled" / part)
            assert comp["exchanges"], part
            assert comp == pure, part


def test_a_module_edited_after_its_build_loads_from_source(tmp_path: Path) -> None:
    import importlib.machinery

    package = tmp_path / "capture"
    package.mkdir()
    source = package / "hot.py"
    built = package / f"hot{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    source.write_text("X = 1\n")
    built.write_bytes(b"")
    finder = compiled._SourceFirst(always=False)
    os.utime(source, (1_000, 1_000))
    os.utime(built, (2_000, 2_000))
    (tmp_path / "setup.py").write_text("")
    roots = {"capture": [package]}
    assert finder.find_spec("capture.hot", [str(package)]) is None          # the compiled copy loads
    assert compiled.stale(roots) == []
    os.utime(source, (3_000, 3_000))
    assert finder.find_spec("capture.hot", [str(package)]).origin == str(source)
    assert finder.find_spec("elsewhere.hot", [str(package)]) is None
    assert compiled.stale(roots) == ["capture.hot"]                         # what --version names
    # Its .pxd (Cython's types for it) counts as an edit too.
    os.utime(source, (1_000, 1_000))
    (package / "hot.pxd").write_text("cdef class A:\n    pass\n")
    os.utime(package / "hot.pxd", (3_000, 3_000))
    assert compiled.stale(roots) == ["capture.hot"]
    os.utime(source, (3_000, 3_000))
    # Installed (no setup.py beside the packages): file times say nothing about edits.
    (tmp_path / "setup.py").unlink()
    assert finder.find_spec("capture.hot", [str(package)]) is None
    assert compiled.stale(roots) == []
    assert compiled._SourceFirst(always=True).find_spec("capture.hot", [str(package)]).origin == str(source)


def test_the_c_helpers_edited_after_their_build_are_stale(tmp_path: Path) -> None:
    # _speedups has no .py: its .pyx (and .pxd) is what an edit changes.
    import importlib.machinery

    package = tmp_path / "hotpath"
    package.mkdir()
    (tmp_path / "setup.py").write_text("")
    built = package / f"_speedups{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    for path, when in ((package / "_speedups.pyx", 1_000), (package / "_speedups.pxd", 1_000), (built, 2_000)):
        path.write_text("")
        os.utime(path, (when, when))
    roots = {"hotpath": [package]}
    assert compiled.stale(roots) == []
    os.utime(package / "_speedups.pyx", (3_000, 3_000))
    assert compiled.stale(roots) == ["hotpath._speedups"]


_HELPERS = "import hotpath.speedups as s, dissector.batchheader as r; print(s.find.__module__, r.crc32c_of.__module__)"


def test_the_c_helpers_follow_the_build_that_runs() -> None:
    _require_compiled()
    assert _run(_HELPERS, pure=False).split() == ["hotpath._speedups", "hotpath._speedups"]
    assert _run(_HELPERS, pure=True).split() == ["hotpath._speedups_pure", "hotpath._speedups_pure"]


def test_one_edited_module_runs_the_whole_checkout_as_python(tmp_path: Path, monkeypatch) -> None:
    # Compiled modules take each other's classes from their .pxd: a stale one loaded as Python
    # beside compiled ones would fail their import ("size changed"). So the process goes pure.
    import importlib.machinery

    package = tmp_path / "dissector"
    package.mkdir()
    (tmp_path / "setup.py").write_text("")
    for name in ("a", "b"):
        built = package / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
        (package / f"{name}.py").write_text("X = 1\n")
        built.write_bytes(b"")
        os.utime(package / f"{name}.py", (1_000, 1_000))
        os.utime(built, (2_000, 2_000))
    roots = {"dissector": [package]}
    monkeypatch.delenv("KDISSECT_PURE", raising=False)
    assert not compiled.runs_as_python(roots)
    os.utime(package / "a.py", (3_000, 3_000))
    assert compiled.runs_as_python(roots)


_BOTH_BUILDS = ["tests/capture/test_detect.py", "tests/capture/test_causal.py", "tests/capture/test_reassembly.py",
                "tests/capture/test_dormant.py", "tests/dissector/test_budget.py",
                "tests/capture/test_samples.py::test_segments_swapped_with_neighbours_and_retransmitted_keep_every_exchange"]


@pytest.mark.slow
def test_what_keeps_a_capture_whole_holds_as_python_too() -> None:
    """Detection of malformed first requests, late segments, resting connections and the decoding budget
    are tested in the build the suite runs (compiled, in CI); here their tests run again as pure Python.
    (Contained row building and out-of-range values run both builds in test_containment.py.)"""
    _require_compiled()
    env = {**{k: v for k, v in os.environ.items() if k != "KDISSECT_REQUIRE_COMPILED"}, "KDISSECT_PURE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                           *_BOTH_BUILDS], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout.splitlines()[-1]
