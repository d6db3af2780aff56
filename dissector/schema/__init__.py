"""The Kafka protocol schema: api names, versions, fields and error codes.

Facts come from the generated table in :mod:`dissector.schema._generated`;
this module answers questions about it ("which fields does Fetch v13
response have?") without knowing anything about bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from dissector.schema._generated import APIS, DATA, ERRORS

OPEN = 0x7FFF


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message as it exists in one particular version."""

    name: str
    type: str                 # int8..int64, uint16, uint32, float64, bool, string, bytes, uuid, records,
    #                           []<primitive>, struct, []struct
    nullable: bool
    tag: int | None           # set for tagged fields
    default: object
    entity_type: str | None
    flexible: bool            # compact encoding for this field (headers may override the message's)
    children: tuple["Field", ...] | None


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def _variant(variants: list, version: int):
    for var in variants:
        if var[0] <= version <= var[1]:
            return var
    return None


def _fields_at(raw: tuple, version: int, flexible: bool) -> tuple[Field, ...]:
    out = []
    for name, ftype, versions, nullable, tagged, tag, default, entity, flex_override, children in raw:
        is_tagged = tag is not None and flexible and _in(tagged, version)
        if not (_in(versions, version) or is_tagged):
            continue
        field_flexible = flexible if flex_override is False else _in(flex_override, version)
        out.append(Field(
            name=name,
            type=ftype,
            nullable=_in(nullable, version),
            tag=tag if is_tagged else None,
            default=default,
            entity_type=entity,
            flexible=field_flexible,
            children=_fields_at(children, version, flexible) if children is not None else None,
        ))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class MessageSchema:
    api_key: int | None
    name: str
    kind: str                 # "request", "response" or "data"
    version: int
    flexible: bool
    spec_release: str         # which Kafka spec folder defined this version
    fields: tuple[Field, ...]


def api_name(api_key: int) -> str:
    api = APIS.get(api_key)
    return api["name"] if api else f"Unknown({api_key})"


def error_name(code: int) -> str:
    name = ERRORS.get(code)
    return name if name is not None else f"UNKNOWN_ERROR_CODE({code})"


def is_known_error(code: int) -> bool:
    return code in ERRORS


def api_keys() -> list[int]:
    return list(APIS)


def version_range(api_key: int) -> tuple[int, int] | None:
    api = APIS.get(api_key)
    if not api:
        return None
    variants = api["request"]
    return (variants[0][0], variants[-1][1])


def has_version(api_key: int, version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and _variant(api["request"], version) is not None


def flexible_from(api_key: int) -> int | None:
    api = APIS.get(api_key)
    if not api:
        return None
    flex = [v[3] for v in api["request"] if v[3] is not None]
    return min(flex) if flex else None


def is_flexible(api_key: int, version: int) -> bool:
    api = APIS.get(api_key)
    if not api:
        return False
    var = _variant(api["request"], version)
    if var is None:
        var = api["request"][-1]  # a version newer than the schema: assume it is like the newest
    return var[3] is not None and version >= var[3]


def request_header_version(api_key: int, version: int) -> int:
    # ControlledShutdown v0 predates the client id in the request header.
    if api_key == 7 and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    # ApiVersions responses keep header v0 at every version so that a client can
    # read the reply of a broker that does not support the version it asked for.
    if api_key == 18:
        return 0
    return 1 if is_flexible(api_key, version) else 0


@lru_cache(maxsize=None)
def message(api_key: int, kind: str, version: int) -> MessageSchema | None:
    """The fields of one api's request or response at one version, or None if unknown."""
    api = APIS.get(api_key)
    if api is None:
        return None
    var = _variant(api[kind], version)
    if var is None:
        return None
    flexible = var[3] is not None and version >= var[3]
    return MessageSchema(api_key, api["name"], kind, version, flexible, var[2], _fields_at(var[4], version, flexible))


@lru_cache(maxsize=None)
def data_message(name: str, version: int) -> MessageSchema | None:
    """Embedded structures (consumer protocol, headers) at one version."""
    variants = DATA.get(name)
    if variants is None:
        return None
    var = _variant(variants, version)
    if var is None:
        return None
    flexible = var[3] is not None and version >= var[3]
    return MessageSchema(None, name, "data", version, flexible, var[2], _fields_at(var[4], version, flexible))


def data_versions(name: str) -> tuple[int, int] | None:
    variants = DATA.get(name)
    if not variants:
        return None
    return (variants[0][0], variants[-1][1])


@dataclass(frozen=True, slots=True)
class Coverage:
    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    listeners: tuple[str, ...]
    spec_releases: tuple[str, ...]


def coverage() -> list[Coverage]:
    """One row per api key: what the schema decodes."""
    rows = []
    for key, api in APIS.items():
        variants = api["request"]
        rows.append(Coverage(
            api_key=key,
            name=api["name"],
            min_version=variants[0][0],
            max_version=variants[-1][1],
            flexible_from=flexible_from(key),
            listeners=api.get("listeners", ()),
            spec_releases=tuple(sorted({v[2] for v in variants})),
        ))
    return rows


def format_coverage() -> str:
    rows = coverage()
    lines = [f"{'key':>3}  {'api':<38} {'versions':<9} {'flexible':<9} spec"]
    for r in rows:
        flex = f"v{r.flexible_from}+" if r.flexible_from is not None else "-"
        lines.append(f"{r.api_key:>3}  {r.name:<38} {f'{r.min_version}-{r.max_version}':<9} {flex:<9} {'+'.join(r.spec_releases)}")
    total = sum(r.max_version - r.min_version + 1 for r in rows)
    lines.append(f"{len(rows)} api keys, {total} versions")
    return "\n".join(lines)


__all__ = [
    "Coverage", "Field", "MessageSchema", "api_keys", "api_name", "coverage", "data_message", "data_versions",
    "error_name", "flexible_from", "format_coverage", "has_version", "is_flexible", "is_known_error", "message",
    "request_header_version", "response_header_version", "version_range",
]
