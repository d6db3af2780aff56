"""Dissector events -> rows of the dataset tables, appended cell by cell to column buffers.

Nothing here does I/O; :mod:`kdissect.dataset.writer` owns the buffers, flushes them
as Parquet row groups and counts what went in. There is no dict or object per
row: each exchange's facts (its JSON texts, its partitions) are worked out
once and appended straight to one buffer per column, in schema order.
Timestamps become integer microseconds (the tables store ``timestamp[us, UTC]``).

Compiled (``rows.pxd``), :class:`RowBuilder` is an extension type whose attributes are C struct
fields, and the messages, exchanges and connections of the exact classes the dissector and capture
make (told apart with ``type(x) is``) have their fields read from C structs too, where an untyped one
costs a type-dictionary lookup per field; the body and its entries are typed dicts. The columns are
typed buffers (``hotpath/_cells.pyx``) whose ``add`` is inlined into this module's C (as Python, lists
whose ``add`` is ``append``), and the rows each table holds before an exchange are the lengths of four
first columns, where a tuple from ``_mark`` costs an exchange ~300 instructions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from capture.flows import ConnectionInfo
from hotpath.speedups import find
from dissector.events import KAFKA_PROTOCOL, Anomaly, Direction, Exchange, Request, Response
from dissector.records import DEFAULT_MAX_DECOMPRESSED, OUT_OF_RANGE as _OUT_OF_RANGE, RecordsSummary
from dissector import quirks, schema
from dissector.schema import api_name, error_name
from dissector.topics import TopicRegistry
from dissector.v07.events import V07Request, V07Response, api_name_of, error_name_of
from dissector.v07.messages import MessageSetSummary
from dissector.v07.views import partition_rows as v07_partition_rows
from dissector.views import _OFFSET_FIELDS, PartitionRow, partition_rows, topic_paths

from kdissect.dataset.bodies import body_bytes
from kdissect.dataset.columns import new_buffers
from kdissect.dataset.failures import exchange_name, failure_text, raised
from kdissect.dataset.record_rows import RecordRows
from kdissect.dataset.tables import COLUMNS

Row = dict[str, Any]
# A TopicPath's fields, then the offset fields its partition entries have (see _plan).
Plan = tuple[tuple[str, ...], str | None, str | None, str | None, str | None, str | None, tuple[str, ...]]
Columns = Sequence[Any]            # one buffer per column (kdissect.dataset.columns), in the schema's order
_DIRECTION = {Direction.TO_BROKER: "request", Direction.TO_CLIENT: "response"}
# In compact JSON a key is `"error_code":`; inside a string value its quotes would be
# escaped, so this cannot match text that merely mentions the name.
_NESTED_ERROR = re.compile(rb'"error_code":(-?[1-9][0-9]*)').search
_ERROR_KEY = b'"error_code":'
_VALUE_AT = len(_ERROR_KEY)          # from where the key starts to where its value does


def _nested_error(text: bytes) -> int:
    """The first non-zero nested error code in a body's JSON, else 0.

    JSON numbers have no leading zeros, so a value starting with 0 is 0: the pattern's search,
    which cost more than the rest of the error lookup, runs only from a key whose value does
    not, and finds what it would have found from the start.
    """
    at = find(text, _ERROR_KEY, 0)
    while at >= 0:
        if at + _VALUE_AT >= len(text) or text[at + _VALUE_AT] != 48:     # not b"0"
            m = _NESTED_ERROR(text, at)
            return int(m.group(1)) if m else 0
        at = find(text, _ERROR_KEY, at + _VALUE_AT)
    return 0


class ConnectionLike(Protocol):
    """What rows need of a connection (capture's ``ConnectionInfo`` has it)."""

    id: str
    client_ip: str
    client_port: int
    broker_ip: str
    broker_port: int


@dataclass(frozen=True)
class RowOptions:
    records: bool = False           # fill the records table
    record_bytes: bool = False      # ... with the key and value bytes themselves
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    payloads: Any = None            # a payloads.PayloadDecoder: framing and decoding of keys and values


def us(ns: int | None) -> int | None:
    return None if ns is None else ns // 1000


class Unresolved(Protocol):
    """Told about rows whose topic id had no name yet (when a share of a capture is decoded)."""

    def partition(self, row: int, topic_id: str) -> None: ...
    def records(self, first: int, count: int, topic_id: str) -> None: ...
    def anomaly(self, row: int, topic_id: str) -> None: ...
    def forget(self, table: str, row: int) -> None:
        """Rows of ``table`` from ``row`` on were taken back (an exchange whose rows failed)."""


@dataclass
class Tally:
    """What one exchange added, for the writer's counts and flush decisions."""

    partitions: int = 0
    records: int = 0
    record_bytes: int = 0


class RowBuilder:
    """The rows of one capture's events, appended to column buffers.

    ``cols[table]`` are the buffers; ``position(table)`` is how many rows of that
    table exist before the buffer's first (to number rows for ``unresolved``).
    ``anomaly_kinds`` counts anomaly rows by kind as they are added.
    """

    def __init__(self, capture: str, options: RowOptions, topics: TopicRegistry | None,
                 cols: dict[str, Columns], anomaly_kinds: dict[str, int],
                 position: Callable[[str], int] | None = None, unresolved: Unresolved | None = None) -> None:
        self.capture = capture
        self.options = options
        self.topics = topics
        self.cols = cols
        self.kinds = anomaly_kinds
        self._position = position
        self._unresolved = unresolved
        # The buffers themselves, appended to as ``col.append(x)`` (see the module's doc).
        self._ex = tuple(cols["exchanges"])
        self._pa = tuple(cols["partitions"])
        self._an = tuple(cols["anomalies"])
        self._recrows = RecordRows(capture, options, cols["records"]) if "records" in cols else None
        self._rec = self._recrows.columns if self._recrows is not None else None
        self._ex0, self._pa0, self._an0 = self._ex[0], self._pa[0], self._an[0]
        self._rec0 = self._rec[0] if self._rec is not None else None
        self._api_names: dict[int, str] = {}
        self._plans: dict[int, tuple[Plan, ...]] = {}       # by _plan_key
        self._error_names: dict[int, str] = {}
        # Connections whose broker showed a known quirk of its own (dissector.quirks): who it is.
        self._quirky_brokers: dict[str, str] = {}

    # -- exchanges ---------------------------------------------------------------------------

    def exchange(self, conn: ConnectionLike, ex: Exchange, tally: Tally) -> tuple[str | None, str, int | None,
                                                                                  str | None, int] | None:
        """Rows of one exchange; returns (api name, status, error code, error name, JSON bytes).

        An exception while building them (a bug: it must not happen) costs this exchange alone:
        every row it had added is taken back, a ``dissector_error`` anomaly names it, and None
        is returned; the capture's other rows are untouched.
        """
        # The rows each table holds before (as _mark), read from the first columns themselves (module's doc).
        n_ex, n_pa, n_an = len(self._ex0), len(self._pa0), len(self._an0)
        n_rec = len(self._rec0) if self._rec0 is not None else 0
        try:
            return self._exchange(conn, ex, tally)
        except Exception as exc:  # noqa: BLE001  (one exchange's bug must not cost the capture)
            self._rollback((n_ex, n_pa, n_an, n_rec))
            tally.partitions = tally.records = tally.record_bytes = 0
            first = ex.request if ex.request is not None else ex.response
            self._anomaly_at(conn.id, us(getattr(first, "first_ts", None)), "dissector_error", None,
                             f"{exchange_name(ex)}: building its rows raised {raised(exc)}; "
                             "the exchange is left out of the dataset", None)
            return None

    def _exchange(self, conn: ConnectionLike, ex: Exchange, tally: Tally) -> tuple[str | None, str, int | None,
                                                                                   str | None, int]:
        (capture, connection, client_ip, client_port, broker_ip, broker_port, tls_version, tls_cipher, tls_sni,
         a_key, a_name, a_version, a_protocol, a_corr, client_id, request_ts, response_ts, latency_ms, request_bytes,
         response_bytes, error_code, error_name_, throttle, status, decode_error, request, response,
         inferred) = self._ex
        req, resp = ex.request, ex.response
        first = req if req is not None else resp
        # Exactly a Request or Response: Kafka's protocol, without a lookup of the class attribute.
        if type(first) is Request or type(first) is Response:
            protocol = KAFKA_PROTOCOL
        else:
            protocol = first.protocol  # type: ignore[union-attr]
        if req is not None:
            api_key = req.api_key
            version = req.api_version
            corr = req.correlation_id
            req_json = body_bytes(req.body) if req.body is not None else None
        else:
            api_key = resp.api_key  # type: ignore[union-attr]
            version = resp.api_version  # type: ignore[union-attr]
            corr = resp.correlation_id  # type: ignore[union-attr]
            req_json = None
        if api_key is None:
            name = None
        elif protocol == KAFKA_PROTOCOL:
            name = self._api_name(api_key)
        else:
            name = api_name_of(first)  # type: ignore[arg-type]
        if resp is not None:
            body = resp.body
            if body is not None:
                resp_json = body_bytes(body)
                code = body.get("error_code")
                if not isinstance(code, int) or code == 0:
                    code = _nested_error(resp_json)
                ename = self._error_name(code) if protocol == KAFKA_PROTOCOL else error_name_of(first, code)
                throttle_ms = body.get("throttle_time_ms")
                if not isinstance(throttle_ms, int):
                    throttle_ms = None
            else:
                resp_json = code = ename = throttle_ms = None
        else:
            resp_json = code = ename = throttle_ms = None
        st = ex.status._value_             # not .value or a dict lookup: both run Python code in enum
        if type(conn) is ConnectionInfo:      # capture's (see the module's doc)
            ci = conn
            cid, cip, cport, bip, bport, tls = ci.id, ci.client_ip, ci.client_port, ci.broker_ip, ci.broker_port, ci.tls
        else:
            cid, cip, cport, bip, bport = conn.id, conn.client_ip, conn.client_port, conn.broker_ip, conn.broker_port
            tls = getattr(conn, "tls", None)
        capture.add(self.capture)
        connection.add(cid)
        client_ip.add(cip)
        client_port.add(cport)
        broker_ip.add(bip)
        broker_port.add(bport)
        if tls is not None:
            tls_version.add(tls.version)
            tls_cipher.add(tls.cipher)
            tls_sni.add(tls.sni)
        else:
            tls_version.add(None)
            tls_cipher.add(None)
            tls_sni.add(None)
        a_key.add(api_key)
        a_name.add(name)
        a_version.add(version)
        a_protocol.add(protocol)
        a_corr.add(corr)
        if req is not None:
            req_ts = req.first_ts // 1000
            client_id.add(req.client_id)
            request_ts.add(req_ts)
            request_bytes.add(req.size)
        else:
            client_id.add(None)
            request_ts.add(None)
            request_bytes.add(None)
        if resp is not None:
            resp_ts = resp.first_ts // 1000
            response_ts.add(resp_ts)
            response_bytes.add(resp.size)
            latency_ms.add(None if req is None else (resp.first_ts - req.last_ts) / 1e6)
            inferred.add(bool(resp.inferred))
        else:
            response_ts.add(None)
            response_bytes.add(None)
            latency_ms.add(None)
            inferred.add(False)
        error_code.add(code)
        error_name_.add(ename)
        throttle.add(throttle_ms)
        status.add(st)
        if (req is not None and req.failure is not None) or (resp is not None and resp.failure is not None):
            decode_error.add(failure_text(ex))
        else:
            decode_error.add(None)
        request.append(req_json)
        response.append(resp_json)
        # The api name, connection id and times are the exchange's own: worked out once, above.
        client = req.client_id if req is not None else None
        if req is not None:
            self._partitions(conn, req, "request", tally, cid, name, req_ts, client)
        if resp is not None and resp.api_key is not None:
            self._partitions(conn, resp, "response", tally, cid, name, resp_ts, client)
        return name, st, code, ename, (len(req_json) if req_json else 0) + (len(resp_json) if resp_json else 0)

    def _api_name(self, api_key: int) -> str:
        name = self._api_names.get(api_key)
        if name is None:
            name = self._api_names[api_key] = api_name(api_key)
        return name

    def _error_name(self, code: int) -> str:
        name = self._error_names.get(code)
        if name is None:
            name = self._error_names[code] = error_name(code)
        return name

    # -- taking rows back (see exchange) -------------------------------------------------------

    def _mark(self) -> tuple[int, int, int, int]:
        """Rows in each table's buffers (exchanges, partitions, anomalies, records): every column
        of a table holds as many cells between two exchanges, so its first column tells."""
        rec = self._rec
        return (len(self._ex[0]), len(self._pa[0]), len(self._an[0]), len(rec[0]) if rec is not None else 0)

    def _rollback(self, mark: tuple[int, int, int, int]) -> None:
        """Take back every cell added since ``mark``, whole rows and the part of a row alike."""
        kinds = self.kinds
        for kind in self._an[3][mark[2]:]:            # anomaly rows counted as they were added
            kinds[kind] -= 1
            if not kinds[kind]:
                del kinds[kind]
        tables = (("exchanges", self._ex), ("partitions", self._pa), ("anomalies", self._an),
                  ("records", self.cols["records"] if self._rec is not None else None))   # payload columns too
        for (table, cols), n in zip(tables, mark):
            if cols is None:
                continue
            if self._unresolved is not None and self._position is not None:
                self._unresolved.forget(table, self._position(table) + n)
            for col in cols:
                if isinstance(col, list):
                    del col[n:]
                else:
                    col.truncate(n)

    # -- partitions --------------------------------------------------------------------------

    def _partitions(self, conn: ConnectionLike, msg: Request | Response, kind: str, tally: Tally, cid: str,
                    name: str | None, ts: int, client: str | None) -> None:
        """One row per topic-partition entry of ``msg`` (see :func:`dissector.views.partition_rows`), whose
        connection id, api name, time in µs and exchange's client id are ``cid``, ``name``, ``ts`` and ``client``."""
        # The exact types first (see the module's doc); their protocol is Kafka's.
        if type(msg) is Request:
            rq = msg
            api_key, version, body, corr = rq.api_key, rq.api_version, rq.body, rq.correlation_id
        elif type(msg) is Response:
            rs = msg
            api_key, version, body, corr = rs.api_key, rs.api_version, rs.body, rs.correlation_id
        elif msg.protocol != KAFKA_PROTOCOL:
            if isinstance(msg, (V07Request, V07Response)):
                self._partition_views(conn, msg, kind, v07_partition_rows(msg), tally)
            return
        else:
            api_key, version, body, corr = msg.api_key, msg.api_version, msg.body, msg.correlation_id
        if api_key is None or version is None or not body:
            return
        key = _plan_key(api_key, kind, version)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _plan(api_key, kind, version)
        if not plan:
            return
        (capture, connection, a_corr, a_key, a_name, a_version, direction, a_ts, a_topic, a_topic_id, a_partition,
         a_error_code, a_error_name, a_record_count, a_batch_count, a_bytes, a_offset, a_base_offset,
         a_last_offset, a_high_watermark, a_compression, a_client_id) = self._pa
        topics = self.topics
        unresolved = self._unresolved
        cap = self.capture
        want_records = self._rec is not None
        n = 0
        for path, name_field, id_field, partitions_field, index_field, list_field, offset_fields in plan:
            if len(path) == 1:
                # The usual shape (topics at the top): the list itself, without a generator.
                topics_list = body.get(path[0])
                if not isinstance(topics_list, list):
                    continue
            else:
                topics_list = _arrays(body, path)
            for item in topics_list:
                if type(item) is not dict:      # bodies hold plain dicts
                    continue
                topic = item
                tname = topic.get(name_field) if name_field else None
                topic_id = topic.get(id_field) if id_field else None
                if tname is None and topics is not None:
                    tname = topics.name(topic_id)
                track = unresolved is not None and tname is None and topic_id is not None
                if list_field:
                    for index in topic.get(list_field) or ():
                        if track:
                            unresolved.partition(self._where_next("partitions"), topic_id)  # type: ignore[union-attr]
                        capture.add(cap)
                        connection.add(cid)
                        a_corr.add(corr)
                        a_key.add(api_key)
                        a_name.add(name)
                        a_version.add(version)
                        direction.add(kind)
                        a_ts.add(ts)
                        a_topic.add(tname)
                        a_topic_id.add(topic_id)
                        a_partition.add(index)
                        for column in (a_error_code, a_error_name, a_record_count, a_batch_count, a_bytes,
                                       a_offset, a_base_offset, a_last_offset, a_high_watermark, a_compression):
                            column.append(None)
                        a_client_id.add(client)
                        n += 1
                    continue
                for item in topic.get(partitions_field) or ():  # type: ignore[arg-type]
                    if type(item) is not dict:
                        continue
                    p = item
                    rec = p.get("records")
                    # Anything else (records kept raw by a caller's hook) has no summary to report.
                    summary = rec if isinstance(rec, RecordsSummary) else None
                    offset = None
                    for k in offset_fields:
                        if k in p:
                            offset = p[k]
                            break
                    code = p.get("error_code")
                    partition = p.get(index_field)
                    if track:
                        unresolved.partition(self._where_next("partitions"), topic_id)  # type: ignore[union-attr]
                    capture.add(cap)
                    connection.add(cid)
                    a_corr.add(corr)
                    a_key.add(api_key)
                    a_name.add(name)
                    a_version.add(version)
                    direction.add(kind)
                    a_ts.add(ts)
                    a_topic.add(tname)
                    a_topic_id.add(topic_id)
                    a_partition.add(partition)
                    a_error_code.add(code)
                    a_error_name.add(None if code is None else self._error_name(code))
                    a_high_watermark.add(p.get("high_watermark"))
                    a_offset.add(offset)
                    a_client_id.add(client)
                    n += 1
                    if summary is None:
                        a_record_count.add(None)
                        a_batch_count.add(None)
                        a_bytes.add(None)
                        a_last_offset.add(None)
                        a_compression.add(None)
                        a_base_offset.add(offset)
                        continue
                    first = summary.first_offset
                    count = summary.record_count
                    a_record_count.add(count)
                    a_batch_count.add(summary.batch_count)
                    a_bytes.add(summary.total_bytes)
                    a_base_offset.add(first if count is not None or first is not None else offset)
                    a_last_offset.add(summary.last_offset)
                    a_compression.add(summary.codec)
                    if summary.crc_failures or summary.error or summary.out_of_range or (want_records and summary.data):
                        where = f"{name} v{version} {kind} corr {corr} {tname or topic_id}[{partition}]"
                        self._record_extras(conn, msg, kind, ts, tname, topic_id, partition, summary, where,
                                            track, tally)
        tally.partitions += n

    def _partition_views(self, conn: ConnectionLike, msg: Request | Response, kind: str,
                         views: Iterator[PartitionRow], tally: Tally) -> None:
        """Rows from :class:`PartitionRow` views (the 0.7 protocol's messages, a rare path)."""
        (capture, connection, a_corr, a_key, a_name, a_version, direction, a_ts, a_topic, a_topic_id, a_partition,
         a_error_code, a_error_name, a_record_count, a_batch_count, a_bytes, a_offset, a_base_offset,
         a_last_offset, a_high_watermark, a_compression, a_client_id) = self._pa
        name = api_name_of(msg)
        ts = msg.first_ts // 1000
        version = "0.7" if msg.api_version is None else f"v{msg.api_version}"
        for p in views:
            has_records = p.record_count is not None or p.first_offset is not None
            capture.append(self.capture)
            connection.append(conn.id)
            a_corr.append(msg.correlation_id)
            a_key.append(msg.api_key)
            a_name.append(name)
            a_version.append(msg.api_version)
            direction.append(kind)
            a_ts.append(ts)
            a_topic.append(p.topic)
            a_topic_id.append(p.topic_id)
            a_partition.append(p.partition)
            a_error_code.append(p.error_code)
            a_error_name.append(None if p.error_code is None else error_name_of(msg, p.error_code))
            a_record_count.append(p.record_count)
            a_batch_count.append(p.batch_count)
            a_bytes.append(p.bytes)
            a_offset.append(p.offset)
            a_base_offset.append(p.first_offset if has_records else p.offset)
            a_last_offset.append(p.last_offset)
            a_high_watermark.append(p.high_watermark)
            a_compression.append(p.compression)
            a_client_id.append(None)        # the 0.7 protocol has no client id
            tally.partitions += 1
            rec = p.records
            if rec is not None:
                where = f"{name} {version} {kind} corr {msg.correlation_id} {p.topic or p.topic_id}[{p.partition}]"
                self._record_extras(conn, msg, kind, ts, p.topic, p.topic_id, p.partition, rec, where, False,
                                    tally)

    def _where_next(self, table: str) -> int:
        """Row number the next row appended to ``table`` will have."""
        assert self._position is not None
        return self._position(table) + len(self.cols[table][0])

    def _record_extras(self, conn: ConnectionLike, msg: Request | Response, kind: str, ts: int, tname: str | None,
                       topic_id: str | None, partition: int | None, rec: Any, where: str, track: bool,
                       tally: Tally) -> None:
        """CRC and framing problems the summary found; with --records, the records themselves."""
        failures = getattr(rec, "crc_failures", None)
        if failures:
            quirk = None
            if self._quirky_brokers.get(conn.id) == MOCK_CLUSTER:
                quirk = quirks.control_batch_crc(_all_control(getattr(rec, "data", None), failures))
            self._anomaly_at(conn.id, ts, "crc_mismatch", kind,
                             f"{where}: CRC mismatch in {len(failures)} entr{'y' if len(failures) == 1 else 'ies'} "
                             f"at byte {', '.join(map(str, failures[:10]))}", topic_id if track else None, quirk)
        error = getattr(rec, "error", None)
        if error:
            self._anomaly_at(conn.id, ts, "records_malformed", kind, f"{where}: {error}",
                             topic_id if track else None)
        beyond = getattr(rec, "out_of_range", None)
        if beyond:
            self._anomaly_at(conn.id, ts, "out_of_range", kind, f"{where}: {beyond}", topic_id if track else None)
        data = getattr(rec, "data", None)
        if self._rec is not None and data:
            first = self._where_next("records") if track else 0
            mark = self._mark()
            try:
                if isinstance(rec, MessageSetSummary):
                    rows, nbytes, problems, bugs = self._recrows.v07(conn.id, msg.correlation_id, msg.api_key, kind,
                                                                     ts, tname, topic_id, partition, rec)
                else:
                    rows, nbytes, problems, bugs = self._recrows.batches(conn.id, msg.correlation_id, msg.api_key,
                                                                         kind, ts, tname, topic_id, partition, data,
                                                                         where)
                for bug in bugs:         # a batch whose rows raised: left out, said where it was
                    self._anomaly_at(conn.id, ts, "dissector_error", kind, bug, None)
            except Exception as exc:  # noqa: BLE001  (a bug decoding this field's records costs them alone)
                self._rollback(mark)
                rows, nbytes = 0, 0
                problems = []
                self._anomaly_at(conn.id, ts, "dissector_error", kind,
                                 f"{where}: decoding its records raised {raised(exc)}; they are left out of the "
                                 "records table", topic_id if track else None)
            tally.records += rows
            tally.record_bytes += nbytes
            if track and rows:
                self._unresolved.records(first, rows, topic_id)  # type: ignore[union-attr]
            for problem in problems:
                # Values computed from the wire that leave the dataset's types have their own kind.
                pkind = "out_of_range" if problem.startswith(_OUT_OF_RANGE) else "records_decode"
                self._anomaly_at(conn.id, ts, pkind, kind, f"{where}: {problem}", topic_id if track else None)

    # -- anomalies ---------------------------------------------------------------------------

    def note(self, conn: ConnectionLike, a: Anomaly) -> quirks.Quirk | None:
        """What an anomaly teaches about its connection's broker (the quirk it names), row or not."""
        quirk = a.extra.get("quirk") if a.extra else None
        if quirk is not None and a.direction == Direction.TO_CLIENT:
            self._quirky_brokers[conn.id] = quirk.of
        return quirk

    def anomaly(self, conn: ConnectionLike | None, a: Anomaly) -> None:
        quirk = self.note(conn, a) if conn is not None else a.extra.get("quirk") if a.extra else None
        self._anomaly_at(conn.id if conn is not None else None, us(a.ts) if a.ts else None, a.kind,
                         _DIRECTION.get(a.direction) if a.direction is not None else None, a.detail, None, quirk)

    def _anomaly_at(self, cid: str | None, ts: int | None, kind: str, direction: str | None, detail: str,
                    unresolved_topic: str | None, quirk: quirks.Quirk | None = None) -> None:
        if unresolved_topic is not None:
            self._unresolved.anomaly(self._where_next("anomalies"), unresolved_topic)  # type: ignore[union-attr]
        capture, connection, a_ts, a_kind, a_direction, a_detail, a_quirk_of, a_quirk = self._an
        capture.append(self.capture)
        connection.append(cid)
        a_ts.append(ts)
        a_kind.append(kind)
        a_direction.append(direction)
        a_detail.append(detail)
        a_quirk_of.append(quirk.of if quirk is not None else None)
        a_quirk.append(quirk.reason if quirk is not None else None)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


MOCK_CLUSTER = "librdkafka mock cluster"
_CONTROL = 0x20   # the control bit of a v2 batch's attributes


def _all_control(data: bytes | None, failures: list[int]) -> bool:
    """Whether every entry that failed its CRC check is a control batch (its attributes at byte 21)."""
    if not data:
        return False
    for at in failures:
        attributes = data[at + 21:at + 23]
        if len(attributes) < 2 or data[at + 16] != 2 or not attributes[1] & _CONTROL:
            return False
    return True


def _plan_key(api_key: int, kind: str, version: int) -> int:
    """An int for (api key, kind, version), both int16: hashed faster than the tuple, per message."""
    return (api_key * 65536 + version) * 2 + (kind == "response")


def _plan(api_key: int, kind: str, version: int) -> tuple[Plan, ...]:
    """The topic paths of a message (:func:`dissector.views.topic_paths`), unpacked, each with the offset fields
    (:data:`dissector.views._OFFSET_FIELDS`, in order) its partition entries have at this version: a decoded
    entry holds no field its schema lacks, so the others need no lookup."""
    msg = schema.message(api_key, kind, version)
    out = []
    for tp in topic_paths(api_key, kind, version):
        fields = msg.fields if msg is not None else None
        for name in (*tp.path, tp.partitions_field):
            f = next((f for f in fields or () if f.name == name), None) if name else None
            fields = f.children if f is not None else None
        names = {f.name for f in fields} if fields is not None else None
        out.append((tp.path, tp.name_field, tp.id_field, tp.partitions_field, tp.index_field, tp.list_field,
                    tuple(k for k in _OFFSET_FIELDS if names is None or k in names)))
    return tuple(out)


def _arrays(node: Any, path: tuple[str, ...]) -> Iterator[dict]:
    """Elements of the array at ``path``, flattening any outer arrays on the way."""
    items = node.get(path[0]) if isinstance(node, dict) else None
    if not isinstance(items, list):
        return
    if len(path) == 1:
        for item in items:
            if isinstance(item, dict):
                yield item
    else:
        rest = path[1:]
        for item in items:
            yield from _arrays(item, rest)


# -- one row at a time, for the Python API --------------------------------------------------------

def exchange_row(capture: str, conn: ConnectionLike, ex: Exchange) -> Row:
    """One exchange as a row of the ``exchanges`` table (a dict; JSON bodies as str)."""
    cols = {t: new_buffers(t) for t in ("exchanges", "partitions", "anomalies")}
    RowBuilder(capture, RowOptions(), None, cols, {}).exchange(conn, ex, Tally())
    row = {name: col[0] for name, col in zip(COLUMNS["exchanges"], cols["exchanges"])}
    for k in ("request", "response"):
        if row[k] is not None:
            row[k] = row[k].decode()
    return row


def message_partitions(msg: Request | Response, kind: str,
                       topics: TopicRegistry | None) -> Iterator[PartitionRow]:
    if isinstance(msg, (V07Request, V07Response)):
        return v07_partition_rows(msg)
    if msg.api_key is None or msg.api_version is None:
        return iter(())
    return partition_rows(msg.api_key, kind, msg.api_version, msg.body, topics)


__all__ = ["ConnectionLike", "Row", "RowBuilder", "RowOptions",
           "Tally", "Unresolved", "exchange_row", "message_partitions", "us"]
