"""Record payloads: Schema Registry framing, and Avro, Protobuf and JSON values decoded with their schemas.

Bytes and schemas in, objects (as JSON text) out, with no I/O but the registry client's
(:mod:`payloads.registry`) and protoc's (:mod:`payloads.protobuf`). The codec libraries load only
when a value of their format is decoded; the dissector never imports this package, and kdissect's
row builder calls it only when records are asked for.

    from payloads import DirectoryStore, PayloadDecoder
    dec = PayloadDecoder(DirectoryStore("schemas/"))
    schema_id, guid, fmt, json_text, problem = dec.decode(value, header_value)
"""

from __future__ import annotations

import hotpath  # noqa: F401  (first: installs the KDISSECT_PURE switch)

from payloads.decoder import PayloadDecoder, Result
from payloads.errors import MissingLibrary, PayloadError, SchemaError, ValueMismatch
from payloads.framing import KEY_HEADER, VALUE_HEADER, message_indexes, prefix, unframed_format
from payloads.schema import SCHEMAS_TOPIC, Reference, Schema, from_registry_json, schemas_record
from payloads.store import DirectoryStore, LearnedStore, SchemaStore, Stores, read_schema_file, write_schema

__all__ = [
    "KEY_HEADER", "SCHEMAS_TOPIC", "VALUE_HEADER", "DirectoryStore", "LearnedStore", "MissingLibrary",
    "PayloadDecoder", "PayloadError", "Reference", "Result", "Schema", "SchemaError", "SchemaStore", "Stores",
    "ValueMismatch", "from_registry_json", "message_indexes", "prefix", "read_schema_file", "schemas_record",
    "unframed_format", "write_schema",
]
