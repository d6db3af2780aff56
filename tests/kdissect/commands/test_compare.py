"""kdissect compare against Debian's tshark 4.0 on public captures: where Wireshark 4.0 agrees, and
where its older Kafka dissector fails (flexible versions, legacy message sets, librdkafka quirks)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from kdissect.commands import cli
from kdissect.commands.compare import (
    Difference,
    Message,
    _PdmlReader,
    differences,
    kdissect_messages,
    match,
    run_compare,
    tshark_undecoded,
    wireshark_messages,
)

CAPTURES = Path(__file__).resolve().parents[4] / "shared" / "public-captures"

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


def capture(name: str) -> str:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"public capture {name} not found beside the repository")
    return str(path)


def compared(name: str, ports: list[int] | None = None):
    """(our message, Wireshark's message, differences) per pair, and the unpaired of each side."""
    path = capture(name)
    ours, broker_ports = kdissect_messages(path, ports)
    pairs, only_ours, only_theirs = match(ours, wireshark_messages(path, set(ports or ()) | broker_ports))
    return [(a, b, differences(a, b)) for a, b in pairs], only_ours, only_theirs


def summary(text: str) -> dict[str, str]:
    keys = ("messages compared", "agreeing", "tshark could not decode", "disagreeing", "only kdissect",
            "only wireshark")
    return {k: line[len(k):].split()[0] for line in text.splitlines() for k in keys if line.startswith(k + " ")}


@needs_tshark
def test_apiversions_v3_agrees_on_every_field():
    pairs, only_ours, only_theirs = compared("deepflowio__deepflow__18-api-versions-v3.pcap")
    assert [(a.direction, a.api_key, a.api_version, a.correlation_id, b.api_key, b.api_version, b.correlation_id)
            for a, b, _ in pairs] == [("request", 18, 3, 2, 18, 3, 2), ("response", 18, 3, 2, 18, 3, 2)]
    assert pairs[0][1].client_id == "adminclient-1"
    assert [d for _, _, d in pairs] == [[], []]
    assert only_ours == only_theirs == []


@needs_tshark
def test_produce_v2_agrees_on_header_and_wireshark_calls_the_message_set_malformed():
    pairs, only_ours, only_theirs = compared("deepflowio__deepflow__00-produce-v2.pcap")
    (req, ws_req, req_diffs), (resp, ws_resp, resp_diffs) = pairs
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (0, 2, 1, "console-producer")
    assert (ws_req.api_key, ws_req.api_version, ws_req.correlation_id, ws_req.client_id) == \
        (0, 2, 1, "console-producer")
    # The legacy (magic 1) message with a null key: only Wireshark 4.0 fails on it.
    assert req_diffs == [Difference("decoded", "decoded", "malformed: Invalid string length field")]
    assert resp_diffs == [] and resp.topics == ws_resp.topics == {"topic2"}
    assert only_ours == only_theirs == []


@needs_tshark
def test_produce_v9_flexible_is_beyond_wireshark_4_0():
    out = io.StringIO()
    assert run_compare(capture("deepflowio__deepflow__00-produce-v9.pcap"), None, out) == 0
    text = out.getvalue()
    # Neither message is a disagreement: Wireshark 4.0 predates the version, and says so.
    assert summary(text) == {"messages compared": "2", "agreeing": "0", "tshark could not decode": "2",
                             "disagreeing": "0", "only kdissect": "0", "only wireshark": "0"}
    assert "ports decoded as Kafka  36333" in text    # found by our decode, passed to tshark with -d
    request, response = [ln for ln in text.splitlines() if ln.startswith("tshark could not decode  ")]
    assert "request corr=47 Produce v9: a version this tshark does not know " \
           "(Unsupported Produce version. Supports v0-8.)" in request
    # Having lost the request, Wireshark cannot name the response's api: the line names it from ours.
    assert "response corr=47 Produce v9: its request not decoded by tshark " \
           "(request missing: body not decoded)" in response
    assert "(a version this tshark does not know 1, its request not decoded by tshark 1)" in text


@needs_tshark
def test_unknown_error_code_is_ours_alone_to_report():
    pairs, _, _ = compared("deepflowio__deepflow__01-fetch-v12-unknown.pcap")
    response = next(a for a, _, _ in pairs if a.direction == "response")
    assert (response.api_key, response.api_version, response.errors) == (1, 12, {5120})


@needs_tshark
def test_non_standard_port_with_explicit_ports_agrees():
    pairs, only_ours, only_theirs = compared("deepflowio__deepflow__00-produce-v7-sw8.pcap", [36333])
    assert [(a.direction, a.api_key, a.api_version, d) for a, _, d in pairs] == [
        ("request", 0, 7, []), ("response", 0, 7, [])]
    assert only_ours == only_theirs == []


@needs_tshark
def test_librdkafka_capture_trailing_bytes_and_orphan_responses():
    pairs, only_ours, only_theirs = compared("ntop__nDPI__kafka-2024-05-rdkafka.pcapng")
    assert len(pairs) == 20 and only_ours == only_theirs == []
    # ApiVersions v0 requests carrying 4 extra bytes: we decode them, Wireshark calls them malformed.
    trailing = [a for a, _, d in pairs
                if Difference("decoded", "decoded",
                              "malformed: Dissected message does not end at the pdu length offset") in d]
    assert [(a.direction, a.api_key, a.api_version) for a in trailing] == [("request", 18, 0)] * 4
    # Responses whose request the capture missed: our api is inferred, Wireshark has none.
    orphans = [(a.correlation_id, d[0]) for a, _, d in pairs if a.inferred]
    assert orphans == [(131, Difference("api", "Metadata (inferred)", "?")),
                       (140, Difference("api", "ApiVersions (inferred)", "?")),
                       (141, Difference("api", "Metadata (inferred)", "?"))]


SAMPLES = Path(__file__).resolve().parents[3] / "samples"


@needs_tshark
def test_the_mixed_sample_against_debian_tshark_counts_what_it_cannot_decode_apart():
    """Wireshark 4.0 predates most of what these clients speak: nothing is a disagreement, everything
    it could not decode is counted with the reason, and the summary names the tshark and what is newer."""
    out = io.StringIO()
    assert run_compare(str(SAMPLES / "mixed.pcap"), None, out) == 0
    text = out.getvalue()
    got = summary(text)
    assert (got["messages compared"], got["disagreeing"], got["only kdissect"], got["only wireshark"]) == \
        ("243", "0", "0", "0")
    assert int(got["agreeing"]) + int(got["tshark could not decode"]) == 243 and int(got["agreeing"]) > 100
    version = re.search(r"^tshark +(\S+) \(Wireshark (4\.0\.\d+)\)$", text, re.M)
    assert version and version.group(1) == shutil.which("tshark")
    note = next(ln for ln in text.splitlines() if ln.startswith("note: "))
    assert f"Wireshark {version.group(2)} does not know Metadata v12" in note
    assert "a newer tshark decodes more of them (Wireshark 4.4" in note
    assert not any(ln.startswith("differ") for ln in text.splitlines())


def test_a_tshark_not_found_is_one_line(capsys):
    assert cli.main(["compare", str(SAMPLES / "mixed.pcap"), "--tshark", "/nonexistent/tshark"]) == 1
    err = capsys.readouterr().err
    assert err == "kdissect: /nonexistent/tshark not found: compare needs Wireshark's tshark " \
                  "(Debian/Ubuntu: apt-get install tshark)\n"


# The shape of Wireshark 4.4's PDML for an ApiVersions v4 request it does not know (it goes on as v3)
# and a Fetch v16 request naming its topic by id (16 bytes): CI's tshark 4.0 gives neither.
PDML44 = b"""<?xml version="1.0"?>
<pdml>
<packet>
  <proto name="geninfo"><field name="num" show="177"/><field name="timestamp" value="1763702871.0"/></proto>
  <proto name="ip"><field name="ip.src" show="127.0.0.1"/><field name="ip.dst" show="127.0.0.1"/></proto>
  <proto name="tcp"><field name="tcp.srcport" show="52806"/><field name="tcp.dstport" show="9092"/>
    <field name="tcp.stream" show="1"/></proto>
  <proto name="kafka">
    <field name="kafka.request_key" show="18"/><field name="kafka.request.version" show="4"/>
    <field name="kafka.api_version" show="4">
      <field name="_ws.expert"><field name="kafka.unsupported_api_version"/>
        <field name="_ws.expert.message" show="Unsupported ApiVersions version. Supports v0-3."/></field>
      <field name="_ws.expert">
        <field name="_ws.expert.message" show="Dissecting assuming v3."/></field>
    </field>
    <field name="kafka.correlation_id" show="1"/><field name="kafka.client_id" show="kp"/>
  </proto>
</packet>
<packet>
  <proto name="geninfo"><field name="num" show="299"/><field name="timestamp" value="1763702872.0"/></proto>
  <proto name="ip"><field name="ip.src" show="127.0.0.1"/><field name="ip.dst" show="127.0.0.1"/></proto>
  <proto name="tcp"><field name="tcp.srcport" show="52742"/><field name="tcp.dstport" show="9092"/>
    <field name="tcp.stream" show="2"/></proto>
  <proto name="kafka">
    <field name="kafka.request_key" show="1"/><field name="kafka.request.version" show="16"/>
    <field name="kafka.correlation_id" show="14"/><field name="kafka.client_id" show="ck"/>
    <field name="Topic"><field name="kafka.topic_id" show="01a1fc93-3658-7671-b8fa-3a832265d936"
      value="01a1fc9336587671b8fa3a832265d936"/>
      <field name="kafka.topic_id" show="00000000-0000-0000-0000-000000000000" value="00000000000000000000000000000000"/>
    </field>
  </proto>
</packet>
</pdml>
"""


def test_a_version_newer_than_tshark_is_counted_apart_and_topic_ids_compare_as_kafka_writes_them():
    api_versions, fetch = _PdmlReader({9092}).read(io.BytesIO(PDML44))
    assert api_versions.unsupported == "Unsupported ApiVersions version. Supports v0-3. Dissecting assuming v3."
    ours = Message(api_versions.conn, "request", 1, 0.0, 18, 4, "kp", frozenset(), frozenset(), None)
    assert tshark_undecoded(ours, api_versions) == "version"
    # The zero id means "none" and is left out; the other reads as Kafka's Uuid.toString() does.
    assert fetch.topics == {"AaH8kzZYdnG4-jqDImXZNg"} and fetch.problem is None
    assert tshark_undecoded(ours, fetch) is None


PDML = b"""<?xml version="1.0"?>
<pdml>
<packet>
  <proto name="geninfo"><field name="num" show="7"/><field name="timestamp" value="1700000000.250000000"/></proto>
  <proto name="ip"><field name="ip.src" show="10.0.0.1"/><field name="ip.dst" show="10.0.0.2"/></proto>
  <proto name="tcp"><field name="tcp.srcport" show="40000"/><field name="tcp.dstport" show="9092"/>
    <field name="tcp.stream" show="3"/></proto>
  <proto name="kafka">
    <field name="kafka.request_key" show="3"/><field name="kafka.request.version" show="1"/>
    <field name="kafka.correlation_id" show="8"/><field name="kafka.client_id" show="app"/>
    <field name="Topic"><field name="kafka.topic_name" show="orders"/></field>
  </proto>
  <proto name="kafka">
    <field name="kafka.request_key" show="0"/><field name="kafka.request.version" show="3"/>
    <field name="kafka.correlation_id" show="9"/><field name="kafka.client_id" show="app"/>
  </proto>
  <proto name="_ws.malformed"><field name="_ws.expert.message" show="Malformed Packet (Exception occurred)"/></proto>
</packet>
<packet>
  <proto name="geninfo"><field name="num" show="8"/><field name="timestamp" value="1700000000.5"/></proto>
  <proto name="ipv6"><field name="ipv6.src" show="fd00:0:0::2"/><field name="ipv6.dst" show="fd00::1"/></proto>
  <proto name="tcp"><field name="tcp.srcport" show="9092"/><field name="tcp.dstport" show="40001"/>
    <field name="tcp.stream" show="4"/></proto>
  <proto name="kafka">
    <field name="kafka.correlation_id" show="5"/><field name="kafka.response_key" show="3"/>
    <field name="kafka.response.version" show="1"/>
    <field name="Topic"><field name="kafka.error" show="0"/><field name="kafka.error" show="3"/>
      <field name="kafka.client_id" show="member-client"/></field>
  </proto>
</packet>
</pdml>
"""


def test_pdml_reader_splits_pdus_of_one_segment_and_blames_the_last_for_the_exception():
    first, second, third = _PdmlReader({9092}).read(io.BytesIO(PDML))
    assert (first.frame, first.conn, first.direction, first.correlation_id, first.api_key, first.api_version,
            first.client_id, first.topics, first.problem) == (
        7, "10.0.0.1:40000-10.0.0.2:9092#1", "request", 8, 3, 1, "app", {"orders"}, None)
    assert (second.correlation_id, second.api_key, second.problem) == (9, 0, "malformed (exception)")
    # Response direction, IPv6 endpoints normalised, client = destination; nested member client ids ignored.
    assert (third.conn, third.direction, third.api_key, third.client_id, third.errors) == (
        "[fd00::1]:40001-[fd00::2]:9092#1", "response", 3, None, {3})


def test_missing_tshark_is_one_line_and_exit_1(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cli.main(["compare", capture("deepflowio__deepflow__18-api-versions-v3.pcap")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kdissect: tshark not found")
