"""Which of kdissect's modules run compiled, and the switch that runs them all as Python.

Every package with compiled modules (``capture``, ``dissector``, ``kdissect``, ``payloads``) imports this
one first; importing it installs the switch, before any compiled module can load. It imports nothing of
theirs, so the decision of how they load lives outside all of them. The hot path's few C helpers
(``_speedups.pyx``) and their pure twins are here too, chosen by ``speedups.py`` by the same switch.

``setup.py`` compiles the hot path (its ``HOT_MODULES``) with Cython next to the ``.py`` files,
and Python's import system prefers the compiled copy. ``KDISSECT_PURE=1`` in the environment
makes imports of those packages' modules load the ``.py`` source instead: fuzzing needs it
(atheris instruments bytecode), tracebacks get line numbers, and the tests use it to hold both
builds to the same dataset. A ``.py`` edited after its compiled copy was built is loaded as source
too, so an edit always takes effect (at Python's speed until the next ``pip install -e .``).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import MISSING
from pathlib import Path

PACKAGES = ("capture", "dissector", "kdissect", "payloads", "hotpath")
_ENV = "KDISSECT_PURE"


def pure_requested() -> bool:
    return os.environ.get(_ENV, "") not in ("", "0")


def compiled_file(path: str) -> bool:
    """Whether a module's ``__file__`` is an extension module: a module asks it of itself to call
    the C helpers its ``.pxd`` declares only when compiled."""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def is_compiled(module: object) -> bool:
    return compiled_file(str(getattr(module, "__file__", "") or ""))


def compiled_modules() -> list[str]:
    """Names of the loaded kdissect modules that are compiled (empty when pure)."""
    return sorted(name for name, mod in list(sys.modules.items())
                  if name.split(".")[0] in PACKAGES and is_compiled(mod))


def _roots() -> dict[str, list[Path]]:
    """Package -> its directories."""
    roots = {}
    for pkg in PACKAGES:
        spec = importlib.util.find_spec(pkg)
        roots[pkg] = [Path(r) for r in (spec.submodule_search_locations or [])] if spec else []
    return roots


def _built(roots: dict[str, list[Path]] | None = None) -> dict[str, Path]:
    """Module name -> its compiled file, for every compiled copy on disk (``roots``: package -> directories)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    out = {}
    for dirs in (_roots() if roots is None else roots).values():
        for root in dirs:
            for here, subdirs, files in os.walk(root):
                # Not __pycache__: bytecode and cached decoders, two thirds of the files.
                subdirs[:] = [d for d in subdirs if d != "__pycache__"]
                for f in files:
                    if f.endswith(suffixes):
                        rel = (Path(here) / f).relative_to(root.parent)
                        out[".".join(rel.parts[:-1] + (f.split(".")[0],))] = Path(here) / f
    return out


def available() -> list[str]:
    """Names of the modules that have a compiled copy on disk, loaded or not."""
    return sorted(_built())


def stale(roots: dict[str, list[Path]] | None = None) -> list[str]:
    """Compiled modules of a checkout whose ``.py`` was edited after the build: they load as Python
    (see :class:`_SourceFirst`). ``roots``: package -> directories, for tests."""
    # Only a checkout's files get edited (see _in_checkout): an installed copy is not walked.
    checkouts = {pkg: [d for d in dirs if (d.parent / "setup.py").is_file()]
                 for pkg, dirs in (_roots() if roots is None else roots).items()}
    out = []
    for name, built in sorted(_built(checkouts).items()):
        source = built.with_name(name.rpartition(".")[2] + ".py")
        if not source.is_file():
            source = source.with_suffix(".pyx")     # the C helpers' module (_speedups)
        if source.is_file() and _in_checkout(source.parent, name) and _stale(source):
            out.append(name)
    return out


def describe() -> str:
    """Which build runs, for ``kdissect --version``."""
    if pure_requested():
        return f"pure Python: {_ENV} is set"
    n = len(available())
    if not n:
        return "pure Python: nothing compiled (pip install -v . shows why)"
    old = stale()
    if not old:
        return f"compiled hot path, {n} modules"
    # Benchmarks of a checkout would otherwise measure Python's speed unawares.
    return (f"pure Python: {n} modules compiled, but {len(old)} edited since the build, so every module runs "
            f"as Python until `pip install -e .`: {', '.join(old)}")


class _SourceFirst:
    """A meta path finder that loads a module's ``.py`` instead of its compiled copy: always under
    ``KDISSECT_PURE``, else only in a checkout whose ``.py`` was edited after the copy was built
    (between an edit and the next ``pip install -e .``, which would otherwise run the old code)."""

    def __init__(self, always: bool):
        self.always = always

    def find_spec(self, name: str, path, target=None):
        if name.split(".")[0] not in PACKAGES or not path:
            return None
        leaf = name.rpartition(".")[2]
        for entry in path:
            source = Path(entry) / f"{leaf}.py"
            if not source.is_file():
                continue
            if not self.always and not (_in_checkout(Path(entry), name) and _stale(source)):
                return None
            loader = importlib.machinery.SourceFileLoader(name, str(source))
            return importlib.util.spec_from_file_location(name, source, loader=loader)
        return None


def _in_checkout(entry: Path, name: str) -> bool:
    """A source tree (setup.py beside the packages), where files get edited. Not site-packages:
    there installation order, not editing, decides which of a module's files is newer."""
    return (entry.parents[name.count(".") - 1] / "setup.py").is_file()


def _stale(source: Path) -> bool:
    edited = source.stat().st_mtime
    declarations = source.with_suffix(".pxd")      # Cython's types for the module: part of its build
    if declarations.is_file():
        edited = max(edited, declarations.stat().st_mtime)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        built = source.with_name(source.stem + suffix)
        if built.is_file():
            return built.stat().st_mtime < edited
    return False


def inheritable(*classes: type) -> None:
    """Let Python dataclasses inherit the fields of these dataclasses positionally.

    Compiled, a dataclass declared in a ``.pxd`` (``dissector/events.pxd``) is Cython's, whose
    fields leave ``kw_only`` unset (MISSING, which is true): a Python dataclass inheriting them
    would make every inherited field keyword-only. As Python, the fields say False already.
    """
    for cls in classes:
        for f in cls.__dataclass_fields__.values():  # type: ignore[attr-defined]
            if f.kw_only is MISSING:
                f.kw_only = False


def runs_as_python(roots: dict[str, list[Path]] | None = None) -> bool:
    """Whether this process loads every module from source: under ``KDISSECT_PURE``, or in a
    checkout with any module edited since the build. Compiled modules share C types through
    their ``.pxd`` files, so one module as Python beside compiled ones that expect its compiled
    classes fails at import ("size changed"); all or none run compiled."""
    return pure_requested() or bool(stale(roots))


def switched_to_python() -> bool:
    """Whether this process loads the hot path as Python (the switch is installed): then
    ``hotpath.speedups`` gives the C helpers' pure twins too."""
    return any(isinstance(f, _SourceFirst) for f in sys.meta_path)


def install_pure_switch() -> None:
    """Install the switch when any module is to load as Python (once; at this module's import)."""
    if switched_to_python():
        return
    if not runs_as_python():
        # Every compiled copy is newer than its source: the finder would find nothing to switch,
        # after a few file checks for each of the package's imports (~2 ms of each start-up).
        return
    # Just ahead of the standard path finder, not first: a finder installed earlier that defers to
    # the ones after it (atheris instruments the spec it gets back) must still see this one's.
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, _SourceFirst(always=True))


install_pure_switch()
