"""Flat views of decoded bodies: one row per topic-partition entry.

Which arrays hold topics and partitions is read from the schema, not from a
hand-kept list, so a new api or version that follows Kafka's naming shows up
by itself: a ``[]struct`` with a topic name (or topic id) whose elements hold a
``[]struct`` with a partition index, or a ``[]int32`` of partition indexes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

from dissector import schema
from dissector.schema import Field
from dissector.topics import TopicRegistry

_TOPIC_NAMES = frozenset({"name", "topic", "topic_name"})
_PARTITION_INDEX = ("partition_index", "partition", "index", "partition_id")
_PARTITION_LISTS = frozenset({"partitions", "partition_indexes", "partition_ids"})
# The offset a partition entry is about, by field name, most specific first.
_OFFSET_FIELDS = ("base_offset", "fetch_offset", "committed_offset", "offset", "end_offset", "start_offset")


@dataclass(frozen=True)
class TopicPath:
    path: tuple[str, ...]          # list fields from the body root down to the topic array
    name_field: str | None
    id_field: str | None
    partitions_field: str | None   # []struct of partition entries
    index_field: str | None        # partition index inside those entries
    list_field: str | None         # or a plain []int32 of partition indexes


@dataclass
class PartitionRow:
    topic: str | None
    topic_id: str | None
    partition: int | None
    error_code: int | None
    offset: int | None             # produce base offset, fetch/commit offset, listed offset ...
    high_watermark: int | None
    record_count: int | None
    batch_count: int | None
    bytes: int | None
    first_offset: int | None       # first offset carried in record data
    last_offset: int | None
    compression: str | None
    records: Any = None            # the records summary, for callers that want more


def _find(fields: tuple[Field, ...], path: tuple[str, ...], out: list[TopicPath]) -> None:
    for f in fields:
        if f.type != "[]struct" or not f.children:
            continue
        children = f.children
        name_field = next((c.name for c in children if c.type == "string"
                           and (c.entity_type == "topicName" or c.name in _TOPIC_NAMES)), None)
        id_field = next((c.name for c in children if c.type == "uuid" and c.name == "topic_id"), None)
        if name_field or id_field:
            for c in children:
                if c.type == "[]struct" and c.children:
                    index = next((n for n in _PARTITION_INDEX
                                  if any(g.name == n and g.type == "int32" for g in c.children)), None)
                    if index:
                        out.append(TopicPath(path + (f.name,), name_field, id_field, c.name, index, None))
                elif c.type == "[]int32" and c.name in _PARTITION_LISTS:
                    out.append(TopicPath(path + (f.name,), name_field, id_field, None, None, c.name))
        _find(children, path + (f.name,), out)


@lru_cache(maxsize=None)
def topic_paths(api_key: int, kind: str, version: int) -> tuple[TopicPath, ...]:
    msg = schema.message(api_key, kind, version)
    if msg is None:
        return ()
    out: list[TopicPath] = []
    _find(msg.fields, (), out)
    return tuple(out)


def _arrays(node: Any, path: tuple[str, ...]) -> Iterator[dict]:
    """Elements of the array at ``path``, flattening any outer arrays on the way."""
    if not path:
        return
    items = node.get(path[0]) if isinstance(node, dict) else None
    if not isinstance(items, list):
        return
    if len(path) == 1:
        for item in items:
            if isinstance(item, dict):
                yield item
    else:
        for item in items:
            yield from _arrays(item, path[1:])


def _summary_fields(rec: Any) -> tuple:
    if rec is None:
        return None, None, None, None, None, None
    return (rec.record_count, rec.batch_count, rec.total_bytes, rec.first_offset, rec.last_offset, rec.codec)


def partition_rows(api_key: int, kind: str, version: int, body: dict[str, Any] | None,
                   topics: TopicRegistry | None = None) -> Iterator[PartitionRow]:
    """One row per topic-partition entry in a decoded body (none without a version: Kafka 0.7 bodies
    are not described by the schema; :mod:`dissector.v07.views` reads them)."""
    if not body or version is None:
        return
    for tp in topic_paths(api_key, kind, version):
        for topic in _arrays(body, tp.path):
            name = topic.get(tp.name_field) if tp.name_field else None
            topic_id = topic.get(tp.id_field) if tp.id_field else None
            if name is None and topics is not None:
                name = topics.name(topic_id)
            if tp.list_field:
                for index in topic.get(tp.list_field) or ():
                    yield PartitionRow(name, topic_id, index, None, None, None, None, None, None, None, None, None)
                continue
            for p in topic.get(tp.partitions_field) or ():  # type: ignore[arg-type]
                if not isinstance(p, dict):
                    continue
                rec = p.get("records")
                if rec is not None and not hasattr(rec, "record_count"):
                    rec = None  # records kept raw by a caller's hook: no summary to report
                offset = next((p[k] for k in _OFFSET_FIELDS if k in p), None)
                count, batches, size, first, last, codec = _summary_fields(rec)
                yield PartitionRow(name, topic_id, p.get(tp.index_field), p.get("error_code"), offset,
                                   p.get("high_watermark"), count, batches, size, first, last, codec, rec)


def _topic_fields(fields: tuple[Field, ...], path: tuple[str, ...], out: list[tuple[tuple[str, ...], str]]) -> None:
    for f in fields:
        here = path + (f.name,)
        if f.entity_type == "topicName" and f.type in ("string", "[]string"):
            out.append((here, f.type))
        elif f.name == "topic_id" and f.type == "uuid":
            out.append((here, "uuid"))
        if f.children:
            _topic_fields(f.children, here, out)


@lru_cache(maxsize=None)
def topic_fields(api_key: int, kind: str, version: int) -> tuple[tuple[tuple[str, ...], str], ...]:
    """Paths of every field the schema marks as a topic name (and every topic id)."""
    msg = schema.message(api_key, kind, version)
    out: list[tuple[tuple[str, ...], str]] = []
    if msg is not None:
        _topic_fields(msg.fields, (), out)
    return tuple(out)


def _values(node: Any, path: tuple[str, ...]) -> Iterator[Any]:
    if isinstance(node, list):
        for item in node:
            yield from _values(item, path)
    elif isinstance(node, dict) and path:
        if len(path) == 1:
            if path[0] in node:
                yield node[path[0]]
        else:
            yield from _values(node.get(path[0]), path[1:])


def topic_names(api_key: int, kind: str, version: int, body: dict[str, Any] | None,
                topics: TopicRegistry | None = None) -> set[str]:
    """Every topic a body mentions, by name, or by id when no name is known."""
    found: set[str] = set()
    if not body or version is None:
        return found
    for path, ftype in topic_fields(api_key, kind, version):
        for value in _values(body, path):
            if ftype == "[]string":
                found.update(v for v in value or () if isinstance(v, str))
            elif ftype == "uuid":
                name = topics.name(value) if topics is not None else None
                if name is None and value and value != "AAAAAAAAAAAAAAAAAAAAAA":
                    found.add(value)
                elif name:
                    found.add(name)
            elif isinstance(value, str):
                found.add(value)
    return found
