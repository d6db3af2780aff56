"""A results object shaped like ``kdissect analyze --json`` (see the analysis contract), for report tests.

The figures follow the ``group-rebalance`` sample (two groups rebalancing five times,
a lagging consumer) so the charts look like what users get; the client ids and topics
include hostile strings, because the real ones come off the wire.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

T0 = dt.datetime(2026, 11, 23, 19, 39, 47, 150000, tzinfo=dt.timezone.utc)
HOSTILE_CLIENT = '<img src=x onerror="document.title=\'pwned\'">'
HOSTILE_TOPIC = '"><script>document.title="pwned"</script>'


def iso(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).isoformat(timespec="microseconds").replace("+00:00", "Z")


def results() -> dict[str, list[dict[str, Any]]]:
    apis = {"Produce": 2.1, "Fetch": 6.0, "Heartbeat": 0.6, "JoinGroup": 2900.0, "SyncGroup": 4.0,
            "OffsetCommit": 1.5, "Metadata": 0.9}
    windows = [(i * 5.0, i * 5.0 + 5.0) for i in range(17)]
    latency_over_time = []
    for api, base in apis.items():
        for i, (a, b) in enumerate(windows):
            bump = 6.0 if api == "Fetch" and i == 9 else 1.0
            latency_over_time.append({
                "window_start": iso(a), "window_end": iso(b), "api_name": api, "count": 10 + (i * 7) % 13,
                "p50_ms": base * bump, "p90_ms": base * 1.8 * bump, "p99_ms": base * 3.1 * bump,
                "max_ms": base * 4.0 * bump})
    histogram = []
    edges = [0.1 * 2 ** k for k in range(16)]
    for api, base in apis.items():
        for lo, hi in zip(edges, edges[1:]):
            n = max(0, int(60 - abs((lo - base) / max(base, 0.1)) * 20))
            if n:
                histogram.append({"api_name": api, "bucket_low_ms": lo, "bucket_high_ms": hi, "count": n})
    latency_by_api = [{"api_name": api, "api_version": v, "count": 120, "mean_ms": base * 1.2, "p50_ms": base,
                       "p90_ms": base * 1.8, "p99_ms": base * 3.1, "p999_ms": base * 3.9, "max_ms": base * 4.0}
                      for v, (api, base) in enumerate(apis.items())]
    errors_over_time = []
    for i, (a, b) in enumerate(windows[3:13]):
        errors_over_time.append({"window_start": iso(a), "window_end": iso(b), "api_name": "Heartbeat",
                                 "error_name": "REBALANCE_IN_PROGRESS", "count": 1 + i % 3})
        if i % 4 == 1:
            errors_over_time.append({"window_start": iso(a), "window_end": iso(b), "api_name": "OffsetCommit",
                                     "error_name": "REBALANCE_IN_PROGRESS", "count": 2})
    errors_over_time.append({"window_start": iso(0), "window_end": iso(5), "api_name": "JoinGroup",
                             "error_name": "MEMBER_ID_REQUIRED", "count": 4})
    errors = [
        {"api_name": "Heartbeat", "error_name": "REBALANCE_IN_PROGRESS", "error_code": 27, "client_id": "kd-rb-a-mock",
         "broker": "127.0.0.1:41701", "topic": None, "partition": None, "count": 12, "share": 0.146,
         "retriable": False, "first_ts": iso(5.2), "last_ts": iso(71.0)},
        {"api_name": "OffsetCommit", "error_name": "REBALANCE_IN_PROGRESS", "error_code": 27,
         "client_id": HOSTILE_CLIENT, "broker": "127.0.0.1:41701", "topic": HOSTILE_TOPIC, "partition": 2,
         "count": 6, "share": 0.375, "retriable": False, "first_ts": iso(45.0), "last_ts": iso(71.0)},
        {"api_name": "JoinGroup", "error_name": "MEMBER_ID_REQUIRED", "error_code": 79, "client_id": "kd-rb-b-tansu",
         "broker": "127.0.0.1:9092", "topic": None, "partition": None, "count": 4, "share": 0.16,
         "retriable": None, "first_ts": iso(0.5), "last_ts": iso(12.0)},
    ]
    topics = ["rb-tansu", "rb-mock", HOSTILE_TOPIC]
    throughput_over_time = [
        {"window_start": iso(a), "window_end": iso(b), "topic": t, "produced_records": 6 + (i + k) % 4,
         "produced_bytes": 900 + 150 * ((i + k) % 4), "fetched_records": 5 + (i * 3 + k) % 9,
         "fetched_bytes": 800 + 170 * ((i * 3 + k) % 9), "requests": 20 + i % 5}
        for k, t in enumerate(topics) for i, (a, b) in enumerate(windows)]
    throughput_by_topic = [
        {"topic": t, "partition": p, "produced_records": 4 + 7 * p + k, "produced_bytes": 600 * (4 + 7 * p + k),
         "fetched_records": 9 + 11 * p, "fetched_bytes": 600 * (9 + 11 * p), "requests": 40 + p,
         "requests_per_s": 0.5 + p / 10}
        for k, t in enumerate(topics) for p in range(4)]
    rebalances, members = [], []
    plan = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "b"], ["a"]]
    for g_i, (group, offset) in enumerate((("kd-rb-tansu", 0.0), ("kd-rb-mock", 40.0))):
        starts = [0.2, 5.1, 10.9, 16.6, 27.2]
        for gen, (who, start) in enumerate(zip(plan, starts), start=1):
            s, e = offset + start, offset + start + (3.3 if gen != 4 else 9.0)
            cids = [f"kd-rb-{m}-{group.rsplit('-', 1)[1]}" for m in who]
            if g_i == 1 and "c" in who:
                cids[who.index("c")] = HOSTILE_CLIENT
            rebalances.append({
                "group_id": group, "generation_id": gen, "protocol": "range", "members": len(cids),
                "member_client_ids": cids, "start_ts": iso(s), "end_ts": iso(e), "duration_ms": (e - s) * 1000,
                "reason": "session timeout" if gen == 4 else None,
                "errors": ["REBALANCE_IN_PROGRESS"] if gen > 1 else []})
            for n, cid in enumerate(cids):
                parts = [f"rb-{group.rsplit('-', 1)[1]}-{p}" for p in range(4) if p % len(cids) == n]
                members.append({"group_id": group, "generation_id": gen, "member_id": f"{cid}-{gen:04d}abcdef",
                                "client_id": cid, "assigned_partitions": parts})
    consumer_lag = []
    for group, topic, hws in (("kd-lag-tansu", "rb-tansu", [4, 28, 2, 15]), ("kd-lag-mock", "rb-mock", [17, 0, 32, 5]),
                              ("kd-rb-tansu", "rb-tansu", [4, 28, 2, 15])):
        for p, hw in enumerate(hws):
            committed = hw if group.startswith("kd-rb") else (max(1, hw // 2) if hw else None)
            consumer_lag.append({"group_id": group, "client_id": None, "topic": topic, "partition": p,
                                 "committed_offset": committed, "committed_ts": iso(80.0), "fetch_position": None,
                                 "high_watermark": hw, "high_watermark_ts": iso(82.0),
                                 "lag": None if committed is None else hw - committed})
    return {
        "summary": [{"first_ts": iso(0), "last_ts": iso(85.2), "captures": 1, "connections": 44, "clients": 14,
                     "exchanges": 898, "anomalies": 59}],
        "latency_by_api": latency_by_api,
        "latency_by_client": [{"client_id": c, "count": 50, "mean_ms": 3.0, "p50_ms": 1.0, "p90_ms": 4.0,
                               "p99_ms": 9.0 + i, "p999_ms": 9.5 + i, "max_ms": 10.0 + i}
                              for i, c in enumerate(["kd-rb-a-tansu", HOSTILE_CLIENT, "kd-rb-lagger-mock"])],
        "latency_by_broker": [{"broker": "127.0.0.1:9092", "count": 400, "mean_ms": 30.0, "p50_ms": 1.0,
                               "p90_ms": 5.0, "p99_ms": 2950.0, "p999_ms": 3100.0, "max_ms": 3300.0}],
        "latency_by_topic": [{"topic": t, "count": 80, "mean_ms": 2.0, "p50_ms": 1.5, "p90_ms": 3.0,
                              "p99_ms": 5.0 + k, "p999_ms": 6.0 + k, "max_ms": 7.0 + k} for k, t in enumerate(topics)],
        "latency_over_time": latency_over_time,
        "latency_histogram": histogram,
        "latency_spikes": [{"window_start": iso(45), "window_end": iso(50), "api_name": "Fetch", "p99_ms": 111.6,
                            "baseline_p99_ms": 18.6, "ratio": 6.0}],
        "latency_by_size": [{"size_bucket": "<1 KiB", "count": 120, "p50_ms": 1.9, "p99_ms": 4.4},
                            {"size_bucket": "1-16 KiB", "count": 24, "p50_ms": 2.6, "p99_ms": 6.1}],
        "idle_fetches": [{"client_id": "kd-rb-a-tansu", "broker": "127.0.0.1:9092", "count": 31, "mean_ms": 502.0}],
        "errors": errors,
        "errors_over_time": errors_over_time,
        "throughput_by_topic": throughput_by_topic,
        "throughput_over_time": throughput_over_time,
        "top_clients": [{"client_id": c, "produced_bytes": 50000 - 9000 * i, "fetched_bytes": 20000 * i,
                         "requests": 100 + i} for i, c in enumerate(["kd-rb-producer-tansu", HOSTILE_CLIENT,
                                                                    "kd-rb-a-mock"])],
        "rebalances": rebalances,
        "group_members": members,
        "offset_commits": [{"group_id": "kd-rb-tansu", "topic": "rb-tansu", "partition": p, "committed_offset": o,
                            "ts": iso(30 + p)} for p, o in enumerate([4, 28, 2, 15])],
        "consumer_lag": consumer_lag,
        "produce_to_fetch": [{"topic": "rb-tansu", "partition": 1, "client_id": "kd-rb-a-tansu", "count": 28,
                              "p50_ms": 12.0, "max_ms": 480.0}],
        "producers": [{"client_id": "kd-rb-producer-tansu", "producer_id": 1, "producer_epoch": 0,
                       "transactional_id": None, "idempotent": True, "transactional": False,
                       "transactions_begun": 0, "transactions_committed": 0, "transactions_aborted": 0,
                       "records_per_batch": 1.0, "batches_per_request": 1.0}],
        "clients": [{"client_id": c, "client_software_name": "confluent-kafka-python",
                     "client_software_version": "2.16.1-rdkafka-2.16.0", "connections": 4, "apis": "Fetch,Heartbeat",
                     "paired": 120, "unpaired": i % 2, "orphans": 0}
                    for i, c in enumerate(["kd-rb-a-tansu", HOSTILE_CLIENT])],
        "api_versions": [{"client_id": "kd-rb-b-tansu", "api_name": "JoinGroup", "api_version": 7,
                          "broker_max_version": 9, "outdated": True, "count": 5},
                         {"client_id": "kd-rb-a-tansu", "api_name": "Fetch", "api_version": 16,
                          "broker_max_version": 16, "outdated": False, "count": 90}],
        "anomalies_by_kind": [{"kind": "trailing_bytes", "count": 59, "first_ts": iso(0.1), "last_ts": iso(84.0)}],
    }


def findings() -> list[dict[str, Any]]:
    """Two findings (issue 15's table) for the report tests that want the opening section."""
    return [
        {"finding": "group.session_timeout", "severity": "critical", "subject_kind": "group", "subject": "kd-rb-mock",
         "capture": "group-rebalance.pcap", "first_ts": iso(56.0), "last_ts": iso(65.0),
         "evidence": "member kd-rb-c-mock stopped heartbeating; removed after 9.0 s",
         "explanation": "its partitions went unconsumed until the rebalance ended",
         "advice": "find why the member died; session.timeout.ms bounds the gap",
         "show": "kdissect show group-rebalance.pcap --api Heartbeat,JoinGroup"},
        {"finding": "consumer.commit_during_rebalance", "severity": "warning", "subject_kind": "client",
         "subject": HOSTILE_CLIENT, "capture": "group-rebalance.pcap", "first_ts": iso(45.0), "last_ts": iso(71.0),
         "evidence": "6 OffsetCommit answered REBALANCE_IN_PROGRESS", "explanation": None,
         "advice": "commit before the revoke callback returns", "show": None},
    ]
