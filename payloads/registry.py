"""A Schema Registry as a schema store, through confluent-kafka's ``SchemaRegistryClient``.

Every schema fetched is also written to a cache folder as the registry's JSON (``{id}.json``),
the layout ``--schemas`` reads, and is read from there first: a dataset keeps the schemas its
values were decoded with, and a second decode asks the registry nothing it has asked before.
This is the one module of the package that does network I/O.
"""

from __future__ import annotations

from pathlib import Path

from payloads.errors import PayloadError, SchemaError
from payloads.libs import need
from payloads.schema import Schema, from_registry_json
from payloads.store import DirectoryStore, write_schema


class RegistryStore:
    """Schemas by id, GUID and subject/version from the registry at ``url``, cached in ``cache``."""

    def __init__(self, url: str, cache: Path | None = None, client: object | None = None) -> None:
        self.url = url
        self.cache = cache
        if client is None:
            need("confluent_kafka.schema_registry", "confluent-kafka", "--schema-registry")
            from confluent_kafka.schema_registry import SchemaRegistryClient
            try:
                client = SchemaRegistryClient.new_client({"url": url})
            except Exception as exc:  # noqa: BLE001 - the client rejects a bad URL with several types
                raise PayloadError(f"--schema-registry {url}: {exc}") from None
        self.client = client
        self.errors: dict[object, str] = {}          # what the registry said about ids it did not give
        self._local = DirectoryStore(cache) if cache is not None and cache.is_dir() else None
        self._got: dict[object, Schema | None] = {}

    def _fetch(self, key: object, call: object) -> Schema | None:
        if key in self._got:
            return self._got[key]
        found = None
        try:
            s = call()  # type: ignore[operator]
            found = self._schema(s, key)
        except SchemaError as exc:
            self.errors[key] = str(exc)
        except Exception as exc:  # noqa: BLE001 - SchemaRegistryError, connection errors
            self.errors[key] = f"the registry at {self.url} said: {exc}"
        if found is not None and self.cache is not None:
            write_schema(self.cache, found)
        self._got[key] = found
        return found

    @staticmethod
    def _schema(s: object, key: object) -> Schema:
        refs = [{"name": r.name, "subject": r.subject, "version": r.version}
                for r in (getattr(s, "references", None) or ())]
        obj = {"schema": getattr(s, "schema_str", None), "schemaType": getattr(s, "schema_type", None) or "AVRO",
               "references": refs}
        rs = getattr(s, "schema", None)          # a RegisteredSchema (subject/version look-ups)
        if rs is not None:
            obj.update(schema=rs.schema_str, schemaType=rs.schema_type or "AVRO",
                       references=[{"name": r.name, "subject": r.subject, "version": r.version}
                                   for r in (rs.references or ())],
                       id=getattr(s, "schema_id", None), subject=getattr(s, "subject", None),
                       version=getattr(s, "version", None))
        if isinstance(key, int):
            obj["id"] = key
        elif isinstance(key, str):
            obj["guid"] = key
        return from_registry_json({k: v for k, v in obj.items() if v is not None})

    def by_id(self, schema_id: int) -> Schema | None:
        if self._local is not None and (s := self._local.by_id(schema_id)) is not None:
            return s
        return self._fetch(schema_id, lambda: self.client.get_schema(schema_id))  # type: ignore[attr-defined]

    def by_guid(self, guid: str) -> Schema | None:
        if self._local is not None and (s := self._local.by_guid(guid)) is not None:
            return s
        return self._fetch(guid, lambda: self.client.get_schema_by_guid(guid))  # type: ignore[attr-defined]

    def by_subject(self, subject: str, version: int) -> Schema | None:
        if self._local is not None and (s := self._local.by_subject(subject, version)) is not None:
            return s
        return self._fetch((subject, version),
                           lambda: self.client.get_version(subject, version))  # type: ignore[attr-defined]

