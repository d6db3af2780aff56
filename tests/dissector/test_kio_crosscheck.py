"""Cross-check our schema, decoders and encoder against kio, an independent codec.

For every (api, version, kind) both sides know: a random body (our strategies)
becomes a kio entity; kio serialises it; our decoder must read kio's bytes
back to the same values, our encoder must write the very same bytes, and
kio's (native) reader must read our bytes back. kio's Python writer and Rust
reader are generated from Kafka's specs by another project, so agreement here
is evidence about our schema and code, not just self-consistency.

kio quirks handled here (not bugs on either side):
* kio drops the ``_ms`` suffix of duration/timestamp fields and models them as
  ``timedelta``/``datetime``; a nullable int64 timestamp's -1 is kio's None.
* kio renames ``id`` to ``id_`` (Python keyword-ish), and is built from Kafka
  4.0's specs, so a few fields carry their older names (``generation_id``).
* kio's ``datetime`` fields only hold whole seconds >= 0, its error codes only
  known codes, its i64 durations only what ``timedelta`` can hold: random
  values are folded into those ranges before building the entity.
* kio writes a null uuid as the zero uuid, and types some tagged uuids as
  ``UUID | None`` defaulting to None (Kafka: the zero uuid): a tagged field at
  its default is mapped to kio's default, whatever kio calls it.
* An absent non-nullable tagged struct decodes as None here; kio (like Kafka's
  Java) fills in a struct of defaults.
* kio has no unknown tagged fields, so bodies are built without them.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from base64 import urlsafe_b64encode
from collections import Counter
from functools import cache
from pkgutil import resolve_name
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

kio = pytest.importorskip("kio")

from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.constants import EntityType

from dissector import schema
from dissector.decoders import Decoders
from dissector.encoder import encode_body, uuid_bytes
from dissector.schema import Field

try:
    from tests.dissector.strategies import all_messages, body_strategy
except ImportError:  # run from inside tests/dissector
    from strategies import all_messages, body_strategy  # type: ignore[no-redef]

# Same field, name changed between Kafka 4.0 (kio) and 4.4 (ours).
RENAMED = {
    ("generation_id", "generation_id_or_member_epoch"),
    ("acceptable_recovery_lag", "acceptable_recovery_lag_legacy"),
}
# (api, kind, version) -> reason, for mismatches that are known bugs of ours (strict xfail).
KNOWN_BUGS: dict[tuple[int, str, int], str] = {}
_ERROR_CODES = sorted(ErrorCode, key=int)
_MS = datetime.timedelta(milliseconds=1)
_MAX_SECONDS = 253_402_214_400  # 9999-12-31, the last day datetime holds
_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

DECODERS = Decoders(records_hook=lambda b: b)


@cache
def kio_messages() -> dict[tuple[int, str, int], type]:
    """(api key, kind, version) -> kio entity class, for every request/response kio has."""
    out = {}
    for versions in schema_name_map.values():
        for version, by_type in versions.items():
            for etype, path in by_type.items():
                if etype in (EntityType.request, EntityType.response):
                    cls = resolve_name(path)
                    out[(int(cls.__api_key__), etype.name, int(version))] = cls
    return out


def compared() -> list[tuple[int, str, int]]:
    ours = set(all_messages())
    return sorted(k for k in kio_messages() if k in ours)


def _same_name(kio_name: str, ours: str) -> bool:
    return (kio_name in (ours, ours + "_") or kio_name + "_ms" == ours or (kio_name, ours) in RENAMED)


def _pairs(cls: type, fields: tuple[Field, ...]) -> list[tuple[dataclasses.Field, Field]]:
    kf = dataclasses.fields(cls)
    assert len(kf) == len(fields), (
        cls.__qualname__, [f.name for f in kf], [f.name for f in fields])
    for k, o in zip(kf, fields):
        assert _same_name(k.name, o.name), (cls.__qualname__, k.name, o.name)
    return list(zip(kf, fields))


# -- our body -> kio entity ------------------------------------------------------

def _to_kio_scalar(ktype: str, value: Any) -> Any:
    if ktype == "error_code":
        return _ERROR_CODES[value % len(_ERROR_CODES)]
    if ktype == "timedelta_i32":
        return datetime.timedelta(milliseconds=value)
    if ktype == "timedelta_i64":
        return datetime.timedelta(milliseconds=value % 2**41 - 2**40)
    if ktype == "datetime_i64":
        return datetime.datetime.fromtimestamp(abs(value) % _MAX_SECONDS, tz=datetime.UTC)
    if ktype == "uuid":
        return uuid.UUID(bytes=uuid_bytes(value))
    return value


def to_kio(cls: type, fields: tuple[Field, ...], body: dict) -> Any:
    kwargs = {}
    for kf, of in _pairs(cls, fields):
        value = body[of.name]
        shape = classify_field(kf)
        if of.tag is not None and value == of.default:
            kwargs[kf.name] = _tagged_default(kf)  # "absent" in our terms, whatever kio calls it
        elif value is None:
            kwargs[kf.name] = None
        elif isinstance(shape, EntityField):
            kwargs[kf.name] = to_kio(shape.type_, of.children or (), value)
        elif isinstance(shape, EntityTupleField):
            kwargs[kf.name] = tuple(to_kio(shape.type_, of.children or (), v) for v in value)
        elif isinstance(shape, PrimitiveTupleField):
            kwargs[kf.name] = tuple(_to_kio_scalar(kf.metadata["kafka_type"], v) for v in value)
        else:
            kwargs[kf.name] = _to_kio_scalar(kf.metadata["kafka_type"], value)
    return cls(**kwargs)


# -- kio entity -> our body conventions ------------------------------------------

def _from_kio_scalar(ktype: str, value: Any) -> Any:
    if value is None:
        if ktype == "uuid":
            return _ZERO_UUID
        if ktype == "datetime_i64":
            return -1
        return None
    if ktype == "error_code":
        return int(value)
    if ktype in ("timedelta_i32", "timedelta_i64"):
        return value // _MS
    if ktype == "datetime_i64":
        return round(value.timestamp() * 1000)
    if ktype == "uuid":
        return urlsafe_b64encode(value.bytes)[:22].decode("ascii")
    if ktype in ("bytes", "records"):
        return bytes(value)
    if ktype == "bool":
        return bool(value)
    if ktype == "float64":
        return float(value)
    if ktype == "string":
        return str(value)
    return int(value)


def _tagged_default(kf: dataclasses.Field) -> Any:
    if kf.default is not dataclasses.MISSING:
        return kf.default
    return None if is_optional(kf) else get_tagged_field_default(kf)


def from_kio(entity: Any, fields: tuple[Field, ...]) -> dict:
    out = {}
    for kf, of in _pairs(type(entity), fields):
        value = getattr(entity, kf.name)
        shape = classify_field(kf)
        if of.tag is not None and value == _tagged_default(kf):
            # kio leaves it off the wire, so we read our default (None for a struct).
            out[of.name] = [] if of.default == [] else of.default
        elif isinstance(shape, EntityField):
            out[of.name] = None if value is None else from_kio(value, of.children or ())
        elif isinstance(shape, EntityTupleField):
            out[of.name] = None if value is None else [from_kio(v, of.children or ()) for v in value]
        elif isinstance(shape, PrimitiveTupleField):
            ktype = kf.metadata["kafka_type"]
            out[of.name] = None if value is None else [_from_kio_scalar(ktype, v) for v in value]
        else:
            out[of.name] = _from_kio_scalar(kf.metadata["kafka_type"], value)
    return out


def _strip_unknown_tags(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_unknown_tags(v) for k, v in value.items() if k != "_unknown_tags"}
    if isinstance(value, list):
        return [_strip_unknown_tags(v) for v in value]
    return value


def kio_bytes(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


# -- the tests -------------------------------------------------------------------

def test_kio_messages_are_all_in_our_schema():
    """Everything kio (Kafka 4.0) knows, we know."""
    ours = set(all_messages())
    missing = sorted(k for k in kio_messages() if k not in ours)
    assert missing == [], f"kio has messages our schema lacks: {missing}"


def test_coverage_counts():
    keys = compared()
    assert len(keys) >= 600, len(keys)
    assert len({k for k, _, _ in keys}) >= 85


@pytest.mark.parametrize("key,kind,version", [
    pytest.param(*k, id="-".join(map(str, k)),
                 marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[k])] if k in KNOWN_BUGS else [])
    for k in compared()
])
def test_crosscheck(key: int, kind: str, version: int):
    cls = kio_messages()[(key, kind, version)]
    msg = schema.message(key, kind, version)
    assert msg is not None

    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(body_strategy(key, kind, version))
    def check(raw: dict) -> None:
        entity = to_kio(cls, msg.fields, _strip_unknown_tags(raw))
        expected = from_kio(entity, msg.fields)
        data = kio_bytes(entity)
        # kio's bytes, our decoder.
        d = DECODERS.decode(key, kind, version, data, 0)
        assert d is not None and d.failure is None, (d.failure if d else None, data.hex())
        assert d.end == len(data), (d.end, len(data), data.hex())
        assert d.body == expected, (data.hex(), d.body, expected)
        # Our encoder, byte for byte the same as kio's writer.
        ours = encode_body(key, kind, version, expected)
        assert ours == data, (ours.hex(), data.hex())
        # Our bytes, kio's (native) reader.
        back, end = entity_reader(cls)(ours, 0)
        assert end == len(ours)
        assert from_kio(back, msg.fields) == expected

    check()


def coverage_table() -> str:
    """Per api: how many (version, kind) were compared, and which of ours kio lacks."""
    done = Counter(k for k, _, _ in compared())
    ours = set(all_messages())
    lacking: dict[int, list[int]] = {}
    for k, kind, v in sorted(ours - set(kio_messages())):
        if kind == "request":
            lacking.setdefault(k, []).append(v)
    lines = [f"{len(compared())} (api, version, kind) compared with kio over {len(done)} api keys"]
    for key in schema.api_keys():
        lack = lacking.get(key)
        lines.append(f"{key:>3} {schema.api_name(key):<38} {done.get(key, 0):>3}"
                     + (f"  kio lacks v{lack}" if lack else ""))
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tests.dissector.test_kio_crosscheck
    print(coverage_table())
