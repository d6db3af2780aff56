"""A schema as a Schema Registry serves it: its text, type, references and identity.

Read from the registry's own JSON (``GET /schemas/ids/{id}``, ``GET /subjects/{s}/versions/{v}``),
from plain schema files, or from the records a registry keeps in its ``_schemas`` topic. Whichever
way, a schema longer than :data:`payloads.limits.MAX_SCHEMA_BYTES`, or JSON not of the registry's
shape, is a SchemaError as it is read: anyone who can produce to ``_schemas`` writes schemas. The
other budgets of a schema (:func:`payloads.limits.check_schema_text`) are its compiler's to hold (a
schema past them is known, and not usable: the values naming it say why), and the schema files'
and the registry's to hold as they are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from payloads.errors import SchemaError
from payloads.limits import MAX_SCHEMA_REFERENCES, check_schema_size

FORMATS = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}
TYPES = {v: k for k, v in FORMATS.items()}
SCHEMAS_TOPIC = "_schemas"          # where a Schema Registry keeps its schemas (kafkastore.topic)


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema another one imports: by ``name`` in the importing text, stored as ``subject`` ``version``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Schema:
    format: str                                  # avro, protobuf or json
    text: str                                    # the schema as the registry holds it
    references: tuple[Reference, ...] = ()
    schema_id: int | None = None
    guid: str | None = None
    subject: str | None = None
    version: int | None = None

    def registry_json(self) -> dict[str, Any]:
        """The registry's JSON for this schema (with the identity fields that are known)."""
        out: dict[str, Any] = {}
        if self.subject is not None:
            out["subject"] = self.subject
        if self.version is not None:
            out["version"] = self.version
        if self.schema_id is not None:
            out["id"] = self.schema_id
        if self.guid is not None:
            out["guid"] = self.guid
        out["schemaType"] = TYPES[self.format]
        out["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in self.references]
        out["schema"] = self.text
        return out


def from_registry_json(obj: Any, schema_id: int | None = None, guid: str | None = None) -> Schema:
    """A schema from the registry's JSON; ``schema_id``/``guid`` when the JSON does not carry them.
    SchemaError for JSON of another shape, or schema text past :data:`~payloads.limits.MAX_SCHEMA_BYTES`."""
    if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str):
        raise SchemaError("not a Schema Registry schema (a JSON object with a \"schema\" string)")
    kind = obj.get("schemaType") or "AVRO"        # the registry leaves it out for Avro
    fmt = FORMATS.get(kind.upper()) if isinstance(kind, str) else None
    if fmt is None:
        raise SchemaError(f"schemaType {_short(kind)} is not AVRO, PROTOBUF or JSON")
    listed = obj.get("references")
    listed = [] if listed is None else listed
    if not isinstance(listed, list):
        raise SchemaError(f"references {_short(listed)}: not a list")
    if len(listed) > MAX_SCHEMA_REFERENCES:
        raise SchemaError(f"{len(listed)} references, past the limit of {MAX_SCHEMA_REFERENCES}")
    refs = []
    for r in listed:
        try:
            if not (isinstance(r["name"], str) and isinstance(r["subject"], str)) or isinstance(r["version"], bool):
                raise TypeError
            refs.append(Reference(r["name"], r["subject"], int(r["version"])))
        except (KeyError, TypeError, ValueError):
            raise SchemaError(f"reference {_short(r)}: needs name, subject and version") from None
    check_schema_size(obj["schema"])
    sid = obj.get("id", schema_id)
    version = obj.get("version")
    found = obj.get("guid")
    return Schema(fmt, obj["schema"], tuple(refs), _int(sid) if _int(sid) is not None else schema_id,
                  found if isinstance(found, str) and found else guid,
                  obj.get("subject") if isinstance(obj.get("subject"), str) else None,
                  _int(version))


def _int(value: Any) -> int | None:
    """An id or version: a Java int (not a bool, a float or a number past 2^31)."""
    return value if type(value) is int and -(1 << 31) <= value < 1 << 31 else None


def _short(value: Any) -> str:
    """``value`` in a message: its JSON, cut to 100 characters (any value, however deep or long)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return f"(a {type(value).__name__} nested too deep to show)"
    return text if len(text) <= 100 else text[:97] + "..."


def from_schemas_record(key: bytes | None, value: bytes | None) -> Schema | None:
    """The schema a ``_schemas`` record registers, or None for its other records (config, mode,
    deletes, no-ops, tombstones). SchemaError when a SCHEMA record is malformed."""
    if key is None or value is None:
        return None
    try:
        k = orjson.loads(key)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(k, dict) or k.get("keytype") != "SCHEMA":
        return None
    try:
        v = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise SchemaError("a SCHEMA record of _schemas whose value is not JSON") from None
    if not isinstance(v, dict) or _int(v.get("id")) is None:
        raise SchemaError("a SCHEMA record of _schemas without an id")
    return from_registry_json(v)


def schemas_record(schema: Schema) -> tuple[bytes, bytes]:
    """The ``_schemas`` key and value a Schema Registry writes when ``schema`` is registered."""
    if schema.subject is None or schema.version is None or schema.schema_id is None:
        raise SchemaError("a _schemas record needs the schema's subject, version and id")
    key = {"keytype": "SCHEMA", "subject": schema.subject, "version": schema.version, "magic": 1}
    value: dict[str, Any] = {"subject": schema.subject, "version": schema.version, "id": schema.schema_id}
    if schema.format != "avro":
        value["schemaType"] = TYPES[schema.format]
    if schema.references:
        value["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                               for r in schema.references]
    value["schema"] = schema.text
    value["deleted"] = False
    return orjson.dumps(key), orjson.dumps(value)
