"""One analysis, two engines: every table of every bundled sample is the same on the embedded engine (Sail)
and on JVM Spark: rows in any order, floats to 6 significant digits, timestamps to the microsecond.

Each sample is its own dataset (a table that holds for the union of captures may hide a difference in one),
decoded with its records, and with its schemas and TLS keys where it has them. JVM Spark is this run's shared
local session; the embedded engine is started once for the module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import jobs, output, preflight, schedule
from tests.analysis.engines import connect_mode, differences

# JVM Spark's side needs Java (CI installs it); without, the embedded engine's answers are held to the
# samples' truths by the other tests.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(preflight.java_command() is None, reason="no Java: JVM Spark is not here to compare")]

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def captures() -> list[tuple[str, list[Path], dict]]:
    """(name, inputs, write_dataset options) of every sample."""
    out = [(p.stem, [p], {}) for p in sorted(SAMPLES.glob("*.pcap"))]
    out += [(f"findings/{p.stem}", [p], {}) for p in sorted((SAMPLES / "findings").glob("*.pcap"))]
    for folder in sorted(p for p in (SAMPLES / "payloads").iterdir() if p.is_dir()):
        schemas = folder / "schemas"
        out.append((f"payloads/{folder.name}", sorted(folder.glob("*.pcap")),
                    {"schemas": str(schemas)} if schemas.is_dir() else {}))
    for p in sorted((SAMPLES / "tls").glob("*.pcap")):
        keys = p.with_suffix(".keys")
        if not p.name.endswith(".plain.pcap") and keys.exists():
            out.append((f"tls/{p.stem}", [p], {"tls_keylog": str(keys)}))
    return out


CAPTURES = captures()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    import kdissect
    root = tmp_path_factory.mktemp("engines")
    out = {}
    for name, inputs, options in CAPTURES:
        out[name] = root / name.replace("/", "-")
        kdissect.write_dataset([str(p) for p in inputs], out[name], records=True, **options)
    return out


def test_every_sample_is_covered():
    names = [name for name, _, _ in CAPTURES]
    assert len(names) >= 30 and any(n.startswith("payloads/") for n in names) \
        and any(n.startswith("tls/") for n in names) and any(n.startswith("findings/") for n in names)


@pytest.mark.parametrize("name", [name for name, _, _ in CAPTURES])
def test_every_table_is_the_same_on_both_engines(spark, embedded, datasets, name):
    request = schedule.Request([str(datasets[name])])
    with connect_mode(True):
        sail = output.as_json(schedule.analyze(embedded, request, jobs.JOBS))
    with connect_mode(False):
        jvm = output.as_json(schedule.analyze(spark, request, jobs.JOBS))
    assert len(sail) >= 25 and sail["summary"][0]["exchanges"] > 0
    assert differences(sail, jvm) == {}
