"""Builders of tiny dataset rows for the findings rules: an exchange, a partition entry, a Produce body."""

from __future__ import annotations

import itertools
import json
import zlib

from pyspark.sql import DataFrame, SparkSession

from analysis.findings import BY_ID, Inputs, load
from dissector.schema import APIS
from tests.analysis.conftest import at, table

_cid = itertools.count(1)
# The dataset names every exchange's api by key and name; the rows here by name.
API_KEY = {api["name"]: key for key, api in APIS.items()}


def ex(api: str, t: float, *, client: str = "c1", conn: str = "k1", request: dict | None = None,
       response: dict | None = None, error: str | None = "NONE", latency_ms: float | None = 1.0,
       status: str = "ok", version: int = 9, broker: tuple[str, int] = ("10.0.0.1", 9092),
       cid: int | None = None, throttle_ms: int | None = None, capture: str = "cap.pcap") -> dict:
    answered = status not in ("no_response", "no_response_expected")
    return {"capture": capture, "connection": conn, "client_ip": "10.0.0.9", "client_port": 40000,
            "broker_ip": broker[0], "broker_port": broker[1], "api_key": API_KEY.get(api), "api_name": api,
            "api_version": version,
            "correlation_id": next(_cid) if cid is None else cid, "client_id": client, "request_ts": at(t),
            "response_ts": at(t + (latency_ms or 0) / 1000) if answered else None,
            "latency_ms": latency_ms if answered else None, "error_name": error if answered else None,
            "error_code": (0 if error == "NONE" else 1) if answered else None, "status": status,
            "throttle_ms": throttle_ms,
            "request": json.dumps(request or {}), "response": json.dumps(response) if response else None}


def part(e: dict, direction: str, *, topic: str = "t", partition: int = 0, **cols) -> dict:
    """A partitions row belonging to exchange ``e``."""
    ts = e["request_ts"] if direction == "request" else e["response_ts"]
    return {"capture": e["capture"], "connection": e["connection"], "correlation_id": e["correlation_id"],
            "api_key": e["api_key"], "api_name": e["api_name"], "api_version": e["api_version"], "direction": direction,
            "ts": ts,
            "topic": topic, "partition": partition, "client_id": e["client_id"], **cols}


def produce_body(topic: str = "t", partition: int = 0, *, acks: int = -1, records: int = 1, batches: int = 1,
                 size: int = 100, first_ts: int = 1000, producer_id: int = -1, base_sequence: int = -1,
                 codec: str = "none", magic: int = 2) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": {
            "total_bytes": size, "magics": [magic], "batch_count": batches, "record_count": records,
            "first_timestamp": first_ts, "max_timestamp": first_ts, "codec": codec, "producer_id": producer_id,
            "producer_epoch": 0 if producer_id >= 0 else -1, "base_sequence": base_sequence,
            "first_crc": zlib.crc32(f"{first_ts}/{records}/{size}".encode())}}]}]}  # a made-up CRC


def run(spark: SparkSession, rule_id: str, exchanges: list[dict], partitions: list[dict] = (), **overrides):
    """The rule's findings as a list of Row, with its default thresholds (or ``overrides``)."""
    cfg = load([BY_ID[rule_id]], sets=[f"{rule_id}.{k}={v}" for k, v in overrides.items()])
    inp = Inputs(table(spark, "exchanges", exchanges), table(spark, "partitions", list(partitions)))
    out: DataFrame = BY_ID[rule_id].run(inp, cfg.for_rule(rule_id))
    return out.collect()


def subjects(rows) -> dict[str, str]:
    """subject -> severity."""
    return {r.subject: r.severity for r in rows}
