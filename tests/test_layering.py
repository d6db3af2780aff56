"""The dependency arrows point one way: capture -> dissector; payloads beside it; analysis reads Parquet only."""

from __future__ import annotations

import ast
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
