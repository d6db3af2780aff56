"""Dissector events -> rows of the dataset tables (plain dicts keyed by column name).

Nothing here does I/O; :mod:`kdissect.dataset` buffers and writes the rows.
Timestamps become integer microseconds (the tables store ``timestamp[us, UTC]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from dissector.events import Anomaly, Direction, Exchange, Request, Response
from dissector.records import DEFAULT_MAX_DECOMPRESSED, RecordBatch, decode_records
from dissector.topics import TopicRegistry
from dissector.v07.events import V07Request, V07Response, api_name_of, error_name_of
from dissector.v07.messages import MessageSetSummary, decode_message_set
from dissector.v07.views import partition_rows as v07_partition_rows
from dissector.views import PartitionRow, partition_rows

from kdissect.bodies import body_error, body_json, throttle_ms

Row = dict[str, Any]
_DIRECTION = {Direction.TO_BROKER: "request", Direction.TO_CLIENT: "response"}


class ConnectionLike(Protocol):
    """What rows need of a connection (capture's ``ConnectionInfo`` has it)."""

    id: str
    client_ip: str
    client_port: int
    broker_ip: str
    broker_port: int


@dataclass(frozen=True, slots=True)
class RowOptions:
    records: bool = False           # fill the records table
    record_bytes: bool = False      # ... with the key and value bytes themselves
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED


def us(ns: int | None) -> int | None:
    return None if ns is None else ns // 1000


def _failure_text(exchange: Exchange) -> str | None:
    parts = []
    for side, msg in (("request", exchange.request), ("response", exchange.response)):
        f = msg.failure if msg is not None else None
        if f is not None:
            parts.append(f"{side}: {f.error} at byte {f.offset}: {f.detail}")
    return "; ".join(parts) or None


def exchange_row(capture: str, conn: ConnectionLike, ex: Exchange) -> Row:
    req, resp = ex.request, ex.response
    api_key = ex.api_key
    resp_body = resp.body if resp is not None else None
    resp_json = body_json(resp_body)
    code, name = body_error(resp_body, resp_json)
    first = req if req is not None else resp
    if code is not None and first.protocol != "0.8+":  # type: ignore[union-attr]
        name = error_name_of(first, code)  # type: ignore[arg-type]
    latency = ex.latency_ns
    tls = getattr(conn, "tls", None)
    return {
        "capture": capture,
        "connection": conn.id,
        "client_ip": conn.client_ip,
        "client_port": conn.client_port,
        "broker_ip": conn.broker_ip,
        "broker_port": conn.broker_port,
        "tls_version": tls.version if tls is not None else None,
        "tls_cipher": tls.cipher if tls is not None else None,
        "tls_sni": tls.sni if tls is not None else None,
        "api_key": api_key,
        "api_name": None if api_key is None else api_name_of(first),  # type: ignore[arg-type]
        "api_version": ex.api_version,
        "protocol": first.protocol,  # type: ignore[union-attr]
        "correlation_id": ex.correlation_id,
        "client_id": req.client_id if req is not None else None,
        "request_ts": us(req.first_ts) if req is not None else None,
        "response_ts": us(resp.first_ts) if resp is not None else None,
        "latency_ms": None if latency is None else latency / 1e6,
        "request_bytes": req.size if req is not None else None,
        "response_bytes": resp.size if resp is not None else None,
        "error_code": code,
        "error_name": name,
        "throttle_ms": throttle_ms(resp_body),
        "status": ex.status.value,
        "decode_error": _failure_text(ex),
        "request": body_json(req.body) if req is not None else None,
        "response": resp_json,
        "inferred": bool(resp is not None and resp.inferred),
    }


def _messages(ex: Exchange) -> Iterator[tuple[str, Request | Response]]:
    if ex.request is not None:
        yield "request", ex.request
    if ex.response is not None and ex.response.api_key is not None:
        yield "response", ex.response


def message_partitions(msg: Request | Response, kind: str,
                       topics: TopicRegistry | None) -> Iterator[PartitionRow]:
    if isinstance(msg, (V07Request, V07Response)):
        return v07_partition_rows(msg)
    if msg.api_key is None or msg.api_version is None:
        return iter(())
    return partition_rows(msg.api_key, kind, msg.api_version, msg.body, topics)


def partition_table_rows(capture: str, conn: ConnectionLike, ex: Exchange,
                         topics: TopicRegistry | None) -> Iterator[tuple[Row, PartitionRow]]:
    """One row per topic-partition entry of the request and of the response."""
    for kind, msg in _messages(ex):
        api_key = msg.api_key
        assert api_key is not None
        for p in message_partitions(msg, kind, topics):
            has_records = p.record_count is not None or p.first_offset is not None
            yield {
                "capture": capture,
                "connection": conn.id,
                "correlation_id": msg.correlation_id,
                "api_key": api_key,
                "api_name": api_name_of(msg),
                "api_version": msg.api_version,
                "direction": kind,
                "ts": us(msg.first_ts),
                "topic": p.topic,
                "topic_id": p.topic_id,
                "partition": p.partition,
                "error_code": p.error_code,
                "error_name": None if p.error_code is None else error_name_of(msg, p.error_code),
                "record_count": p.record_count,
                "batch_count": p.batch_count,
                "bytes": p.bytes,
                "offset": p.offset,
                "base_offset": p.first_offset if has_records else p.offset,
                "last_offset": p.last_offset,
                "high_watermark": p.high_watermark,
                "compression": p.compression,
            }, p


def record_rows(base: Row, p: PartitionRow, options: RowOptions) -> tuple[list[Row], list[str]]:
    """Rows of the records table for one partition entry, and problems met decoding them.

    Needs the raw bytes of the records field (``RecordsSummary.data``).
    """
    data = getattr(p.records, "data", None)
    if not data:
        return [], []
    if isinstance(p.records, MessageSetSummary):
        return _v07_record_rows(base, p.records, options)
    rs = decode_records(data, max_decompressed=options.max_decompressed, strict=False)
    problems = [rs.error] if rs.error else []
    keep = options.record_bytes
    out: list[Row] = []
    for batch in rs.batches:
        if isinstance(batch, RecordBatch):
            if batch.error:
                problems.append(batch.error)
            flags = (batch.magic, batch.producer_id, batch.producer_epoch, batch.transactional, batch.control)
        else:
            if batch.error:
                problems.append(batch.error)
            flags = (batch.magic, None, None, False, False)
        magic, pid, epoch, txn, control = flags
        for rec in batch.leaves():
            ts = rec.timestamp
            if isinstance(batch, RecordBatch):
                header_count = len(rec.headers)
            else:
                header_count, magic = 0, rec.magic
            out.append({
                **base,
                "offset": rec.offset,
                "timestamp": ts * 1000 if ts is not None and ts >= 0 else None,
                "magic": magic,
                "key_size": None if rec.key is None else len(rec.key),
                "value_size": None if rec.value is None else len(rec.value),
                "key": rec.key if keep else None,
                "value": rec.value if keep else None,
                "header_count": header_count,
                "producer_id": pid,
                "producer_epoch": epoch,
                "transactional": txn,
                "control": control,
            })
    return out, problems


def _v07_record_rows(base: Row, s: MessageSetSummary, options: RowOptions) -> tuple[list[Row], list[str]]:
    """0.7 messages: offsets are byte positions from the fetch offset; no keys, timestamps or headers."""
    ms = decode_message_set(s.data or b"", s.base_offset, max_decompressed=options.max_decompressed)
    problems = [ms.error] if ms.error else []
    keep = options.record_bytes
    out: list[Row] = []
    for top in ms.messages:
        stack = [top]
        while stack:                      # wrappers' errors anywhere in the nesting
            m = stack.pop()
            if m.error:
                problems.append(f"message at byte {m.position}: {m.error}")
            stack.extend(m.inner or ())
        for m in top.leaves():
            out.append({
                **base,
                "offset": m.offset,
                "timestamp": None,
                "magic": m.magic,
                "key_size": None,
                "value_size": len(m.payload),
                "key": None,
                "value": m.payload if keep else None,
                "header_count": 0,
                "producer_id": None,
                "producer_epoch": None,
                "transactional": False,
                "control": False,
            })
    return out, problems


def records_base(row: Row) -> Row:
    """The columns a records row shares with its partitions row."""
    return {k: row[k] for k in ("capture", "connection", "correlation_id", "api_key", "direction", "ts",
                                "topic", "topic_id", "partition")}


def anomaly_row(capture: str, conn: ConnectionLike | None, a: Anomaly) -> Row:
    return {
        "capture": capture,
        "connection": conn.id if conn is not None else None,
        "ts": us(a.ts) if a.ts else None,
        "kind": a.kind,
        "direction": _DIRECTION.get(a.direction) if a.direction is not None else None,
        "detail": a.detail,
    }


def _where(row: Row) -> str:
    version = "0.7" if row['api_version'] is None else f"v{row['api_version']}"
    return (f"{row['api_name']} {version} {row['direction']} corr {row['correlation_id']} "
            f"{row['topic'] or row['topic_id']}[{row['partition']}]")


def records_problem_row(capture: str, conn: ConnectionLike, row: Row, problem: str) -> Row:
    """A record batch that ``--records`` could not fully decode (decompression, bad lengths)."""
    return {"capture": capture, "connection": conn.id, "ts": row["ts"], "kind": "records_decode",
            "direction": row["direction"], "detail": f"{_where(row)}: {problem}"}


def records_anomalies(capture: str, conn: ConnectionLike, row: Row, p: PartitionRow) -> Iterator[Row]:
    """CRC mismatches and framing errors that the records summary found."""
    s = p.records
    if s is None:
        return
    where = _where(row)
    failures = getattr(s, "crc_failures", None)
    if failures:
        yield {"capture": capture, "connection": conn.id, "ts": row["ts"], "kind": "crc_mismatch",
               "direction": row["direction"],
               "detail": f"{where}: CRC mismatch in {len(failures)} entr{'y' if len(failures) == 1 else 'ies'} "
                         f"at byte {', '.join(map(str, failures[:10]))}"}
    error = getattr(s, "error", None)
    if error:
        yield {"capture": capture, "connection": conn.id, "ts": row["ts"], "kind": "records_malformed",
               "direction": row["direction"], "detail": f"{where}: {error}"}
