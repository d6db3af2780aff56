"""Inputs, task plans and the Spark schema shared by spark-decode and the kafka-pcap data source (no Spark run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kdissect.errors import KdissectError
from kdissect.spark.tasks import expand_captures, expand_inputs, not_a_capture_table, plan, shares_by_size, spark_schema
from kdissect.dataset.tables import SCHEMAS, SPEC

REPO = Path(__file__).resolve().parents[3]


def test_globs_directories_and_files_expand_once_in_order(tmp_path: Path) -> None:
    for name in ("b.pcap", "a.pcapng", "c.pcap.gz"):
        shutil.copy(REPO / "samples" / "mixed.pcap", tmp_path / name)
    (tmp_path / "sub").mkdir()
    shutil.copy(REPO / "samples" / "mixed.pcap", tmp_path / "sub" / "d.pcap")
    got = expand_inputs([str(tmp_path / "*.pcap*"), tmp_path / "sub", str(tmp_path / "b.pcap")])
    assert [p.name for p in got] == ["a.pcapng", "b.pcap", "c.pcap.gz", "d.pcap"]
    assert [p.name for p in expand_inputs([tmp_path])] == ["a.pcapng", "b.pcap", "c.pcap.gz", "d.pcap"]
    with pytest.raises(KdissectError, match="no file matches"):
        expand_inputs([str(tmp_path / "*.nothing")])


def test_plan_gives_each_capture_its_shares(tmp_path: Path) -> None:
    a, b, c1, c2 = (tmp_path / n for n in ("a.pcap", "b.pcap", "c.pcap", "c.pcap1"))
    for f, size in ((a, 10), (b, 30), (c1, 10), (c2, 10)):
        f.write_bytes(b"x" * size)
    tasks = plan([(a,), (b,), (c1, c2)], lambda size: size // 10)
    assert [(Path(t.path).name, t.index, t.count) for t in tasks] == [
        ("a.pcap", 0, 1), ("b.pcap", 0, 3), ("b.pcap", 1, 3), ("b.pcap", 2, 3), ("c.pcap", 0, 2), ("c.pcap", 1, 2)]
    assert tasks[-1].paths == (str(c1), str(c2))         # a rotated capture: every share reads all its files
    assert len({t.stem for t in tasks}) == 3
    assert shares_by_size(0) == 1 and shares_by_size(1 << 40) == 64


@pytest.mark.parametrize("table", list(SPEC))
def test_spark_schema_is_the_dataset_schema(table: str) -> None:
    schema = spark_schema(table)
    arrow = SCHEMAS[table]
    assert schema.fieldNames() == arrow.names
    assert [f.nullable for f in schema.fields] == [f.nullable for f in arrow]


def test_not_a_capture_row_has_the_anomalies_schema() -> None:
    t = not_a_capture_table("x.pcap", "x.pcap: looks like text")
    assert t.schema == SCHEMAS["anomalies"]
    assert t.to_pylist()[0]["kind"] == "not_a_capture"
    with pytest.raises(KdissectError):
        spark_schema("nope")


def test_a_rotated_capture_expands_to_one_capture_unless_told_otherwise(tmp_path: Path) -> None:
    from tests.capture.test_rotation import editcap_split
    files = editcap_split(REPO / "samples" / "mixed.pcap", tmp_path / "rot", 40, name="x.pcap")
    shutil.copy(REPO / "samples" / "mixed.pcap", tmp_path / "rot" / "other.pcap")
    assert expand_captures([str(tmp_path / "rot" / "*.pcap")]) == [(tmp_path / "rot" / "other.pcap",), tuple(files)]
    assert len(expand_captures([tmp_path / "rot"], rotated=False)) == len(files) + 1
