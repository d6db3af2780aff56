"""``kdissect analyze`` end to end over every bundled sample, held to the clients' own reports."""

from __future__ import annotations

import argparse
import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from analysis import cli

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("*.expected.json"))
ADMIN_APIS = {"create_topics": "CreateTopics", "delete_topics": "DeleteTopics", "describe_topics": "Metadata"}


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    import kdissect

    root = tmp_path_factory.mktemp("samples")
    # The top-level samples, recorded by samples/record.py (subfolders hold other recorders' captures).
    kdissect.write_dataset([str(p.with_name(p.name.replace(".expected.json", ".pcap"))) for p in SAMPLES],
                           root / "ds")
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    args = p.parse_args([str(root / "ds"), "--json", str(root / "results.json")])
    printed = io.StringIO()
    assert cli.run(args, printed, spark=spark) == 0
    return json.loads((root / "results.json").read_text()), printed.getvalue()


def expected():
    for path in SAMPLES:
        yield json.loads(path.read_text())


def test_every_table_of_the_contract_is_there_with_its_columns(results):
    data, printed = results
    must = {"latency_by_api": {"api_name", "api_version", "count", "p50_ms", "p99_ms", "max_ms"},
            "errors": {"api_name", "error_name", "client_id", "topic", "partition", "count", "retriable",
                       "first_ts", "last_ts"},
            "throughput_by_topic": {"topic", "produced_records", "produced_bytes", "fetched_records",
                                    "fetched_bytes"},
            "rebalances": {"group_id", "generation_id", "protocol", "members", "start_ts", "end_ts", "duration_ms"},
            "consumer_lag": {"group_id", "topic", "partition", "committed_offset", "high_watermark", "lag"},
            "clients": {"client_id", "client_software_name", "client_software_version"}}
    for name, columns in must.items():
        assert data[name] and columns <= set(data[name][0]), name
    for name in ("summary", "latency_by_client", "latency_by_broker", "latency_by_topic", "latency_over_time",
                 "latency_histogram", "latency_spikes", "latency_by_size", "idle_fetches", "errors_over_time",
                 "throughput_over_time", "top_clients", "group_members", "offset_commits", "produce_to_fetch",
                 "producers", "api_versions", "anomalies_by_kind", "findings", "share_groups", "share_deliveries",
                 "share_in_flight", "share_session_errors"):
        assert name in data
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", data["summary"][0]["first_ts"])
    assert data["summary"][0]["captures"] == len(SAMPLES)
    assert "== latency by api" in printed and "== consumer lag" in printed


def test_produced_records_per_topic_equal_the_delivery_reports(results):
    data, _ = results
    produced = Counter()
    for row in data["throughput_by_topic"]:
        produced[row["topic"]] += row["produced_records"]
    want = Counter()
    for exp in expected():
        for topic, parts in exp.get("delivered_totals", {}).items():
            want[topic] += sum(p["count"] for p in parts.values())
    assert {t: produced[t] for t in want} == dict(want)


def test_fetched_records_cover_what_consumers_received(results):
    data, _ = results
    fetched = {(r["topic"], r["partition"]): r["fetched_records"] for r in data["throughput_by_topic"]}
    for exp in expected():
        for client in exp["clients"]:
            for topic, parts in (client.get("consumed") or {}).items():
                for partition, got in parts.items():
                    assert fetched.get((topic, int(partition)), 0) >= got["count"], (client["client_id"], topic)


def _norm(name: str) -> str:
    name = name.lower().replace("_", "")
    return name[:-5] if name.endswith("error") else name


def test_errors_the_clients_saw_appear_with_their_api_and_client(results):
    data, _ = results
    seen = {(r["api_name"], r["client_id"], r["topic"], _norm(r["error_name"])) for r in data["errors"]}
    codes = {(r["api_name"], r["client_id"], r["error_code"]) for r in data["errors"]}
    for exp in expected():
        for client in exp["clients"]:
            for topic, parts in (client.get("delivery_errors") or {}).items():
                for part in parts.values():
                    for name in part["errors"]:
                        assert ("Produce", client["client_id"], topic, _norm(name)) in seen, (client["client_id"], name)
            for call in client.get("admin", []):
                if not call["ok"] and not call["local"]:
                    assert (ADMIN_APIS[call["call"]], client["client_id"], call["code"]) in codes, call


def test_every_consumer_group_has_a_rebalance(results):
    data, _ = results
    rebalanced = {r["group_id"] for r in data["rebalances"]}
    for exp in expected():
        for client in exp["clients"]:
            config = client.get("config") or {}
            group = config.get("group.id") or config.get("group_id")
            if group and client.get("consumed"):
                assert group in rebalanced, (exp["sample"], group)
    assert all(r["duration_ms"] is not None and r["duration_ms"] >= 0 for r in data["rebalances"])


def test_the_rebalance_sample_matches_what_its_clients_saw(results):
    """group-rebalance: one generation per rebalance the members' callbacks saw; the lag they left."""
    data, _ = results
    exp = json.loads((REPO / "samples" / "group-rebalance.expected.json").read_text())
    per_group = Counter(r["group_id"] for r in data["rebalances"])
    lags = {(r["group_id"], r["topic"], r["partition"]): r for r in data["consumer_lag"]}
    checked = 0
    for group, facts in exp["groups"].items():
        if facts.get("rebalances_seen") is not None:
            assert per_group[group] == facts["rebalances_seen"], group
            checked += 1
        for topic, parts in (facts.get("lag") or {}).items():
            for partition, want in parts.items():
                got = lags[(group, topic, int(partition))]
                assert got["high_watermark"] == want["high_watermark"], (group, topic, partition)
                if want["lag"] is not None:
                    assert (got["committed_offset"], got["lag"]) == (want["committed_offset"], want["lag"])
                    checked += 1
    assert checked >= 3 + 7  # three rebalancing groups, seven lagging partitions
