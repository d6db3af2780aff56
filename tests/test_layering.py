"""The dependency arrows point one way: capture -> dissector; payloads beside it; analysis reads Parquet only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

EXPORTERS = {"prometheus_client", "opentelemetry"}     # live metrics: kdissect/metrics/ only
FORBIDDEN = {
    "dissector": {"scapy", "pyarrow", "pyspark", "pandas", "capture", "kdissect", "analysis", "cryptography",
                  "payloads", "fastavro", "google", "grpc_tools", "jsonschema", "confluent_kafka"} | EXPORTERS,
    "capture": {"pyarrow", "pyspark", "pandas", "kdissect", "analysis"} | EXPORTERS,
    "analysis": {"dissector", "capture", "kdissect", "scapy", "payloads", "hotpath"} | EXPORTERS,
    # Record payloads: bytes and schemas in, objects out; beside the dissector, driven by kdissect.
    "payloads": {"dissector", "capture", "kdissect", "analysis", "scapy", "pyarrow", "pyspark", "pandas"} | EXPORTERS,
    # The compiled build's switch: imported first by each package above, so it can import none of them.
    "hotpath": {"dissector", "capture", "kdissect", "analysis", "payloads", "scapy", "pyarrow", "pyspark",
                "pandas"} | EXPORTERS,
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_across_the_arrows(package):
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_roots(path) & FORBIDDEN[package]
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert not offenders


def test_tls_layer_does_not_import_the_dissector():
    # capture.tls is sans-IO TLS only; capture.tlsflow is where it meets the dissector.
    offenders = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & {"dissector", "scapy"})
                 for p in sorted((ROOT / "capture" / "tls").rglob("*.py"))}
    assert not {k: v for k, v in offenders.items() if v}


# kdissect's stages, each allowed to use only those below it: dataset (rows, columns, Parquet) at the
# bottom, then metrics (a fold of the rows just built), run (options, inputs, decoding in one process or many,
# live), spark, and commands on top.
STAGES = ("dataset", "metrics", "run", "spark", "commands")
# spark-submit runs kdissect/spark/decode.py as a script; its main() is `kdissect spark-decode`.
STAGE_EXCEPTIONS = {("kdissect/spark/decode.py", "commands")}


def imported_modules(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            mods |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(node.module)
            mods |= {f"{node.module}.{alias.name}" for alias in node.names}
    return mods


@pytest.mark.parametrize("stage", STAGES)
def test_kdissect_stages_import_only_the_stages_below(stage):
    above = set(STAGES[STAGES.index(stage) + 1:])
    offenders = {}
    for path in sorted((ROOT / "kdissect" / stage).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        bad = {m.split(".")[1] for m in imported_modules(path)
               if m.startswith("kdissect.") and m.split(".")[1] in above} - {s for f, s in STAGE_EXCEPTIONS if f == rel}
        if bad:
            offenders[rel] = sorted(bad)
    assert not offenders


def test_kdissect_is_split_into_its_stages():
    # Flat modules left at the top are the package's face only: the API, errors and the entry point.
    top = {p.name for p in (ROOT / "kdissect").glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "api.py", "errors.py"}
    assert all((ROOT / "kdissect" / s / "__init__.py").is_file() for s in STAGES)


def test_exporter_libraries_only_in_their_modules():
    """The metric fold is the exporters' common input and names no exporter library; only the modules
    of the Prometheus and OTLP exporters load them (``kdissect.metrics.libs.need`` takes module names as
    text, which the import check above cannot see)."""
    allowed = {"kdissect/metrics/prometheus.py", "kdissect/metrics/otlp.py"}
    offenders = []
    for package in ("dissector", "capture", "kdissect", "analysis", "payloads"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            text = path.read_text()
            if rel not in allowed and any(name in text for name in EXPORTERS):
                offenders.append(rel)
    assert not offenders


# The project's packages, among which no module may import another that imports it back, even
# through others or from inside a function: what two modules share belongs in a third.
PROJECT = ("capture", "dissector", "kdissect", "analysis", "payloads", "hotpath")


def project_modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the project's packages (a package is its ``__init__``)."""
    modules = {}
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules ``name`` imports anywhere in its text (function bodies included), each
    import resolved to the module it loads: ``from a.b import c`` is ``a.b.c`` when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def module_of(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {module_of(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else module_of(base))
    return found - {None, name}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), as ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        todo = [start]
        while todo:           # breadth first inside the group, back to where it started
            v = todo.pop(0)
            for w in sorted(graph[v] & group):
                if w == start:
                    cycles.append(paths[v] + [start])
                    todo = []
                    break
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    todo.append(w)
    return sorted(cycles)


def test_no_module_imports_one_that_imports_it_back():
    modules = project_modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    cycles = import_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]


MAX_LINES = 700
# A generated module says so on its first line (a comment or its docstring) and is left out.
GENERATED = re.compile(r"^(#|\"\"\"|''')\s*generated by\b", re.IGNORECASE)


def test_no_hand_written_module_is_over_700_lines():
    long = {}
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")) + sorted((ROOT / package).rglob("*.pyx")):
            text = path.read_text()
            n = text.count("\n")
            if n > MAX_LINES and not GENERATED.match(text):
                long[str(path.relative_to(ROOT))] = n
    assert not long, f"modules over {MAX_LINES} lines (split them along a seam): {long}"
