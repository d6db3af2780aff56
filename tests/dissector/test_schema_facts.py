"""The Kafka facts file (``dissector/schema/kafka_facts.json``): facts only, pinned, and what the specs give.

The generators' own freshness tests (test_schema.py, test_schema_decoders.py, tests/analysis) read
the committed file and never skip. Checking the file against Kafka's specs needs the reference
folder, which a clone does not have: it is found at ``$KAFKA_PROTOCOL_DIR`` or beside the checkout
(``../shared/kafka-protocol``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dissector.schema import distill

REPO = Path(__file__).resolve().parents[2]
SPECS = Path(os.environ.get("KAFKA_PROTOCOL_DIR") or REPO.parent / "shared" / "kafka-protocol")
needs_specs = pytest.mark.skipif(not (SPECS / "messages").is_dir(),
                                 reason=f"Kafka's protocol reference is not at {SPECS} (set KAFKA_PROTOCOL_DIR)")

RAW = json.loads(distill.FACTS.read_text())


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@needs_specs
def test_the_facts_are_what_the_specs_give():
    assert distill.render(distill.distill(SPECS)) == distill.FACTS.read_text(), \
        f"kafka_facts.json is stale: run `python -m dissector.schema.distill {SPECS}`"


@needs_specs
def test_check_mode(capsys):
    assert distill.main([str(SPECS), "--check"]) == 0


def test_pinned_to_its_releases():
    assert list(RAW["releases"]) == ["4.4", "3.9"]          # newest first: the generators rely on it
    for release in RAW["releases"].values():
        assert len(release["sha256"]) == 64 and release["spec_files"] > 180 and "Kafka" in release["label"]
    assert {name: len(specs) for name, specs in RAW["messages"].items()} == {
        name: r["spec_files"] for name, r in RAW["releases"].items()}


def test_no_prose_in_the_messages():
    # Names, types, versions, entity types, defaults: a string with a space would be prose.
    strings = list(_strings(RAW["messages"]))
    assert strings and not [s for s in strings if " " in s]
    assert "about" not in strings


def test_compact():
    assert distill.FACTS.stat().st_size < 256 * 1024


def test_older_releases_keep_fields_only_for_the_versions_newer_ones_removed():
    newest = {distill.message_key(s): distill.version_set(s["validVersions"]) for s in RAW["messages"]["4.4"].values()}
    kept = {name for name, s in RAW["messages"]["3.9"].items() if "fields" in s}
    owning = {name for name, s in RAW["messages"]["3.9"].items()
              if distill.version_set(s["validVersions"]) - newest.get(distill.message_key(s), set())}
    assert kept == owning
    # What Kafka 4.x removed: Produce v0-2, the inter-broker apis 4-7, the 0.8 consumer's OffsetFetch v0.
    assert {"ProduceRequest", "LeaderAndIsrRequest", "ControlledShutdownResponse", "OffsetFetchRequest"} <= kept
    assert all("fields" in s for s in RAW["messages"]["4.4"].values())


def test_rows_read_back_as_the_specs_keyed_fields():
    produce = distill.load()["messages"]["3.9"]["ProduceRequest"]
    transactional_id = produce["fields"][0]
    assert transactional_id == {"name": "TransactionalId", "type": "string", "versions": "3+",
                                "nullableVersions": "3+", "default": "null", "entityType": "transactionalId"}
    topics = produce["fields"][3]
    assert topics["name"] == "TopicData" and topics["fields"][0]["name"] == "Name"


def test_errors_with_retriability():
    errors = {code: (name, retriable) for code, name, retriable in RAW["errors"]}
    assert len(errors) == 138
    assert errors[6] == ("NOT_LEADER_OR_FOLLOWER", True) and errors[10] == ("MESSAGE_TOO_LARGE", False)
    assert sum(r is None for _, r in errors.values()) == 9     # codes newer than the retriability reading


def test_an_unknown_spec_key_stops_the_distiller():
    spec = {"name": "FooRequest", "type": "request", "apiKey": 999, "validVersions": "0",
            "fields": [{"name": "Bar", "type": "int32", "versions": "0+", "newFact": 1}]}
    with pytest.raises(SystemExit, match="newFact"):
        distill.spec_facts(spec, True, "FooRequest.json")
    assert distill.spec_facts({**spec, "fields": [{"name": "Bar", "type": "int32", "versions": "0+",
                                                   "about": "prose"}]}, True, "x") == {
        "name": "FooRequest", "type": "request", "apiKey": 999, "validVersions": "0",
        "fields": [["Bar", "int32", "0+"]]}
