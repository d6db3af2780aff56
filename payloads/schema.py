"""A schema as a Schema Registry serves it: its text, type, references and identity.

Read from the registry's own JSON (``GET /schemas/ids/{id}``, ``GET /subjects/{s}/versions/{v}``),
from plain schema files, or from the records a registry keeps in its ``_schemas`` topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from payloads.errors import SchemaError

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
    """A schema from the registry's JSON; ``schema_id``/``guid`` when the JSON does not carry them."""
    if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str):
        raise SchemaError("not a Schema Registry schema (a JSON object with a \"schema\" string)")
    kind = obj.get("schemaType") or "AVRO"        # the registry leaves it out for Avro
    fmt = FORMATS.get(str(kind).upper())
    if fmt is None:
        raise SchemaError(f"schemaType {kind!r} is not AVRO, PROTOBUF or JSON")
    refs = []
    for r in obj.get("references") or ():
        try:
            refs.append(Reference(str(r["name"]), str(r["subject"]), int(r["version"])))
        except (KeyError, TypeError, ValueError):
            raise SchemaError(f"reference {r!r}: needs name, subject and version") from None
    sid = obj.get("id", schema_id)
    version = obj.get("version")
    return Schema(fmt, obj["schema"], tuple(refs), int(sid) if isinstance(sid, int) else schema_id,
                  str(obj.get("guid") or guid) if (obj.get("guid") or guid) else None,
                  obj.get("subject") if isinstance(obj.get("subject"), str) else None,
                  version if isinstance(version, int) else None)


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
    if not isinstance(v, dict) or not isinstance(v.get("id"), int):
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
