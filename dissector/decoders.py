"""Compile the schema into fast per-version body decoders.

An interpreter walking the schema field by field costs several dictionary
look-ups and calls per field; decoding tens of thousands of exchanges a second
needs better. So for each (api key, request/response, version) we write the
Python source of a decoder — consecutive fixed-width fields read with one
precompiled ``struct`` call, strings and varints inlined — and ``exec`` it once,
on first use.

Every generated function has the shape ``f(b, o, r) -> o``: read from bytes
``b`` at offset ``o`` into the dict ``r``, return the new offset. Containers are
attached to their parent before they are filled, so a decode that fails
halfway still leaves everything read so far in place. The failure offset is
the ``o`` of the innermost generated frame, recovered from the traceback.

Every message also has a *budgeted* variant, ``f(b, o, r, k)``, for frames large enough to
matter (:mod:`dissector.budget`): before each array is filled, the estimated memory of its
elements is taken from ``k[0]``, and a decode that would overdraw it stops with
:class:`~dissector.errors.DecodeLimit`. Smaller frames use the plain variant: their worst
case is within the budget's floor, so normal traffic never pays for the check.

Compiling the source costs ~1-3 ms per message, most of a short capture's start-up
when it holds dozens of kinds of messages. A :class:`CodeCache` given by the caller
(the dissector itself does no file I/O) keeps the compiled code, keyed by a hash of
the source: a changed generator or schema gives another source and so another key.
"""

from __future__ import annotations

import importlib.util
import marshal
import struct
from dataclasses import dataclass
from types import CodeType
from typing import Any, Callable, Protocol

from dissector import budget as _budget
from dissector import schema
from dissector.errors import BadLength, DecodeLimit, DissectError, Underflow
from dissector.events import DecodeFailure
from dissector.primitives import read_tags, read_tags_budgeted, read_uuid, read_uvarint
from dissector.schema import Field, MessageSchema

_GENERATED_FILENAME = "<kafka-dissect decoder>"

_FIXED = {
    "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8),
    "uint16": ("H", 2), "uint32": ("I", 4), "float64": ("d", 8), "bool": ("?", 1),
}

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

# What a decode can raise on bad bytes; everything else is a bug and must surface.
DECODE_ERRORS = (DissectError, struct.error, IndexError, ValueError, OverflowError)


class _Writer:
    """Accumulates the source of one message's decoder functions.

    Everything the source refers to is either written in it or in ``namespace``
    under a name the source spells out (``_S_hi`` is ``struct.Struct(">hi")``), so
    the same source always means the same code: what lets :class:`CodeCache` key by it.
    """

    def __init__(self, records_hook: Callable[[bytes], Any], flexible: bool, budgeted: bool = False):
        self.flexible = flexible  # every struct of a flexible message ends in tagged fields
        self.budgeted = budgeted  # functions take the budget ``k`` and charge each array (module doc)
        self.k = ", k" if budgeted else ""
        self.lines: list[str] = []
        # Filled key by key into an empty dict, not written as one literal: compiled, a literal of
        # this size is a presized dict, whose keys table is not the all-string kind, and Python
        # 3.11 then never specializes the decoders' global look-ups (a slow path on every read).
        self.namespace: dict[str, Any] = {}
        for name, value in (("_I16", _I16), ("_I32", _I32), ("_unpack_from", struct.unpack_from),
                            ("_uvar", read_uvarint), ("_uuid", read_uuid), ("_tags", read_tags),
                            ("_records", records_hook),
                            ("Underflow", Underflow), ("BadLength", BadLength)):
            self.namespace[name] = value
        if budgeted:
            self.namespace["_tagsk"] = read_tags_budgeted
            self.namespace["DecodeLimit"] = DecodeLimit
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def unpacker(self, fmt: str) -> str:
        key = "_S_" + fmt.replace("?", "Z")
        if key not in self.namespace:
            self.namespace[key] = struct.Struct(">" + fmt).unpack_from
        return key

    # -- code for single fields --------------------------------------------------

    def count(self, out: list[str], ind: str, flexible: bool) -> None:
        """Leave an array count (or -1 for null) in ``n``."""
        if flexible:
            out += [f"{ind}n = b[o]; o += 1",
                    f"{ind}if n > 127: n, o = _uvar(b, o - 1)",
                    f"{ind}n -= 1"]
        else:
            out += [f"{ind}n = _I32(b, o)[0]; o += 4"]

    def length(self, out: list[str], ind: str, flexible: bool, wide: bool) -> None:
        """Leave a string/bytes length (or -1 for null) in ``n``."""
        if flexible:
            out += [f"{ind}n = b[o]; o += 1",
                    f"{ind}if n > 127: n, o = _uvar(b, o - 1)",
                    f"{ind}n -= 1"]
        elif wide:
            out += [f"{ind}n = _I32(b, o)[0]; o += 4"]
        else:
            out += [f"{ind}n = _I16(b, o)[0]; o += 2"]

    def scalar(self, out: list[str], ind: str, f: Field, target: str) -> None:
        """Read one non-array value of a variable-width type into ``target``."""
        t = f.type
        if t in _FIXED:
            code, size = _FIXED[t]
            out.append(f"{ind}{target} = {self.unpacker(code)}(b, o)[0]; o += {size}")
        elif t in ("string", "bytes", "records"):
            self.length(out, ind, f.flexible, wide=t != "string")
            out += [f"{ind}if n < 0: {target} = None",
                    f"{ind}else:",
                    f"{ind}    e = o + n",
                    f"{ind}    if e > len(b): raise Underflow('{f.name}: ' + str(n) + ' bytes past the end')"]
            if t == "string":
                out.append(f"{ind}    {target} = b[o:e].decode('utf-8', 'replace'); o = e")
            elif t == "bytes":
                out.append(f"{ind}    {target} = b[o:e]; o = e")
            else:
                out.append(f"{ind}    {target} = _records(b[o:e]); o = e")
        elif t == "uuid":
            out.append(f"{ind}{target} = _uuid(b, o); o += 16")
        else:
            raise AssertionError(f"unhandled type {t}")

    def array(self, out: list[str], ind: str, f: Field, key: str) -> None:
        elem = f.type[2:]
        self.count(out, ind, f.flexible)
        out += [f"{ind}if n < 0: r[{key}] = None",
                f"{ind}else:",
                f"{ind}    if n > len(b) - o: raise BadLength('{f.name}: ' + str(n) + ' elements but ' + str(len(b) - o) + ' bytes left')"]
        inner = ind + "    "
        if self.budgeted:
            # Past the budget: as many elements as it still allows are decoded, then the decode stops.
            cost = _budget.element_cost(f)
            out += [f"{inner}kn = -1",
                    f"{inner}if n * {cost} > k[0]: kn = n; n = k[0] // {cost} if k[0] > 0 else 0",
                    f"{inner}k[0] -= n * {cost}"]
        if elem == "struct":
            fn = self.struct_function(f.children or ())
            out += [f"{inner}a = []; r[{key}] = a",
                    f"{inner}for _ in range(n):",
                    f"{inner}    x = {{}}; a.append(x); o = {fn}(b, o, x{self.k})"]
        elif elem in _FIXED:
            code, size = _FIXED[elem]
            out += [f"{inner}r[{key}] = list(_unpack_from('>' + str(n) + '{code}', b, o)); o += n * {size}"]
        else:
            sub = Field(f.name, elem, False, None, None, None, f.flexible, None)
            out += [f"{inner}a = []; r[{key}] = a", f"{inner}for _ in range(n):"]
            body: list[str] = []
            self.scalar(body, inner + "    ", sub, "v")
            out += body
            out.append(f"{inner}    a.append(v)")
        if self.budgeted:
            out.append(f"{inner}if kn >= 0: raise DecodeLimit('{f.name}: ' + str(n) + ' of ' + str(kn) + "
                       "' elements decoded within the budget')")

    def field(self, out: list[str], ind: str, f: Field) -> None:
        key = repr(f.name)
        if f.type.startswith("[]"):
            self.array(out, ind, f, key)
        elif f.type == "struct":
            fn = self.struct_function(f.children or ())
            if f.nullable:
                out += [f"{ind}if b[o] >= 128: r[{key}] = None; o += 1",
                        f"{ind}else:",
                        f"{ind}    o += 1; x = {{}}; r[{key}] = x; o = {fn}(b, o, x{self.k})"]
            else:
                out.append(f"{ind}x = {{}}; r[{key}] = x; o = {fn}(b, o, x{self.k})")
        else:
            self.scalar(out, ind, f, f"r[{key}]")

    # -- code for a whole struct -------------------------------------------------

    def struct_function(self, fields: tuple[Field, ...]) -> str:
        """Emit ``def _fN(b, o, r)`` decoding ``fields`` in wire order; return its name."""
        fn = self.name("_f")
        body: list[str] = []
        ind = "    "
        tagged = [f for f in fields if f.tag is not None]
        untagged = [f for f in fields if f.tag is None]
        for f in tagged:
            default = f.default
            body.append(f"{ind}r[{f.name!r}] = {'[]' if default == [] else repr(default)}")
        i = 0
        while i < len(untagged):
            # Consecutive fixed-width fields: one struct call for the whole run.
            j = i
            while j < len(untagged) and untagged[j].type in _FIXED:
                j += 1
            if j - i >= 2:
                run = untagged[i:j]
                fmt = "".join(_FIXED[f.type][0] for f in run)
                size = sum(_FIXED[f.type][1] for f in run)
                targets = ", ".join(f"r[{f.name!r}]" for f in run)
                body.append(f"{ind}{targets} = {self.unpacker(fmt)}(b, o); o += {size}")
                i = j
                continue
            self.field(body, ind, untagged[i])
            i += 1
        if self.flexible:
            table = "None"
            if tagged:
                entries = ", ".join(f"{f.tag}: {self.tag_function(f)}" for f in tagged)
                table = self.name("_tg")
                self.lines.append(f"{table} = {{{entries}}}")
            # Nearly every tagged-field section on the wire is empty: skip the call then.
            if self.budgeted:
                body.append(f"{ind}if b[o]: o = _tagsk(b, o, r, {table}, k)")
            else:
                body.append(f"{ind}if b[o]: o = _tags(b, o, r, {table})")
            body.append(f"{ind}else: o += 1")
        body.append(f"{ind}return o")
        self.lines.append(f"def {fn}(b, o, r{self.k}):")
        self.lines += body
        self.lines.append("")
        return fn

    def tag_function(self, f: Field) -> str:
        fn = self.name("_t")
        body: list[str] = []
        self.field(body, "    ", f)
        self.lines.append(f"def {fn}(b, o, r{self.k}):")
        self.lines += body
        self.lines += ["    return o", ""]
        return fn

    def finish(self, entry: str, cache: CodeCache | None = None) -> Callable[[bytes, int, dict], int]:
        source = "\n".join(self.lines)
        exec(_code(source, cache), self.namespace)
        return self.namespace[entry]

    def source(self) -> str:
        return "\n".join(self.lines)


class CodeCache(Protocol):
    """Where compiled decoders are kept between runs: opaque bytes by key (see kdissect.run.codecache)."""

    def load(self, key: str) -> bytes | None: ...
    def store(self, key: str, data: bytes) -> None: ...


def code_key(source: str) -> str:
    """The cache key of a decoder's source: its hash and the interpreter's bytecode version."""
    import hashlib          # here: loading OpenSSL costs a compiled decode's start-up ~2 ms it never uses
    return hashlib.sha256(importlib.util.MAGIC_NUMBER + source.encode()).hexdigest()[:40]


def _code(source: str, cache: CodeCache | None) -> CodeType:
    if cache is None:
        return compile(source, _GENERATED_FILENAME, "exec")
    key = code_key(source)
    data = cache.load(key)
    if data is not None:
        try:
            code = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            code = None
        if isinstance(code, CodeType) and code.co_filename == _GENERATED_FILENAME:
            return code
    code = compile(source, _GENERATED_FILENAME, "exec")
    cache.store(key, marshal.dumps(code))
    return code


def compile_message(msg: MessageSchema, records_hook: Callable[[bytes], Any],
                    cache: CodeCache | None = None, budgeted: bool = False) -> Callable[..., int]:
    w = _Writer(records_hook, msg.flexible, budgeted)
    entry = w.struct_function(msg.fields)
    return w.finish(entry, cache)


def message_source(msg: MessageSchema, budgeted: bool = False) -> str:
    """The generated decoder source of one message, for reading and debugging."""
    w = _Writer(lambda data: data, msg.flexible, budgeted)
    w.struct_function(msg.fields)
    return w.source()


def failure_offset(exc: BaseException) -> int | None:
    """The offset reached by the innermost generated decoder when ``exc`` was raised."""
    tb = exc.__traceback__
    offset = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename == _GENERATED_FILENAME:
            offset = frame.f_locals.get("o", offset)
        tb = tb.tb_next
    return offset


@dataclass
class Decoded:
    body: dict[str, Any]
    end: int                          # offset after the last byte read
    failure: DecodeFailure | None


def _default_records_hook() -> Callable[[bytes], Any]:
    from dissector.records import summarize
    return summarize


def _prebuilt_key(api_key: int, kind: str, version: int) -> int:
    """(api key, kind, version) as one int, cheaper to hash than the tuple (a negative key or
    version gives a negative int, which no decoder has)."""
    return api_key << 17 | version << 1 | (kind == "response")


def _prebuilt(records_hook: Callable[[bytes], Any]) -> dict[int, Callable[[bytes, int, dict], int]]:
    """The busiest messages' decoders as compiled at install (``dissector/schema/_decoders.py``:
    the source :func:`compile_message` writes, integers read byte by byte), by :func:`_prebuilt_key`.

    Empty when that module would run as Python, where it is no faster than the executed
    source, and for another records hook than the one it calls.
    """
    import hotpath as compiled
    from dissector.records import summarize
    if records_hook is not summarize or compiled.pure_requested():
        return {}
    try:
        from dissector.schema import _decoders
    except ImportError:             # a checkout without the generated module: every decoder is executed
        return {}
    if not compiled.is_compiled(_decoders):
        return {}
    return {_prebuilt_key(*key): fn for key, fn in _decoders.ENTRIES.items()}


class Decoders:
    """Compiled decoders, built on first use and kept for the life of this object."""

    def __init__(self, records_hook: Callable[[bytes], Any] | None = None, code_cache: CodeCache | None = None,
                 *, floor: int = _budget.FLOOR, ratio: int = _budget.RATIO):
        self._records_hook = records_hook or _default_records_hook()
        # The decoding budget (dissector.budget): a body costs at most max(floor, ratio * its frame's size).
        self._floor = floor
        self._ratio = ratio
        self._unchecked = floor // _budget.MAX_DENSITY    # frames no larger decode unchecked
        self._cache: dict[tuple[int | str, str, int], Callable | None] = {}
        self._budgeted: dict[tuple[int | str, str, int], Callable | None] = {}
        self._safe: dict[tuple[int | str, str, int], int] = {}
        self.code_cache = code_cache      # compiled code kept between runs; settable (see default_decoders)
        self._prebuilt = _prebuilt(self._records_hook)

    def budget(self, size: int) -> int:
        """The decoded cost a body of a ``size``-byte frame may reach (dissector.budget)."""
        return _budget.budget(size, self._floor, self._ratio)

    def data_cost(self, name: str, version: int, size: int) -> int:
        """The most ``size`` bytes of an embedded structure can cost decoded."""
        key = (name, "density", version)
        d = self._safe.get(key)
        if d is None:
            msg = schema.data_message(name, version)
            d = self._safe[key] = int(_budget.density(msg.fields)) + 1 if msg is not None else 0
        return d * size

    def unchecked(self, size: int) -> bool:
        """Whether a frame of ``size`` bytes is small enough for the plain decoders whatever its message:
        one comparison on the way of every message (see dissector.budget)."""
        return size <= self._unchecked

    def decode_large(self, api_key: int | str, kind: str, version: int, b: bytes, o: int) -> Decoded | None:
        """:meth:`decode` for a frame :meth:`unchecked` turns away: within the budget when its message could
        overdraw it (the decode then stops, :class:`DecodeLimit`), else the plain way."""
        key = (api_key, kind, version)
        safe = self._safe.get(key)
        if safe is None:
            msg = schema.data_message(api_key, version) if kind == "data" else schema.message(api_key, kind, version)
            safe = self._safe[key] = _budget.safe_size(msg, self._floor) if msg is not None else 0
        if len(b) <= safe:
            if kind != "data":
                return self._plain(api_key, kind, version, b, o)  # type: ignore[arg-type]
            fn = self.get_data(api_key, version)  # type: ignore[arg-type]
            return run(fn, b, o) if fn is not None else None
        fn = self._budgeted.get(key, False)
        if fn is False:
            msg = schema.data_message(api_key, version) if kind == "data" else schema.message(api_key, kind, version)
            fn = compile_message(msg, self._records_hook, self.code_cache, budgeted=True) if msg is not None else None
            self._budgeted[key] = fn
        if fn is None:
            return None
        return run(fn, b, o, [_budget.budget(len(b), self._floor, self._ratio)])

    def get(self, api_key: int, kind: str, version: int) -> Callable[[bytes, int, dict], int] | None:
        key = (api_key, kind, version)
        fn = self._cache.get(key, False)
        if fn is False:
            msg = schema.message(api_key, kind, version)
            fn = compile_message(msg, self._records_hook, self.code_cache) if msg is not None else None
            self._cache[key] = fn
        return fn  # type: ignore[return-value]

    def get_data(self, name: str, version: int) -> Callable[[bytes, int, dict], int] | None:
        key = (name, "data", version)
        fn = self._cache.get(key, False)
        if fn is False:
            msg = schema.data_message(name, version)
            fn = compile_message(msg, self._records_hook, self.code_cache) if msg is not None else None
            self._cache[key] = fn
        return fn  # type: ignore[return-value]

    def decode(self, api_key: int, kind: str, version: int, b: bytes, o: int) -> Decoded | None:
        """Decode a body starting at ``o``; None when the schema lacks the api/version."""
        if len(b) > self._unchecked:
            return self.decode_large(api_key, kind, version, b, o)
        return self._plain(api_key, kind, version, b, o)

    def _plain(self, api_key: int, kind: str, version: int, b: bytes, o: int) -> Decoded | None:
        """Decode without a budget: the compiled decoder when there is one, else the executed source."""
        fast = self._prebuilt.get(api_key << 17 | version << 1 | (kind == "response"))  # _prebuilt_key
        if fast is not None and type(b) is bytes:
            r: dict[str, Any] = {}
            try:
                return Decoded(r, fast(b, o, r), None)
            except Exception:   # noqa: BLE001 - decoded again below, by the source that can tell where it stopped
                pass
        fn = self.get(api_key, kind, version)
        if fn is None:
            return None
        return run(fn, b, o)


_shared: list[Decoders] = []


def default_decoders() -> Decoders:
    """One compiled set for every connection of a process.

    Decoders are pure functions of the schema, so sharing them is safe and saves
    compiling the same ones again for each of thousands of connections.
    """
    if not _shared:
        _shared.append(Decoders())
    return _shared[0]


def run(fn: Callable[..., int], b: bytes, o: int, k: list[int] | None = None) -> Decoded:
    """Run a decoder (a budgeted one when ``k`` is its budget); a failure says where it stopped."""
    r: dict[str, Any] = {}
    try:
        end = fn(b, o, r) if k is None else fn(b, o, r, k)
    except DECODE_ERRORS as exc:
        at = failure_offset(exc)
        kind = type(exc).__name__
        if kind in ("error", "IndexError"):
            kind = "Underflow"  # struct.error / IndexError here always mean "ran out of bytes"
        return Decoded(r, at if at is not None else o, DecodeFailure(kind, str(exc) or "ran out of bytes", at if at is not None else o))
    return Decoded(r, end, None)
