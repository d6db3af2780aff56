"""The dataset contract: one explicit Arrow schema per table.

Explicit schemas keep types stable for Spark even when a capture yields no
rows (an empty file still carries the schema). The README documents every
column; keep the two in step.

The columns are declared once, below, as plain data: row building needs only
their names and order (``COLUMNS``) and runs before pyarrow is imported; the
Arrow schemas (``EXCHANGES``, ..., ``SCHEMAS``) are built from the same
declaration on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# (name, type, nullable); "ts" is timestamp[us, UTC].
_CONNECTION = (("capture", "string", False), ("connection", "string", False))

SPEC: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "exchanges": _CONNECTION + (
        ("client_ip", "string", True),
        ("client_port", "int32", True),
        ("broker_ip", "string", True),
        ("broker_port", "int32", True),
        ("tls_version", "string", True),       # null on plaintext connections
        ("tls_cipher", "string", True),
        ("tls_sni", "string", True),
        ("api_key", "int16", True),
        ("api_name", "string", True),
        ("api_version", "int16", True),
        ("protocol", "string", False),
        ("correlation_id", "int32", False),
        ("client_id", "string", True),
        ("request_ts", "ts", True),
        ("response_ts", "ts", True),
        ("latency_ms", "float64", True),
        ("request_bytes", "int64", True),
        ("response_bytes", "int64", True),
        ("error_code", "int16", True),
        ("error_name", "string", True),
        ("throttle_ms", "int32", True),
        ("status", "string", False),
        ("decode_error", "string", True),
        ("request", "string", True),
        ("response", "string", True),
        ("inferred", "bool", False),
    ),
    "partitions": _CONNECTION + (
        ("correlation_id", "int32", False),
        ("api_key", "int16", True),
        ("api_name", "string", True),
        ("api_version", "int16", True),
        ("direction", "string", False),
        ("ts", "ts", True),
        ("topic", "string", True),
        ("topic_id", "string", True),
        ("partition", "int32", True),
        ("error_code", "int16", True),
        ("error_name", "string", True),
        ("record_count", "int64", True),
        ("batch_count", "int32", True),
        ("bytes", "int64", True),
        ("offset", "int64", True),
        ("base_offset", "int64", True),
        ("last_offset", "int64", True),
        ("high_watermark", "int64", True),
        ("compression", "string", True),
        ("client_id", "string", True),         # the exchange's (its request's) client id
    ),
    "records": _CONNECTION + (
        ("correlation_id", "int32", False),
        ("api_key", "int16", True),
        ("direction", "string", False),
        ("ts", "ts", True),
        ("topic", "string", True),
        ("topic_id", "string", True),
        ("partition", "int32", True),
        ("offset", "int64", True),
        ("timestamp", "ts", True),
        ("magic", "int8", True),
        ("key_size", "int32", True),
        ("value_size", "int32", True),
        ("key", "binary", True),
        ("value", "binary", True),
        ("header_count", "int32", True),
        ("producer_id", "int64", True),
        ("producer_epoch", "int16", True),
        ("transactional", "bool", False),
        ("control", "bool", False),
        # Record payloads (kdissect.dataset.payload_columns): framing always, decoded JSON with schemas.
        ("key_schema_id", "int32", True),
        ("value_schema_id", "int32", True),
        ("key_schema_guid", "string", True),
        ("value_schema_guid", "string", True),
        ("key_format", "string", True),
        ("value_format", "string", True),
        ("key_decoded", "string", True),
        ("value_decoded", "string", True),
    ),
    "anomalies": (
        ("capture", "string", False),
        ("connection", "string", True),
        ("ts", "ts", True),
        ("kind", "string", False),
        ("direction", "string", True),
        ("detail", "string", True),
        ("quirk_of", "string", True),      # a known quirk (dissector.quirks): who sends such bytes
        ("quirk", "string", True),         # ... and why they do no harm
    ),
}

COLUMNS: dict[str, tuple[str, ...]] = {t: tuple(c[0] for c in cols) for t, cols in SPEC.items()}

_BY_NAME = {"EXCHANGES": "exchanges", "PARTITIONS": "partitions", "RECORDS": "records", "ANOMALIES": "anomalies"}

if TYPE_CHECKING:
    EXCHANGES: pa.Schema
    PARTITIONS: pa.Schema
    RECORDS: pa.Schema
    ANOMALIES: pa.Schema
    SCHEMAS: dict[str, pa.Schema]


def _schema(table: str) -> pa.Schema:
    import pyarrow as pa
    types = {"string": pa.string(), "binary": pa.binary(), "bool": pa.bool_(), "int8": pa.int8(),
             "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(),
             "ts": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(name, types[t], nullable=nullable) for name, t, nullable in SPEC[table]])


def __getattr__(name: str) -> Any:
    if name == "SCHEMAS":
        value: Any = {t: __getattr__(const) for const, t in
                      (("EXCHANGES", "exchanges"), ("PARTITIONS", "partitions"), ("RECORDS", "records"),
                       ("ANOMALIES", "anomalies"))}
    elif name in _BY_NAME:
        value = _schema(_BY_NAME[name])
    else:
        raise AttributeError(f"module 'kdissect.dataset.tables' has no attribute {name!r}")
    globals()[name] = value
    return value
