"""Flat views of 0.7 bodies: one :class:`~dissector.views.PartitionRow` per topic-partition entry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dissector.v07.events import V07Request, V07Response
from dissector.v07.wire import FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS, PRODUCE
from dissector.views import PartitionRow


def _row(topic: str | None, partition: int | None, error: int | None, offset: int | None,
         messages: Any = None) -> PartitionRow:
    if messages is None:
        return PartitionRow(topic, None, partition, error, offset, None, None, None, None, None, None, None)
    return PartitionRow(topic, None, partition, error, offset, None, messages.record_count, messages.batch_count,
                        messages.total_bytes, messages.first_offset, messages.last_offset, messages.codec, messages)


def partition_rows(msg: V07Request | V07Response) -> Iterator[PartitionRow]:
    body = msg.body
    if not body:
        return
    if isinstance(msg, V07Request):
        kind = msg.request_type
        entries = body.get("fetches") if kind == MULTIFETCH else body.get("produces") if kind == MULTIPRODUCE \
            else [body]
        for e in entries or ():
            if "topic" not in e:
                continue
            yield _row(e["topic"], e.get("partition"), None, e.get("offset"), e.get("messages"))
        return
    kind = msg.request_type
    target = msg.targets[0] if msg.targets else None
    topic = target.topic if target else None
    partition = target.partition if target else None
    if kind == FETCH:
        yield _row(topic, partition, body.get("error_code"), target.offset if target else None, body.get("messages"))
    elif kind == OFFSETS:
        offsets = body.get("offsets") or []
        yield _row(topic, partition, body.get("error_code"), offsets[0] if offsets else None)
    elif kind == MULTIFETCH:
        for i, e in enumerate(body.get("fetches") or ()):
            t = msg.targets[i] if i < len(msg.targets) else None
            yield _row(e.get("topic"), e.get("partition"), e.get("error_code"), t.offset if t else None,
                       e.get("messages"))
    elif kind == PRODUCE:  # no response exists; kept for completeness of the mapping
        return
