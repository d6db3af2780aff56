"""The records table's rows: one per record of each records field a message carries (``--records``).

:class:`kdissect.dataset.rows.RowBuilder` finds the fields, and reports their anomalies; here each
field's batches (or 0.7 message set) are decoded and their records appended to the table's columns,
the payload columns (keys and values decoded, :mod:`kdissect.dataset.payload_columns`) after them.
"""

from __future__ import annotations

from typing import Any

from dissector.records import OUT_OF_RANGE, RecordBatch, decode_records
from dissector.v07.messages import MessageSetSummary, decode_message_set

from kdissect.dataset.failures import raised

RECORD_COLUMNS = 21               # the records table's columns before the payload ones
# The latest millisecond timestamp whose microseconds fit timestamp[us] (int64).
# Problems starting so are values computed from the wire beyond the dataset's types (anomaly kind
# ``out_of_range``); dissector.records words them so too (OUT_OF_RANGE).
_MAX_TIMESTAMP_MS = ((1 << 63) - 1) // 1000


class RecordRows:
    """Appends records to the records table's columns (``table``: all of them, the payload columns last)."""

    def __init__(self, capture: str, options: Any, table: list) -> None:
        self.capture = capture
        self.options = options        # kdissect.dataset.rows.RowOptions
        self.table = table
        # The buffers themselves, appended to as ``col.append(x)`` (as RowBuilder's).
        self.columns = tuple(table[:RECORD_COLUMNS])
        from kdissect.dataset.payload_columns import PayloadColumns, payload_decoder   # here: loads payloads
        self.payloads = PayloadColumns(options.payloads if options.payloads is not None else payload_decoder(),
                                       table[RECORD_COLUMNS:])

    def batches(self, cid: str, corr: int, api_key: int | None, kind: str, ts: int, tname: str | None,
                topic_id: str | None, partition: int | None, data: bytes,
                where: str = "") -> tuple[int, int, list[str], list[str]]:
        """Rows of the records table for one records field: (rows, key+value bytes kept, problems, the
        anomaly details of batches whose rows raised: a bug, which costs that batch alone)."""
        options = self.options
        rs = decode_records(data, max_decompressed=options.max_decompressed, strict=False)
        problems = [rs.error] if rs.error else []
        keep = options.record_bytes
        (capture, connection, a_corr, a_key, direction, a_ts, a_topic, a_topic_id, a_partition, a_offset,
         a_timestamp, a_magic, a_key_size, a_value_size, a_key_bytes, a_value_bytes, a_header_count,
         a_producer_id, a_producer_epoch, a_transactional, a_control) = self.columns
        cap = self.capture
        pay = self.payloads
        bugs: list[str] = []
        n = nbytes = 0
        late = 0                # record timestamps past what timestamp[us] holds
        for batch in rs.batches:
            if batch.error:
                problems.append(batch.error)
            mark = len(capture)
            batch_n = n
            batch_bytes = nbytes
            try:
                v2 = isinstance(batch, RecordBatch)
                if v2:
                    magic, pid, epoch, txn, control = (batch.magic, batch.producer_id, batch.producer_epoch,
                                                       batch.transactional, batch.control)
                else:
                    magic, pid, epoch, txn, control = batch.magic, None, None, False, False
                if batch.out_of_range:
                    problems.append(batch.out_of_range)
                for rec in batch.leaves():
                    t = rec.timestamp
                    key, value = rec.key, rec.value
                    capture.append(cap)
                    connection.append(cid)
                    a_corr.append(corr)
                    a_key.append(api_key)
                    direction.append(kind)
                    a_ts.append(ts)
                    a_topic.append(tname)
                    a_topic_id.append(topic_id)
                    a_partition.append(partition)
                    a_offset.append(rec.offset)
                    if t is None or t < 0:
                        a_timestamp.append(None)
                    elif t > _MAX_TIMESTAMP_MS:
                        a_timestamp.append(None)
                        late += 1
                    else:
                        a_timestamp.append(t * 1000)
                    if v2:
                        a_magic.append(magic)
                        a_header_count.append(len(rec.headers))
                    else:
                        a_magic.append(rec.magic)
                        a_header_count.append(0)
                    a_key_size.append(None if key is None else len(key))
                    a_value_size.append(None if value is None else len(value))
                    if keep:
                        a_key_bytes.append(key)
                        a_value_bytes.append(value)
                        nbytes += (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
                    else:
                        a_key_bytes.append(None)
                        a_value_bytes.append(None)
                    a_producer_id.append(pid)
                    a_producer_epoch.append(epoch)
                    a_transactional.append(txn)
                    a_control.append(control)
                    if pay is not None:
                        nbytes += pay.record(key, value, rec.headers if v2 else (), tname, rec.offset)
                        if pay.failed and not keep:
                            nbytes += _keep_failed(pay.failed, key, value, a_key_bytes, a_value_bytes)
                    n += 1
            except Exception as exc:  # noqa: BLE001  (a bug in one batch's rows costs that batch alone)
                for col in self.table:     # the payload columns too
                    if type(col) is list:
                        del col[mark:]
                    else:
                        col.truncate(mark)
                n, nbytes = batch_n, batch_bytes
                bugs.append(f"{where}: building the rows of the {_batch_name(batch)} raised {raised(exc)}; "
                            "its records are left out of the records table")
        if pay is not None:
            problems += pay.problems()
        if late:
            problems.append(f"{OUT_OF_RANGE}: {late} record timestamp{'s' if late != 1 else ''} past the year "
                            "294,000, beyond what a timestamp column holds: null")
        return n, nbytes, problems, bugs

    def v07(self, cid: str, corr: int, api_key: int | None, kind: str, ts: int, tname: str | None,
            topic_id: str | None, partition: int | None,
            s: MessageSetSummary) -> tuple[int, int, list[str], list[str]]:
        """0.7 messages: offsets are byte positions from the fetch offset; no keys, timestamps or headers."""
        options = self.options
        ms = decode_message_set(s.data or b"", s.base_offset, max_decompressed=options.max_decompressed)
        problems = [ms.error] if ms.error else []
        keep = options.record_bytes
        (capture, connection, a_corr, a_key, direction, a_ts, a_topic, a_topic_id, a_partition, a_offset,
         a_timestamp, a_magic, a_key_size, a_value_size, a_key_bytes, a_value_bytes, a_header_count,
         a_producer_id, a_producer_epoch, a_transactional, a_control) = self.columns
        n = nbytes = 0
        for top in ms.messages:
            stack = [top]
            while stack:                      # wrappers' errors anywhere in the nesting
                m = stack.pop()
                if m.error:
                    problems.append(f"message at byte {m.position}: {m.error}")
                stack.extend(m.inner or ())
            for m in top.leaves():
                capture.append(self.capture)
                connection.append(cid)
                a_corr.append(corr)
                a_key.append(api_key)
                direction.append(kind)
                a_ts.append(ts)
                a_topic.append(tname)
                a_topic_id.append(topic_id)
                a_partition.append(partition)
                a_offset.append(m.offset)
                a_timestamp.append(None)
                a_magic.append(m.magic)
                a_key_size.append(None)
                a_value_size.append(len(m.payload))
                a_key_bytes.append(None)
                a_value_bytes.append(m.payload if keep else None)
                if keep:
                    nbytes += len(m.payload)
                a_header_count.append(0)
                a_producer_id.append(None)
                a_producer_epoch.append(None)
                a_transactional.append(False)
                a_control.append(False)
                if self.payloads is not None:
                    nbytes += self.payloads.record(None, m.payload, (), tname, m.offset)
                    if self.payloads.failed and not keep:
                        nbytes += _keep_failed(self.payloads.failed, None, m.payload, a_key_bytes, a_value_bytes)
                n += 1
        if self.payloads is not None:
            problems += self.payloads.problems()
        return n, nbytes, problems, []


def _keep_failed(failed: int, key: bytes | None, value: bytes | None, key_bytes: list, value_bytes: list) -> int:
    """Keep the raw bytes of a key or value that did not decode (``failed``: 1 key, 2 value), without
    ``--record-bytes`` too: what a hostile or damaged value was stays in the dataset beside its anomaly."""
    n = 0
    if failed & 1 and key is not None:
        key_bytes[-1] = key
        n += len(key)
    if failed & 2 and value is not None:
        value_bytes[-1] = value
        n += len(value)
    return n


def _batch_name(batch: Any) -> str:
    return f"batch at byte {getattr(batch, 'position', '?')}"
