"""Keys and values in, their schema id, format and decoded JSON out: what the records table gets.

:meth:`PayloadDecoder.decode` is called once per key and per value with ``--records``. Framing
alone (no schema known) is a few byte comparisons; a value whose schema is known is decoded by the
format's library, each schema compiled once and kept (a schema that fails to compile is kept as
that failure, not retried per record).
"""

from __future__ import annotations

from typing import Any

from payloads.errors import PayloadError, SchemaError, ValueMismatch
from payloads.framing import header_ref, message_indexes, prefix, unframed_json
from payloads.schema import Reference, Schema
from payloads.store import LearnedStore, SchemaStore, Stores

# What decode() returns: (schema id, schema GUID, format, decoded JSON, problem). A problem is
# (kind, text): kind "unknown" (framed, no schema known), "mismatch" (the value does not decode
# with its schema, or is past a budget of payloads.limits), "schema" (its schema does not compile, or
# a library is missing) or "error" (decoding it raised what no decoder should: contained to that value).
Result = tuple[int | None, str | None, str | None, bytes | None, tuple[str, str] | None]
_NULL: Result = (None, None, None, None, None)
MEMO_ENTRIES = 4096       # decoded keys and values kept (see PayloadDecoder.decode)
MEMO_BYTES = 2048         # ... of at most this many bytes each, whose JSON is at most 4 times that (a few bytes of
                          # Avro nulls render as 300 KB): at most ~40 MiB in all
MAX_UNKNOWN = 4096        # unknown schema ids and GUIDs kept (see PayloadDecoder.unknown)
_STABLE = frozenset(("text", "binary"))     # unframed formats whose answer no schema learned later changes


class PayloadDecoder:
    """Frames and decodes keys and values with the schemas of ``store`` and those ``learned`` from
    the capture's ``_schemas`` records. ``validate``: check JSON Schema values against their schema."""

    def __init__(self, store: SchemaStore | None = None, learned: LearnedStore | None = None,
                 validate: bool = False) -> None:
        self.store = store
        self.learned = learned if learned is not None else LearnedStore()
        self.validate = validate
        self._stores = Stores([s for s in (store, self.learned) if s is not None])
        self._compiled: dict[int, Any] = {}      # id(schema) -> decoder, or the PayloadError it raised
        self._memo: dict[Any, Result] = {}
        # Ids and GUIDs seen framing a value with no schema known (the first MAX_UNKNOWN: anyone producing
        # to a topic picks them, and what is asked of the set is mostly whether it is empty).
        self.unknown: set[int | str] = set()
        self._fast: dict[int, tuple[int, str, Any]] = {}   # id -> (id, format, decoder): prefixed ids seen

    @property
    def active(self) -> bool:
        """Whether values are being decoded: schemas given, or some learned from the capture."""
        return self.store is not None or self.learned.any_known()

    def learn(self, key: bytes | None, value: bytes | None) -> Schema | None:
        """A ``_schemas`` record: the schema it registers, if new (see :meth:`LearnedStore.learn`).
        SchemaError for one that does not read, whatever went wrong reading it."""
        try:
            return self.learned.learn(key, value)
        except PayloadError:
            raise
        except Exception as exc:  # noqa: BLE001 - anyone can write to _schemas: its records are input too
            raise SchemaError(f"reading it raised {_raised(exc)}") from None

    def resolve(self, ref: Reference) -> Schema:
        s = self._stores.by_subject(ref.subject, ref.version)
        if s is None:
            raise SchemaError(f"reference {ref.name} ({ref.subject} version {ref.version}) not found")
        return s

    def compiled(self, schema: Schema) -> Any:
        """The decoder of ``schema``; raises the PayloadError compiling it raised (every time)."""
        found = self._compiled.get(id(schema))
        if found is None:
            try:
                found = self._compile(schema)
            except PayloadError as exc:
                found = exc
            self._compiled[id(schema)] = found
        if isinstance(found, PayloadError):
            raise found
        return found

    def _compile(self, schema: Schema) -> Any:
        if schema.format == "avro":
            from payloads.avro import AvroDecoder
            return AvroDecoder(schema, self.resolve)
        if schema.format == "protobuf":
            from payloads.protobuf import ProtobufDecoder
            return ProtobufDecoder(schema, self.resolve)
        from payloads.jsonvalues import JsonDecoder
        return JsonDecoder(schema, self.resolve, self.validate)

    def decode(self, data: bytes | None, header: bytes | None = None) -> Result:
        """One key or value (``header``: its ``__key_schema_id`` / ``__value_schema_id`` header's value).

        The same bytes cross the wire more than once — in the Produce request, then in the Fetch
        response of every consumer — and keys repeat: what decoded cleanly is kept (for values of at
        most MEMO_BYTES, MEMO_ENTRIES of them, then forgotten all at once, so memory stays bounded) and
        answered again without decoding. Problems are not kept: a schema learned later may explain them.
        """
        if data is None:
            return _NULL
        memo = self._memo
        key = data if header is None else (data, header)
        found = memo.get(key)
        if found is not None:
            return found
        try:
            result = self._decode(data, header)
        except Exception as exc:  # noqa: BLE001 - whatever one value does to a decoder costs that value alone
            return None, None, None, None, ("error", f"decoding raised {_raised(exc)}")
        decoded = result[3]
        if result[4] is None and len(data) <= MEMO_BYTES and (header is None or len(header) <= 64) and (
                (decoded is not None and len(decoded) <= 4 * MEMO_BYTES)
                or (decoded is None and result[2] in _STABLE and data[:1] != b"\x01")):
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            memo[key] = result
        return result

    def _decode(self, data: bytes, header: bytes | None) -> Result:
        # The usual case first: a 4-byte id prefix naming an Avro or JSON schema decoded before.
        if header is None and len(data) >= 5 and data[0] == 0:
            fast = self._fast.get(int.from_bytes(data[1:5], "big"))
            if fast is not None:
                sid, fmt, dec = fast
                try:
                    return sid, None, fmt, dec.decode(data, 5, None), None
                except ValueMismatch as exc:
                    return sid, None, fmt, None, ("mismatch", f"does not match schema {sid} ({fmt}): {exc}")
        stores = self._stores
        ref = header_ref(header) if header is not None else None
        if ref is not None:
            sid, guid, at = ref
            source, start = header, 0
        else:
            ref = prefix(data)
            if ref is not None:
                sid, guid, at = ref
                if guid is not None and stores.by_guid(guid) is None:
                    ref = None               # 0x01 + 16 bytes naming no schema known: not framing
            if ref is None:
                fmt, decoded = unframed_json(data, self.store is not None)
                return None, None, fmt, decoded, None
            source, start = data, at
        schema = stores.by_guid(guid) if guid is not None else stores.by_id(sid)  # type: ignore[arg-type]
        if schema is None:
            self.note_unknown(sid if sid is not None else guid)  # type: ignore[arg-type]
            if not self.active:
                return sid, guid, None, None, None
            named = f"schema id {sid}" if sid is not None else f"schema GUID {guid}"
            why = self._why_unknown(sid if sid is not None else guid)
            return sid, guid, None, None, ("unknown", f"{named} unknown{why}")
        if sid is None:
            sid = schema.schema_id
        fmt = schema.format
        try:
            dec = self.compiled(schema)
            if fmt != "protobuf" and ref is not None and source is data and at == 5 and sid is not None \
                    and stores.by_id(sid) is schema:
                self._fast[sid] = (sid, fmt, dec)
            indexes = None
            if fmt == "protobuf":
                indexes, after = message_indexes(source, at)   # type: ignore[arg-type]
                if source is data:
                    start = after
            return sid, guid, fmt, dec.decode(data, start, indexes), None
        except ValueMismatch as exc:
            named = f"schema {sid}" if sid is not None else f"schema {guid}"
            return sid, guid, fmt, None, ("mismatch", f"does not match {named} ({fmt}): {exc}")
        except PayloadError as exc:
            named = f"schema {sid}" if sid is not None else f"schema {guid}"
            return sid, guid, fmt, None, ("schema", f"{named} ({fmt}) not usable: {exc}")

    def note_unknown(self, key: int | str) -> None:
        if len(self.unknown) < MAX_UNKNOWN:
            self.unknown.add(key)

    @staticmethod
    def failed(problem: tuple[str, str] | None) -> bool:
        """Whether a problem is a value that did not decode (its raw bytes are worth keeping), rather
        than one whose schema is simply not known."""
        return problem is not None and problem[0] != "unknown"

    def _why_unknown(self, key: object) -> str:
        for s in self._stores.stores:
            error = getattr(s, "errors", {}).get(key)
            if error:
                return f" ({error})"
        return " (not in the schemas given, nor learned from the capture's _schemas records)"


def _raised(exc: BaseException) -> str:
    """An exception as one short line: its type and the start of its message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__
