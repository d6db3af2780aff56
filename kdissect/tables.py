"""The dataset contract: one explicit Arrow schema per table.

Explicit schemas keep types stable for Spark even when a capture yields no
rows (an empty file still carries the schema). The README documents every
column; keep the two in step.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")


def _f(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


_CONNECTION = [
    _f("capture", pa.string(), False),
    _f("connection", pa.string(), False),
]

EXCHANGES = pa.schema(_CONNECTION + [
    _f("client_ip", pa.string()),
    _f("client_port", pa.int32()),
    _f("broker_ip", pa.string()),
    _f("broker_port", pa.int32()),
    _f("tls_version", pa.string()),     # null on plaintext connections
    _f("tls_cipher", pa.string()),
    _f("tls_sni", pa.string()),
    _f("api_key", pa.int16()),
    _f("api_name", pa.string()),
    _f("api_version", pa.int16()),
    _f("protocol", pa.string(), False),
    _f("correlation_id", pa.int32(), False),
    _f("client_id", pa.string()),
    _f("request_ts", TS),
    _f("response_ts", TS),
    _f("latency_ms", pa.float64()),
    _f("request_bytes", pa.int64()),
    _f("response_bytes", pa.int64()),
    _f("error_code", pa.int16()),
    _f("error_name", pa.string()),
    _f("throttle_ms", pa.int32()),
    _f("status", pa.string(), False),
    _f("decode_error", pa.string()),
    _f("request", pa.string()),
    _f("response", pa.string()),
    _f("inferred", pa.bool_(), False),
])

PARTITIONS = pa.schema(_CONNECTION + [
    _f("correlation_id", pa.int32(), False),
    _f("api_key", pa.int16()),
    _f("api_name", pa.string()),
    _f("api_version", pa.int16()),
    _f("direction", pa.string(), False),
    _f("ts", TS),
    _f("topic", pa.string()),
    _f("topic_id", pa.string()),
    _f("partition", pa.int32()),
    _f("error_code", pa.int16()),
    _f("error_name", pa.string()),
    _f("record_count", pa.int64()),
    _f("batch_count", pa.int32()),
    _f("bytes", pa.int64()),
    _f("offset", pa.int64()),
    _f("base_offset", pa.int64()),
    _f("last_offset", pa.int64()),
    _f("high_watermark", pa.int64()),
    _f("compression", pa.string()),
])

RECORDS = pa.schema(_CONNECTION + [
    _f("correlation_id", pa.int32(), False),
    _f("api_key", pa.int16()),
    _f("direction", pa.string(), False),
    _f("ts", TS),
    _f("topic", pa.string()),
    _f("topic_id", pa.string()),
    _f("partition", pa.int32()),
    _f("offset", pa.int64()),
    _f("timestamp", TS),
    _f("magic", pa.int8()),
    _f("key_size", pa.int32()),
    _f("value_size", pa.int32()),
    _f("key", pa.binary()),
    _f("value", pa.binary()),
    _f("header_count", pa.int32()),
    _f("producer_id", pa.int64()),
    _f("producer_epoch", pa.int16()),
    _f("transactional", pa.bool_(), False),
    _f("control", pa.bool_(), False),
])

ANOMALIES = pa.schema([
    _f("capture", pa.string(), False),
    _f("connection", pa.string()),
    _f("ts", TS),
    _f("kind", pa.string(), False),
    _f("direction", pa.string()),
    _f("detail", pa.string()),
])

SCHEMAS: dict[str, pa.Schema] = {
    "exchanges": EXCHANGES,
    "partitions": PARTITIONS,
    "records": RECORDS,
    "anomalies": ANOMALIES,
}
