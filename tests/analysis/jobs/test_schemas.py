"""schemas_by_topic and the topic.* payload findings, on the payload samples (real serializers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kdissect
from analysis import dataset
from analysis.findings import Inputs, findings
from analysis.jobs.schemas import SCHEMAS_BY_TOPIC, schemas_by_topic

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "payloads"


def pcap(name: str) -> Path:
    return SAMPLES / name / f"{name}.pcap"


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> dict[str, str]:
    """The samples with --records alone (framing only); and avro with its schemas beside mixed-json without
    (each sample's registry numbered its schemas from 1: one folder cannot serve both)."""
    base = tmp_path_factory.mktemp("schemas")
    plain, given = base / "plain", base / "given"
    kdissect.write_dataset([pcap("avro"), pcap("mixed-json"), pcap("schemas-topic")], plain, records=True)
    kdissect.write_dataset([pcap("avro")], given, schemas=SAMPLES / "avro" / "schemas")
    kdissect.write_dataset([pcap("mixed-json")], given, records=True)
    return {"plain": str(plain), "given": str(given)}


def test_schemas_by_topic(spark, decoded):
    ds = dataset.load(spark, [decoded["given"]])
    rows = [r.asDict() for r in schemas_by_topic(ds.records, ds.exchanges).collect()]
    assert rows and set(rows[0]) == set(SCHEMAS_BY_TOPIC)
    evolve = [r for r in rows if r["topic"] == "avro-evolve" and r["side"] == "value"]
    assert [(r["format"], r["records"], r["produced"], r["producer_client_ids"]) for r in evolve] == [
        ("avro", 6, 3, ["kd-avro-evolve"]), ("avro", 6, 3, ["kd-avro-evolve"])]
    assert len({r["schema_id"] for r in evolve}) == 2
    headers = [r for r in rows if r["topic"] == "avro-headers" and r["side"] == "value"]
    assert len(headers) == 1 and headers[0]["schema_guid"] and headers[0]["schema_id"]
    # events: framed JSON Schema values whose schema was not given (avro's folder), and plain JSON.
    events = {(r["schema_id"] is not None, r["format"]): r for r in rows if r["topic"] == "events"
              and r["side"] == "value"}
    assert set(events) == {(True, None), (False, "json-text")}
    assert events[(False, "json-text")]["producer_client_ids"] == ["kd-mixed-plain"]
    assert events[(True, None)]["producer_client_ids"] == ["kd-mixed-registry"]


def _found(spark, path: str) -> list[dict]:
    ds = dataset.load(spark, [path])
    return [r.asDict() for r in findings(Inputs(ds.exchanges, ds.partitions, ds.anomalies, records=ds.records))
            .where("finding like 'topic.%'").collect()]


def test_payload_findings_with_schemas(spark, decoded):
    found = _found(spark, decoded["given"])
    by = {(f["finding"], f["subject"]): f for f in found}
    mixed = json.loads(by[("topic.mixed_formats", "events")]["evidence"])
    assert mixed == {"framed_values": 12, "unframed_values": 12, "unframed_formats": ["json-text"],
                     "framed_producers": ["kd-mixed-registry"], "unframed_producers": ["kd-mixed-plain"]}
    unknown = json.loads(by[("topic.unknown_schema", "events")]["evidence"])
    assert unknown["records"] == 12 and unknown["producers"] == ["kd-mixed-registry"]
    change = by[("topic.schema_changes", "avro-evolve")]
    assert change["severity"] == "info" and json.loads(change["evidence"])["value_schemas"] == 2
    # Every avro topic's ids are explained by the folder: no unknown_schema there.
    assert not [f for f in found if f["finding"] == "topic.unknown_schema" and f["subject"].startswith("avro")]
    assert all(f["show"].startswith("kdissect show ") and "--topic" in f["show"] for f in found)


def test_payload_findings_without_schemas(spark, decoded):
    found = _found(spark, decoded["plain"])
    unknown = {f["subject"] for f in found if f["finding"] == "topic.unknown_schema"}
    # Framed values with nothing to explain them; orders is explained by the capture's _schemas records.
    assert {"avro-none", "avro-headers", "events"} <= unknown and "orders" not in unknown
    assert not [f for f in found if f["finding"] == "topic.mixed_formats" and f["subject"] != "events"]


def test_no_records_table_no_payload_findings(spark, tmp_path):
    kdissect.write_dataset([pcap("mixed-json")], tmp_path)
    assert _found(spark, str(tmp_path)) == []
