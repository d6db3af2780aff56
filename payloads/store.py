"""Where schemas come from, behind one small interface (:class:`SchemaStore`).

* :class:`DirectoryStore` — a folder of schema files (``--schemas DIR``);
* :class:`LearnedStore` — schemas taken from ``_schemas`` records seen in the capture;
* :class:`payloads.registry.RegistryStore` — a Schema Registry, through its client;
* :class:`Stores` — several, asked in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

import orjson

from payloads.errors import SchemaError
from payloads.limits import MAX_LEARNED_BYTES, MAX_SCHEMA_BYTES, check_schema_text
from payloads.schema import Schema, from_registry_json, from_schemas_record


class SchemaStore(Protocol):
    """Schemas by id, by GUID, and by subject and version (what references name)."""

    def by_id(self, schema_id: int) -> Schema | None: ...
    def by_guid(self, guid: str) -> Schema | None: ...
    def by_subject(self, subject: str, version: int) -> Schema | None: ...


class _Index:
    """Schemas indexed the three ways a lookup asks for them."""

    def __init__(self) -> None:
        self.ids: dict[int, Schema] = {}
        self.guids: dict[str, Schema] = {}
        self.subjects: dict[tuple[str, int], Schema] = {}

    def add(self, s: Schema) -> None:
        if s.schema_id is not None:
            self.ids[s.schema_id] = s
        if s.guid is not None:
            self.guids[s.guid.lower()] = s
        if s.subject is not None and s.version is not None:
            self.subjects[(s.subject, s.version)] = s

    def by_id(self, schema_id: int) -> Schema | None:
        return self.ids.get(schema_id)

    def by_guid(self, guid: str) -> Schema | None:
        return self.guids.get(guid.lower())

    def by_subject(self, subject: str, version: int) -> Schema | None:
        return self.subjects.get((subject, version))


def read_schema_file(path: Path) -> Schema:
    """One file of a schemas folder: the registry's JSON (``{id}.json``, ``{guid}.json``, or any
    ``*.json`` with an ``id``), or the plain text of one schema (``{id}.avsc``, ``{id}.proto``,
    ``{id}.schema.json``), its id taken from the file name. SchemaError for a file past the budgets of
    :mod:`payloads.limits` (read no further than they allow)."""
    name = path.name
    try:
        with path.open("rb") as f:
            raw = f.read(4 * MAX_SCHEMA_BYTES + 1)      # registry JSON escapes: 4 bytes a character at most
        if len(raw) > 4 * MAX_SCHEMA_BYTES:
            raise SchemaError(f"{path}: more than {4 * MAX_SCHEMA_BYTES} bytes, past the limit of a schema")
        text = raw.decode("utf-8")
        if "\r" in text:                                 # as read_text() reads it: universal newlines
            text = text.replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: cannot read: {exc}") from None
    for suffix, fmt in ((".schema.json", "json"), (".avsc", "avro"), (".proto", "protobuf")):
        if name.endswith(suffix):
            stem = name[:-len(suffix)]
            schema_id, guid = _identity(stem)
            if schema_id is None and guid is None:
                raise SchemaError(f"{path}: name it by the schema id ({{id}}{suffix}) or GUID")
            try:
                check_schema_text(fmt, text)
            except SchemaError as exc:
                raise SchemaError(f"{path}: {exc}") from None
            return Schema(fmt, text, (), schema_id, guid)
    if name.endswith(".json"):
        schema_id, guid = _identity(name[:-5])
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise SchemaError(f"{path}: not JSON: {exc}") from None
        try:
            s = from_registry_json(obj, schema_id, guid)
            check_schema_text(s.format, s.text)
        except SchemaError as exc:
            raise SchemaError(f"{path}: {exc}") from None
        if s.schema_id is None and s.guid is None and s.subject is None:
            raise SchemaError(f"{path}: name it by the schema id ({{id}}.json) or give an \"id\"")
        return s
    raise SchemaError(f"{path}: not a schema file (.json, .avsc, .proto, .schema.json)")


def _identity(stem: str) -> tuple[int | None, str | None]:
    if stem.isdigit():
        return int(stem), None
    if len(stem) == 36 and stem.count("-") == 4:
        return None, stem.lower()
    return None, None


def schema_files(directory: Path) -> Iterator[Path]:
    for p in sorted(directory.iterdir()):
        if p.is_file() and not p.name.startswith(".") and p.name.endswith((".json", ".avsc", ".proto")):
            yield p


class DirectoryStore(_Index):
    """The schemas of a folder, read once (see :func:`read_schema_file`)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__()
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise SchemaError(f"{self.directory}: no such directory")
        for p in schema_files(self.directory):
            self.add(read_schema_file(p))

    @property
    def formats(self) -> set[str]:
        return {s.format for s in [*self.ids.values(), *self.guids.values(), *self.subjects.values()]}


class LearnedStore(_Index):
    """Schemas taken from the ``_schemas`` records of a capture, in the order they were seen.

    ``clock`` (e.g. packets read) dates each one; schemas :meth:`preload`-ed from another
    decoder of the same capture are known only from their date on, so a share of a capture
    knows at each point what a single decoder would have known there.
    """

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        super().__init__()
        self.clock = clock or (lambda: 0)
        self.learned: list[tuple[int, Schema]] = []      # (clock, schema), what this store saw itself
        self._from: dict[int, int] = {}                  # id(schema) of a preloaded one -> its date
        self.learned_bytes = 0                           # text of the schemas learned here

    def learn(self, key: bytes | None, value: bytes | None) -> Schema | None:
        """Take a ``_schemas`` record; the schema it registers, if new. SchemaError if malformed, longer
        than :data:`~payloads.limits.MAX_SCHEMA_BYTES`, or past :data:`~payloads.limits.MAX_LEARNED_BYTES`
        of schemas learned. A schema past its other budgets (nested too deep, too many fields) is
        learned: compiling it fails, and each value naming it says so."""
        s = from_schemas_record(key, value)
        if s is None:
            return None
        known = self.ids.get(s.schema_id)  # type: ignore[arg-type]
        if known is not None and id(known) not in self._from:
            return None                                  # seen again (the registry reads what it wrote)
        if self.learned_bytes + len(s.text) > MAX_LEARNED_BYTES:
            raise SchemaError(f"schema {s.schema_id} not learned: the capture's _schemas records hold more than "
                              f"{MAX_LEARNED_BYTES} characters of schemas")
        self.learned_bytes += len(s.text)
        self.add(s)
        self.learned.append((self.clock(), s))
        return s

    def preload(self, entries: Iterable[tuple[int, Schema]]) -> None:
        for when, s in entries:
            known = self.ids.get(s.schema_id) if s.schema_id is not None else None
            if known is not None and id(known) not in self._from:
                continue
            self.add(s)
            self._from[id(s)] = when

    @property
    def preloaded(self) -> bool:
        """Whether schemas from another decoder of the capture wait here (known from their date on)."""
        return bool(self._from)

    def any_known(self) -> bool:
        """Whether some schema is known at this point (learnt here, or preloaded and dated before now)."""
        if self.learned:
            return True
        if self._from:
            now = self.clock()
            return any(when < now for when in self._from.values())
        return False

    def _visible(self, s: Schema | None) -> Schema | None:
        if s is None:
            return None
        when = self._from.get(id(s))
        return s if when is None or when < self.clock() else None

    def by_id(self, schema_id: int) -> Schema | None:
        return self._visible(self.ids.get(schema_id))

    def by_guid(self, guid: str) -> Schema | None:
        return self._visible(self.guids.get(guid.lower()))

    def by_subject(self, subject: str, version: int) -> Schema | None:
        return self._visible(self.subjects.get((subject, version)))


class Stores:
    """Several stores, asked in order; the first that knows a schema answers."""

    def __init__(self, stores: Iterable[SchemaStore]) -> None:
        self.stores = tuple(stores)

    def by_id(self, schema_id: int) -> Schema | None:
        for s in self.stores:
            found = s.by_id(schema_id)
            if found is not None:
                return found
        return None

    def by_guid(self, guid: str) -> Schema | None:
        for s in self.stores:
            found = s.by_guid(guid)
            if found is not None:
                return found
        return None

    def by_subject(self, subject: str, version: int) -> Schema | None:
        for s in self.stores:
            found = s.by_subject(subject, version)
            if found is not None:
                return found
        return None


def write_schema(directory: Path, schema: Schema) -> Path:
    """``schema`` as the registry's JSON in ``directory/{id}.json`` (or ``{guid}.json``), replaced atomically."""
    name = f"{schema.schema_id}.json" if schema.schema_id is not None else f"{schema.guid}.json"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    tmp = directory / f".{name}.tmp{os.getpid()}"
    tmp.write_bytes(orjson.dumps(schema.registry_json(), option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, path)
    return path
