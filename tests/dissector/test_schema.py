"""The generated schema: reproducible from the Kafka facts file, and complete where it matters.

That the facts file is what Kafka's specs give is tested in test_schema_facts.py.
"""

from __future__ import annotations

import ast
import functools
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dissector import framing, schema
from dissector.schema import _generated
from dissector.schema import distill
from dissector.schema._generated import APIS, DATA, ERRORS

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / "dissector" / "schema" / "_generated.py"

SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*\Z")


def _walk_fields(fields):
    for f in fields:
        yield f
        if f[9] is not None:
            yield from _walk_fields(f[9])


def _all_raw_fields():
    for api in APIS.values():
        for kind in ("request", "response"):
            for var in api[kind]:
                yield from _walk_fields(var[4])
    for variants in DATA.values():
        for var in variants:
            yield from _walk_fields(var[4])


# -- (a) reproducible ------------------------------------------------------------

def test_regenerating_gives_the_committed_file():
    from dissector.schema.generate import Generator
    assert Generator(distill.load()).run() == GENERATED.read_text(), \
        "_generated.py is stale: run `python -m dissector.schema.generate`"


@functools.cache
def _spec_facts() -> dict[tuple[int, str], dict]:
    """Straight from the specs' facts, not through the generator: per (api key, kind), the union of
    valid versions and the flexible-from of the newest spec. Keyed by api key, not file name: api 74
    was renamed."""
    facts: dict[tuple[int, str], dict] = {}
    releases = distill.load()["messages"]
    for folder in ("4.4", "3.9"):  # newest first
        for spec in releases[folder].values():
            if spec["type"] not in ("request", "response") or spec["validVersions"] == "none":
                continue
            entry = facts.setdefault((spec["apiKey"], spec["type"]), {"versions": set(), "flexible": {}})
            lo, _, hi = spec["validVersions"].partition("-")
            versions = set(range(int(lo), int(hi or lo) + 1))
            flex = spec.get("flexibleVersions", "none")
            for v in versions - entry["versions"]:
                entry["flexible"][v] = flex != "none" and v >= int(flex.rstrip("+"))
            entry["versions"] |= versions
    return facts


@pytest.mark.parametrize("key", range(95))
def test_versions_and_flexibility_match_the_specs(key):
    facts = _spec_facts()
    for kind in ("request", "response"):
        entry = facts[(key, kind)]
        lo, hi = min(entry["versions"]), max(entry["versions"])
        assert entry["versions"] == set(range(lo, hi + 1))
        assert schema.version_range(key) == (lo, hi), kind
        for v in range(lo, hi + 1):
            msg = schema.message(key, kind, v)
            assert msg is not None, (kind, v)
            assert msg.flexible == entry["flexible"][v], (kind, v)
            assert schema.is_flexible(key, v) == entry["flexible"][v], v


# -- (b) coverage facts ----------------------------------------------------------

def test_api_keys_0_to_94():
    assert schema.api_keys() == list(range(95))
    assert all(schema.api_name(k) and not schema.api_name(k).startswith("Unknown") for k in range(95))
    assert schema.api_name(95) == "Unknown(95)"


@pytest.mark.parametrize("key,name,lo,hi,flex", [
    (0, "Produce", 0, 13, 9),
    (1, "Fetch", 0, 18, 12),
    (3, "Metadata", 0, 13, 9),
    (4, "LeaderAndIsr", 0, 7, 4),
    (5, "StopReplica", 0, 4, 2),
    (6, "UpdateMetadata", 0, 8, 6),
    (7, "ControlledShutdown", 0, 3, 3),
    (11, "JoinGroup", 0, 9, 6),
    (18, "ApiVersions", 0, 5, 3),
])
def test_known_ranges(key, name, lo, hi, flex):
    assert schema.api_name(key) == name
    assert schema.version_range(key) == (lo, hi)
    assert schema.flexible_from(key) == flex
    assert not schema.is_flexible(key, flex - 1) and schema.is_flexible(key, flex)


def test_renamed_api_keeps_one_history():
    # Api 74 was ListClientMetricsResources (3.9) and is ListConfigResources (4.4).
    assert schema.api_name(74) == "ListConfigResources"
    assert schema.version_range(74) == (0, 1)
    assert [f.name for f in schema.message(74, "response", 0).fields] == ["throttle_time_ms", "error_code",
                                                                           "config_resources"]
    assert [f.name for f in schema.message(74, "request", 1).fields] == ["resource_types"]


def test_every_version_between_min_and_max_has_both_directions():
    for key in schema.api_keys():
        lo, hi = schema.version_range(key)
        for v in range(lo, hi + 1):
            assert schema.has_version(key, v)
            for kind in ("request", "response"):
                assert schema.message(key, kind, v) is not None, (key, kind, v)
        assert not schema.has_version(key, hi + 1)
        assert schema.message(key, "request", hi + 1) is None


def test_legacy_inter_broker_apis_come_from_3_9():
    for key in (4, 5, 6, 7):
        lo, hi = schema.version_range(key)
        assert {schema.message(key, "request", v).spec_release for v in range(lo, hi + 1)} == {"3.9"}
    assert schema.message(0, "request", 0).spec_release == "3.9"
    assert schema.message(0, "request", 13).spec_release == "4.4"


@pytest.mark.parametrize("get_req,get_resp", [
    (schema.request_header_version, schema.response_header_version),
    (framing.request_header_version, framing.response_header_version),
])
def test_header_versions(get_req, get_resp):
    assert get_req(7, 0) == 0          # ControlledShutdown v0: no client id
    assert get_req(7, 1) == 1
    assert get_req(7, 3) == 2
    assert get_req(0, 8) == 1 and get_resp(0, 8) == 0
    assert get_req(0, 9) == 2 and get_resp(0, 9) == 1
    for v in range(6):                 # ApiVersions responses: always header v0
        assert get_resp(18, v) == 0
    assert get_req(18, 3) == 2
    for key in schema.api_keys():
        lo, hi = schema.version_range(key)
        for v in range(lo, hi + 1):
            flexible = schema.is_flexible(key, v)
            if (key, v) != (7, 0):
                assert get_req(key, v) == (2 if flexible else 1)
            if key != 18:
                assert get_resp(key, v) == (1 if flexible else 0)


@settings(max_examples=500, deadline=None)
@given(st.integers(-(1 << 15), (1 << 15) - 1), st.integers(-(1 << 15), (1 << 15) - 1))
def test_any_int16_api_key_and_version_reads_as_the_schema_says(api_key: int, version: int):
    # The header tables are keyed by one int: a garbled frame's negative key or version must
    # neither match another api's entry nor fail; unknown ones get the fallback header version.
    known = schema.version_range(api_key)
    assert framing.known_request(api_key, version) == (known is not None and known[0] <= version <= known[1])
    hdr = framing.parse_request_header(struct.pack(">hhih", api_key, version, 7, -1) + b"\x00")
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id) == (api_key, version, 7)
    assert hdr.header_version == framing.request_header_version(api_key, version)
    if known is not None and known[0] <= version <= known[1]:
        assert hdr.header_version == schema.request_header_version(api_key, version)


def test_error_table():
    assert len(ERRORS) == 138
    assert ERRORS[0] == "NONE" and ERRORS[-1] == "UNKNOWN_SERVER_ERROR"
    assert schema.error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert schema.error_name(9999) == "UNKNOWN_ERROR_CODE(9999)"
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", n) for n in ERRORS.values())


def test_error_table_matches_the_facts():
    assert {code: name for code, name, _ in distill.load()["errors"]} == ERRORS


def test_field_names_are_snake_case():
    bad = sorted({f[0] for f in _all_raw_fields() if not SNAKE.match(f[0])})
    assert bad == []
    for msg in (schema.message(1, "request", 18), schema.message(3, "response", 13)):
        stack = list(msg.fields)
        while stack:
            f = stack.pop()
            assert SNAKE.match(f.name), f.name
            stack += f.children or ()


def test_no_prose_in_the_generated_file():
    text = GENERATED.read_text()
    assert "about" not in text.lower()
    # Facts only: names, types, entity types, releases. A string with a space would be prose.
    strings = [n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert strings and not [s for s in strings if " " in s]
    assert set(vars(_generated)) >= {"APIS", "DATA", "ERRORS"}


def test_data_messages_present():
    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "RequestHeader", "ResponseHeader"):
        assert schema.data_message(name, schema.data_versions(name)[1]) is not None
    assert schema.data_versions("ConsumerProtocolSubscription")[0] == 0
