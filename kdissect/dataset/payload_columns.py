"""The records table's payload columns: each key's and value's framing, format and decoded JSON.

The row builder hands every record's key, value and headers here (with ``--records``); this module
asks the payload layer (:mod:`payloads`) and appends the answers to the columns, learns schemas from
the ``_schemas`` topic's records as they pass, and turns what did not decode into anomaly texts,
one per records field and kind of problem (naming its first record's offset), so a topic whose every
value fails cannot flood the anomalies table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from payloads import KEY_HEADER, SCHEMAS_TOPIC, VALUE_HEADER, DirectoryStore, PayloadDecoder, PayloadError, Stores
from payloads.framing import MAX_ID, unframed_format
from payloads.libs import check
from payloads.store import LearnedStore, write_schema

from kdissect.errors import KdissectError

# Appended to the records table after its other columns (kdissect.dataset.tables), in this order.
COLUMNS = ("key_schema_id", "value_schema_id", "key_schema_guid", "value_schema_guid", "key_format",
           "value_format", "key_decoded", "value_decoded")
SCHEMAS_DIR = "schemas"          # OUTDIR/schemas/: schemas learned from the capture or the registry


class PayloadColumns:
    """One capture's payload columns (``cols``: the eight buffers of :data:`COLUMNS`)."""

    def __init__(self, decoder: PayloadDecoder, cols: Sequence[list]) -> None:
        self.decoder = decoder
        (self._kid, self._vid, self._kguid, self._vguid, self._kfmt, self._vfmt, self._kdec,
         self._vdec) = cols
        self._problems: dict[tuple[str, str, str], list] = {}   # (side, kind, text) -> [first, count, last]
        self.failed = 0          # of the last record: 1 its key, 2 its value did not decode (raw bytes kept)
        self._formats: dict[bytes, str] = {}      # unframed keys and values -> format (framing only)
        self._plain = self._framing_only()

    def _framing_only(self) -> bool:
        """Whether no schema can be known (none given, none learnt or preloaded): then a value's framing
        alone is wanted, read here without the decoder's look-ups (``--records`` pays only this)."""
        dec = self.decoder
        return dec.store is None and not dec.learned.ids and not dec.learned.preloaded

    def _frame(self, data: bytes | None) -> tuple[int | None, str | None]:
        """(schema id, format) of an unprefixed-header key or value when no schema can be known."""
        if data is None:
            return None, None
        n = len(data)
        if n >= 5 and data[0] == 0:
            sid = (data[1] << 24) | (data[2] << 16) | (data[3] << 8) | data[4]
            if 0 < sid < MAX_ID:
                self.decoder.note_unknown(sid)
                return sid, None
        elif n >= 17 and data[0] == 1:
            return None, "binary"               # a GUID no schema can name here: not framing
        formats = self._formats
        fmt = formats.get(data)
        if fmt is None:
            fmt = unframed_format(data)
            if n <= 256:                        # short keys and values repeat; bounded like the decoder's memo
                if len(formats) >= 4096:
                    formats.clear()
                formats[data] = fmt
        return None, fmt

    def record(self, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
               topic: str | None, offset: int | None) -> int:
        """One record's cells; returns the bytes of decoded text added (for the writer's budget)."""
        kh = vh = None
        if headers:
            for name, hv in headers:
                if name == VALUE_HEADER:
                    vh = hv
                elif name == KEY_HEADER:
                    kh = hv
        dec = self.decoder
        self.failed = 0
        if self._plain and kh is None and vh is None:
            kid, kfmt = self._frame(key)
            vid, vfmt = self._frame(value)
            self._kid.append(kid)
            self._vid.append(vid)
            self._kguid.append(None)
            self._vguid.append(None)
            self._kfmt.append(kfmt)
            self._vfmt.append(vfmt)
            self._kdec.append(None)
            self._vdec.append(None)
            if topic == SCHEMAS_TOPIC:
                self._learn(key, value, offset)
            return 0
        kid, kguid, kfmt, kdec, kproblem = dec.decode(key, kh)
        vid, vguid, vfmt, vdec, vproblem = dec.decode(value, vh)
        self._kid.append(kid)
        self._vid.append(vid)
        self._kguid.append(kguid)
        self._vguid.append(vguid)
        self._kfmt.append(kfmt)
        self._vfmt.append(vfmt)
        self._kdec.append(kdec)
        self._vdec.append(vdec)
        if kproblem is not None:
            self._note("key", kproblem, offset)
            if dec.failed(kproblem):
                self.failed = 1
        if vproblem is not None:
            self._note("value", vproblem, offset)
            if dec.failed(vproblem):
                self.failed |= 2
        if topic == SCHEMAS_TOPIC:
            self._learn(key, value, offset)
        return (len(kdec) if kdec is not None else 0) + (len(vdec) if vdec is not None else 0)

    def _learn(self, key: bytes | None, value: bytes | None, offset: int | None) -> None:
        try:
            self.decoder.learn(key, value)
        except PayloadError as exc:
            self._note("value", ("schemas", f"_schemas record not read: {exc}"), offset)
        self._plain = self._framing_only()

    def _note(self, side: str, problem: tuple[str, str], offset: int | None) -> None:
        entry = self._problems.get((side, *problem))
        if entry is None:
            self._problems[(side, *problem)] = [offset, 1, offset]
        else:
            entry[1] += 1
            entry[2] = offset

    def problems(self) -> list[str]:
        """What did not decode in the records field just read, one text per side and problem; cleared."""
        if not self._problems:
            return []
        out = []
        for (side, _kind, text), (first, count, last) in self._problems.items():
            where = f"record at offset {first}" if first is not None else "a record"
            more = f" (and {count - 1} more record{'s' if count > 2 else ''} up to offset {last})" if count > 1 else ""
            out.append(f"{where}: {side} {text}{more}")
        self._problems.clear()
        return out

    def learned(self) -> list[tuple[int, Any]]:
        """(clock, schema) of each schema this capture's ``_schemas`` records taught, in order."""
        return self.decoder.learned.learned


def payload_decoder(schemas: str | os.PathLike[str] | None = None, registry: str | None = None,
                    validate_json: bool = False, outdir: str | os.PathLike[str] | None = None,
                    clock: Callable[[], int] | None = None,
                    preload: Sequence[tuple[int, Any]] = ()) -> PayloadDecoder:
    """The decoder of one capture: the folder ``schemas``, the Schema Registry at ``registry`` (cached in
    ``outdir/schemas/``), and what the capture's ``_schemas`` records teach (dated by ``clock``;
    ``preload``: what other shares of the capture learnt, each known from its date on).
    One-line KdissectError for a folder that does not read or a library a schema needs."""
    stores: list[Any] = []
    try:
        if schemas is not None:
            try:
                d = DirectoryStore(schemas)
            except PayloadError as exc:
                raise KdissectError(f"--schemas: {exc}") from None
            for fmt in sorted(d.formats):
                check(fmt)
            stores.append(d)
        if validate_json:
            check("validate")
        if registry is not None:
            from payloads.registry import RegistryStore
            cache = Path(outdir) / SCHEMAS_DIR if outdir is not None else None
            stores.append(RegistryStore(registry, cache))
    except PayloadError as exc:          # a missing library: the message says what to install
        raise KdissectError(str(exc)) from None
    store = stores[0] if len(stores) == 1 else Stores(stores) if stores else None
    learned = LearnedStore(clock)
    learned.preload(preload)
    return PayloadDecoder(store, learned, validate_json)


def check_options(options: Any) -> None:
    """Fail early, in one line, on a schemas folder that does not read or a library it needs (the
    registry is not asked anything here)."""
    if options.records and (options.schemas is not None or options.validate_json):
        payload_decoder(options.schemas, None, options.validate_json)
    if options.schema_registry is not None:
        try:
            check("registry")
        except PayloadError as exc:
            raise KdissectError(str(exc)) from None


def write_learned(outdir: str | os.PathLike[str], learned: Sequence[tuple[int, Any]]) -> list[Path]:
    """The schemas learned from a capture, as ``OUTDIR/schemas/{id}.json``."""
    return [write_schema(Path(outdir) / SCHEMAS_DIR, s) for _when, s in learned]
