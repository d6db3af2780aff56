"""A Schema Registry as a schema store, through confluent-kafka's ``SchemaRegistryClient``.

Every schema fetched is also written to a cache folder as the registry's JSON (``{id}.json``),
the layout ``--schemas`` reads, and is read from there first: a dataset keeps the schemas its
values were decoded with, and a second decode asks the registry nothing it has asked before.
This is the one module of the package that does network I/O.

A registry that answers slowly, or with what is not a schema, costs a look-up, never the decode:
each request has a timeout (:data:`~payloads.limits.REGISTRY_TIMEOUT`, retried once), each look-up
is given up after three timeouts whatever the client does (a registry trickling its answer, a name
that does not resolve), and what went wrong is kept in
:attr:`RegistryStore.errors`, named in the values' problems. Schema ids are whoever framed a value's
to choose, so after :data:`~payloads.limits.REGISTRY_FAILURES` look-ups in a row that the registry
did not answer, or :data:`~payloads.limits.REGISTRY_MISSES` it could not answer, it is not asked again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from payloads.errors import PayloadError, SchemaError
from payloads.libs import need
from payloads.limits import REGISTRY_FAILURES, REGISTRY_MISSES, REGISTRY_TIMEOUT, check_schema_text
from payloads.schema import Schema, from_registry_json
from payloads.store import DirectoryStore, write_schema


class _NoAnswer(Exception):
    """The registry did not answer (a timeout, a connection that failed)."""


class _Errors(dict):
    """What the registry said of each key it did not give; once it is not asked any more, that for
    every key (so the keys asked after are not each kept)."""

    otherwise: str | None = None

    def get(self, key: object, default: Any = None) -> Any:
        found = super().get(key)
        return found if found is not None else self.otherwise if self.otherwise is not None else default


def _client(url: str, timeout: float) -> Any:
    """confluent-kafka's client with a timeout and one retry; older clients that do not take the
    retry settings (or a timeout) get what they take: :meth:`RegistryStore._call` bounds a look-up anyway."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    retries = {"max.retries": 1, "retries.wait.ms": 100, "retries.max.wait.ms": 1000}
    error: Exception | None = None
    for conf in ({"url": url, "timeout": timeout, **retries}, {"url": url, "timeout": timeout}, {"url": url}):
        try:
            return SchemaRegistryClient.new_client(conf)
        except Exception as exc:  # noqa: BLE001 - the client rejects a bad URL (or a setting) with several types
            if error is None:
                error = exc
            if "nrecognized" not in str(exc):
                break
    raise PayloadError(f"--schema-registry {url}: {error}")


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RegistryStore:
    """Schemas by id, GUID and subject/version from the registry at ``url``, cached in ``cache``.
    ``timeout``: seconds for each request (a look-up is given up after ``deadline``, by default
    three times as long)."""

    def __init__(self, url: str, cache: Path | None = None, client: object | None = None,
                 timeout: float = REGISTRY_TIMEOUT, deadline: float | None = None) -> None:
        self.url = url
        self.cache = cache
        self.timeout = timeout
        self.deadline = deadline if deadline is not None else 3 * timeout
        if client is None:
            need("confluent_kafka.schema_registry", "confluent-kafka", "--schema-registry")
            client = _client(url, timeout)
        self.client = client
        self.errors: dict[object, str] = _Errors()   # what the registry said about ids it did not give
        self._local = DirectoryStore(cache) if cache is not None and cache.is_dir() else None
        self._got: dict[object, Schema | None] = {}
        self._failures = 0                           # look-ups in a row the registry did not answer
        self._misses = 0                             # look-ups it did not give a schema for
        self._given_up: str | None = None            # why it is not asked any more

    def _call(self, call: Callable[[], Any]) -> Any:
        """``call()`` in a thread of its own, given up after ``deadline`` seconds (the thread is left
        to end on its own: a daemon, it keeps nothing from exiting)."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc

        thread = threading.Thread(target=run, name="kdissect-schema-registry", daemon=True)
        thread.start()
        thread.join(self.deadline)
        if thread.is_alive():
            raise _NoAnswer(f"within {self.deadline:g} s")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _fetch(self, key: object, call: Callable[[], Any]) -> Schema | None:
        if key in self._got:
            return self._got[key]
        if self._given_up is not None:
            return None                             # errors says why, for every key: nothing kept per key
        found = None
        answered = True
        try:
            s = self._call(call)
            found = self._schema(s, key)
        except SchemaError as exc:
            self.errors[key] = f"the registry at {self.url} answered with what is not a usable schema: {exc}"
        except Exception as exc:  # noqa: BLE001 - the client's errors, the network's, and garbage answers
            answered, why = self._why(exc)
            self.errors[key] = f"the registry at {self.url} {why}"
        if found is not None and self.cache is not None:
            try:
                write_schema(self.cache, found)
            except OSError as exc:
                self.errors[key] = f"schema not written to {self.cache}: {exc}"
        self._got[key] = found
        self._failures = 0 if answered else self._failures + 1
        if found is None:
            self._misses += 1
        if self._failures >= REGISTRY_FAILURES:
            self._given_up = (f"the registry at {self.url} is not asked any more: it did not answer "
                              f"{self._failures} look-ups in a row (the last: {self.errors[key]})")
        elif self._misses >= REGISTRY_MISSES:
            self._given_up = (f"the registry at {self.url} is not asked any more: {self._misses} look-ups "
                              "found no schema")
        if self._given_up is not None:
            self.errors.otherwise = self._given_up   # type: ignore[attr-defined]
        return found

    @staticmethod
    def _why(exc: Exception) -> tuple[bool, str]:
        """Whether the registry answered, and what to say of ``exc``."""
        if isinstance(exc, _NoAnswer):
            return False, f"did not answer {exc}"
        if isinstance(exc, (TimeoutError, ConnectionError)) or _is_transport(exc):
            return False, f"did not answer: {_line(exc)}"
        if type(exc).__name__ == "SchemaRegistryError":
            return True, f"said: {exc}"
        return True, f"answered with what is not a schema: {_line(exc)}"

    @staticmethod
    def _schema(s: object, key: object) -> Schema:
        """The client's answer as a Schema; SchemaError for one of another shape."""
        try:
            obj = _answer(s, key)
        except Exception as exc:  # noqa: BLE001 - attributes of any type, or missing
            raise SchemaError(f"{_line(exc)}") from None
        schema = from_registry_json({k: v for k, v in obj.items() if v is not None})
        check_schema_text(schema.format, schema.text)      # not cached: the cache folder must read
        return schema

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


def _answer(s: object, key: object) -> dict[str, Any]:
    """The registry's JSON of the client's ``Schema`` (id look-ups) or ``RegisteredSchema`` (subject
    and version look-ups)."""
    if s is None:
        raise SchemaError("no schema in the answer")
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
    return obj


def _is_transport(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP client's own "no answer": httpx's ``TransportError`` (a timeout, a
    connection refused or reset, a name that does not resolve), by name, for the client may bring
    httpx under another (confluent-kafka's ``_httpx_compat``)."""
    return any(c.__name__ == "TransportError" and c.__module__.split(".")[0].startswith("httpx")
               for c in type(exc).__mro__)
