"""Column buffers -> Arrow arrays, one row group at a time.

Rows are appended cell by cell to one buffer per column (no dict per row): typed C buffers
(``hotpath/_cells.pyx``) for the exchanges, partitions and anomalies tables when compiled, plain lists
otherwise, a :class:`TextColumn` for the JSON bodies. Each
buffer becomes an Arrow array here when a row group is flushed. This fills
Arrow's buffers directly rather than calling ``pyarrow.array(list)``: that
function asks pandas whether a list is "array-like" and so imports pandas, a
second or more of start-up that a decode never otherwise needs. Nor does it use
numpy, except for values no row builder writes (see :mod:`kdissect.dataset.arrow`).
pyarrow itself is imported at the first flush, not before the first packet.

Compiled (``columns.pxd``), the loops of :func:`_bits`, :func:`_narrowed`, :func:`_packed_ints`,
:func:`_packed_bools`, :func:`_expanded`, :func:`_steps` and :func:`_codes` are C loops over typed
buffers (packing ints: ~4 ns a cell, where numpy's object array costs ~40 and its int64 reader ~15),
their copies unchecked, and :class:`TextColumn`'s three buffers are typed, so that appending an end
offset is a C call. The two builds word the error of an int beyond int64 differently.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

# A column's list is emptied for the next row group keeping its storage: the writer sized it for a
# row group (reserve_list), which spares a list grown by appends its dozens of reallocations and
# copies on the way to 20,000 cells, ~4k instructions an exchange. As Python, clear() (hotpath.speedups).
from hotpath.speedups import clear_keeping_capacity
# Compiled, the exchanges, partitions and anomalies tables' buffers are typed (hotpath/_cells.pyx): taken,
# they are Packed cells, Arrow's buffers but for a copy. As Python, they are lists, and Packed is None.
from hotpath.cells import Packed, new_cells
from kdissect.dataset.tables import SPEC

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


class TextColumn:
    """UTF-8 text cells (orjson's output) kept end to end in one bytearray.

    orjson returns each text in a bytes object sized for its working buffer, not
    for the text (kilobytes for a 300-byte body); a list of them would hold
    several times the text's size. Appending copies the text and lets that go.
    The end offsets wait in a list and become an array at the flush.
    """

    __slots__ = ("data", "ends", "valid")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends: list[int] = []        # end offset of each cell in data
        self.valid = bytearray()         # 1 per cell, 0 for null

    def append(self, value: bytes | None) -> None:
        if value is None:
            self.valid.append(0)
        else:
            self.data += value
            self.valid.append(1)
        self.ends.append(len(self.data))

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> bytes | None:
        """Cell ``i``'s text (UTF-8), None if null: a row read back before its flush (``exchange_row``)."""
        ends = self.ends
        if i < 0:
            i += len(ends)
        if not 0 <= i < len(ends):
            raise IndexError("cell index out of range")
        if not self.valid[i]:
            return None
        return bytes(self.data[ends[i - 1] if i else 0:ends[i]])

    def truncate(self, k: int) -> None:
        """Keep the first ``k`` cells (the row builder takes back an exchange whose rows failed)."""
        if k >= len(self.ends):
            return
        del self.data[self.ends[k - 1] if k else 0:]
        del self.ends[k:]
        del self.valid[k:]

    def take(self, k: int) -> tuple[bytes | bytearray, list[int], bytearray]:
        """The first ``k`` cells (data, end offsets, validity), removed from the column."""
        if k == len(self.ends):
            data, ends, valid = self.data, self.ends[:], self.valid
            self.data, self.valid = bytearray(), bytearray()
            clear_keeping_capacity(self.ends)
            return data, ends, valid
        cut = self.ends[k - 1] if k else 0
        data, ends, valid = bytes(self.data[:cut]), self.ends[:k], self.valid[:k]
        del self.data[:cut]
        del self.valid[:k]
        self.ends = [e - cut for e in self.ends[k:]]
        return data, ends, valid


Buffer = Any      # a list, a TextColumn, or typed cells (hotpath.cells)


TEXT_COLUMNS = {("exchanges", "request"), ("exchanges", "response"),     # JSON bodies: see TextColumn
                ("records", "key_decoded"), ("records", "value_decoded")}
# The tables whose buffers are typed cells (hotpath.cells) where kdissect runs compiled, by column type;
# the records table's builders (record_rows, payload_columns) append to lists.
_TYPED = ("exchanges", "partitions", "anomalies")
_CELLS = {"int8": "int", "int16": "int", "int32": "int", "int64": "int", "ts": "int", "float64": "float",
          "bool": "bool", "string": "text"}


def new_buffers(table: str) -> list[Buffer]:
    """Empty column buffers for ``table``, in its schema's order: what row builders append to."""
    typed = table in _TYPED
    return [TextColumn() if (table, name) in TEXT_COLUMNS else new_cells(_CELLS[kind] if typed else "")
            for name, kind, _ in SPEC[table]]


def take(col: Buffer, k: int) -> Any:
    """The first ``k`` cells of a column buffer, removed from it (the buffer object itself stays)."""
    if not isinstance(col, list):       # TextColumn, typed cells
        return col.take(k)
    if k == len(col):
        values = col[:]
        if type(col) is list:
            clear_keeping_capacity(col)
        else:               # hotpath.cells.ListCells, where kdissect runs as Python
            col.clear()
    else:
        values = col[:k]
        del col[:k]
    return values


def _validity(valid: bytearray | None) -> pa.Buffer | None:
    """Arrow's validity bitmap from a byte per cell (0: null); None when no cell is null."""
    import pyarrow as pa
    if valid is None or 0 not in valid:
        return None
    return pa.py_buffer(_bits(valid))


def _bits(flags: bytearray) -> bytearray:
    """A bit per byte of ``flags`` (set where nonzero), least significant first as in Arrow's bitmaps.

    It replaces numpy's ``packbits``, so that a decode needs no numpy at all (see
    :mod:`kdissect.dataset.arrow`).
    """
    n = len(flags)
    out = bytearray((n + 7) >> 3)
    bits = out
    for i in range(n):
        if flags[i]:
            bits[i >> 3] |= 1 << (i & 7)
    return out


def _integers(values: list[Any], type_: pa.DataType) -> pa.Array:
    import pyarrow as pa
    packed = _packed_ints(values)
    if packed is None:
        return _numbers_by_numpy(values, type_)
    cells, valid = packed
    if type_.bit_width != 64:
        cells = _narrowed(cells, _NARROW[type_.bit_width])
        if cells is None:
            raise pa.ArrowInvalid(f"a value does not fit {type_}")      # as pa.array refuses it
    return pa.Array.from_buffers(type_, len(values), [_validity(valid), pa.py_buffer(cells)])


# Array typecodes of the narrower ints, by bit width.
_NARROW = {array(code).itemsize * 8: code for code in "bhi"}


def _narrowed(cells: array, typecode: str) -> array | None:
    """Int64 ``cells`` as ``typecode``'s narrower C ints; None when one does not fit.

    Arrow's checked cast did this before, and loading Arrow's compute library for it cost every
    decode ~10 ms of start-up.
    """
    n = len(cells)
    out = array(typecode, bytes(n * array(typecode).itemsize))
    src = memoryview(cells)
    if typecode == "b":
        d8 = memoryview(out)
        for i in range(n):
            v = src[i]
            if v < -128 or v > 127:
                return None
            d8[i] = v
    elif typecode == "h":
        d16 = memoryview(out)
        for i in range(n):
            v = src[i]
            if v < -32768 or v > 32767:
                return None
            d16[i] = v
    else:
        d32 = memoryview(out)
        for i in range(n):
            v = src[i]
            if v < -2147483648 or v > 2147483647:
                return None
            d32[i] = v
    return out


def _packed_ints(values: list[Any]) -> tuple[array, bytearray | None] | None:
    """Int64 cells and a validity byte per cell (None when no cell is null) of a column of ints and
    Nones; None when it holds anything else, or an int beyond int64, for numpy's path to judge.

    Only exact ints are taken, so that both builds agree on what a bool or a float becomes: numpy's
    path decides those.
    """
    n = len(values)
    out = array("q", bytes(8 * n))
    cells = memoryview(out)
    valid = None
    for i in range(n):
        v = values[i]
        if v is None:
            if valid is None:
                valid = bytearray(b"\x01") * n
            valid[i] = 0
        elif type(v) is int:
            try:
                cells[i] = v
            except (OverflowError, ValueError):      # beyond int64
                return None
        else:
            return None
    return out, valid


def _floats(values: list[Any], type_: pa.DataType) -> pa.Array:
    import pyarrow as pa
    packed = _packed_floats(values)
    if packed is None:
        return _numbers_by_numpy(values, type_)
    cells, valid = packed
    return pa.Array.from_buffers(type_, len(values), [_validity(valid), pa.py_buffer(cells)])


def _packed_floats(values: list[Any]) -> tuple[array, bytearray | None] | None:
    """Float64 cells and validity bytes (None when no cell is null) of a column of numbers and
    Nones; None when a cell is not a number. ``array("d")`` converts each cell in C, as numpy's
    ``float64`` would (an int, a bool); nulls become 0.0 under a cleared validity byte."""
    valid = bytearray(v is not None for v in values) if None in values else None
    try:
        return array("d", values if valid is None else [0.0 if v is None else v for v in values]), valid
    except (TypeError, OverflowError):
        return None


def _numbers_by_numpy(values: list[Any], type_: pa.DataType) -> pa.Array:
    """A number column the packers turn away (a bool or a float among ints, an int beyond int64):
    numpy's conversion decides, as it always has. No capture has needed it."""
    import numpy as np
    import pyarrow as pa
    dtype = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
             pa.float64(): np.float64}[type_]
    wide, missing = _integers_with_gaps(values, np.float64 if dtype is np.float64 else np.int64)
    if dtype is not np.int64 and dtype is not np.float64:
        info = np.iinfo(dtype)
        if len(wide) and (wide.min() < info.min or wide.max() > info.max):
            raise pa.ArrowInvalid(f"a value does not fit {type_}")
        wide = wide.astype(dtype)
    validity = None if not missing.any() else pa.py_buffer(np.packbits(~missing, bitorder="little"))
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(wide)])


def _integers_with_gaps(values: list[Any], wide_dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """(values, null mask) of a column with nulls, or with a value beyond int64."""
    import numpy as np
    # Each value one cell (np.array would nest sequences).
    objs = np.fromiter(values, dtype=object, count=len(values))
    # np.equal, not ``==``: the same element-wise test, but atheris's comparison hook leaks the
    # arrays an ``==`` returns, which grew the dataset_writer fuzzer ~6.5 KB per input.
    missing = np.equal(objs, None)
    if missing.any():
        objs[missing] = 0
    try:
        return objs.astype(wide_dtype), missing
    except OverflowError:
        # Found by fuzzing: a sum of wire values (a batch's base + a record's delta) can leave
        # int64; no such offset or timestamp exists, so the cell is null rather than the file lost.
        for i, v in enumerate(objs):
            if not -(1 << 63) <= v < (1 << 63):
                objs[i] = 0
                missing[i] = True
        return objs.astype(np.int64), missing


def _booleans(values: list[Any], type_: pa.DataType) -> pa.Array:
    import pyarrow as pa
    packed = _packed_bools(values)
    if packed is None:
        return _booleans_by_numpy(values, type_)
    bits, valid = packed
    return pa.Array.from_buffers(type_, len(values), [_validity(valid), pa.py_buffer(bits)])


def _packed_bools(values: list[Any]) -> tuple[bytearray, bytearray | None] | None:
    """Arrow's value bits and a validity byte per cell of a column of bools and Nones; None for
    anything else."""
    n = len(values)
    out = bytearray((n + 7) >> 3)
    bits = out
    valid = None
    for i in range(n):
        v = values[i]
        if v is True:
            bits[i >> 3] |= 1 << (i & 7)
        elif v is None:
            if valid is None:
                valid = bytearray(b"\x01") * n
            valid[i] = 0
        elif v is not False:
            return None
    return out, valid


def _booleans_by_numpy(values: list[Any], type_: pa.DataType) -> pa.Array:
    """A bool column holding values other than True, False and None (0, 1, ...): numpy's truth
    values decide, as they always have."""
    import numpy as np
    import pyarrow as pa
    objs = np.fromiter(values, dtype=object, count=len(values))
    missing = np.equal(objs, None)     # not ``==``: see _integers_with_gaps
    if missing.any():
        objs[missing] = False
    bits = np.packbits(objs.astype(bool), bitorder="little")
    validity = None if not missing.any() else pa.py_buffer(np.packbits(~missing, bitorder="little"))
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(bits)])


def _strings(values: list[Any], type_: pa.DataType) -> pa.Array:
    # str and bytes alike; None is null.
    import pyarrow as pa
    if type_ == pa.string():
        return _repeated_strings(values)
    return _string_builder(values).view(type_)


def _string_builder(values: list[Any]) -> pa.Array:
    from pyarrow.lib import StringBuilder
    b = StringBuilder()
    b.append_values(values)
    return b.finish()


def _repeated_strings(values: list[Any]) -> pa.Array:
    """A text column as codes into its distinct values, expanded by Arrow.

    Text columns repeat a few values (addresses, api and topic names, statuses)
    row after row. Arrow's builder converts each cell anew, ~180 ns each; a code
    per cell and one ``take`` costs a fraction of that. The array is the same plain
    string array either way.
    """
    import pyarrow as pa
    index: dict[Any, int] = {}
    codes = _codes(values, index)
    distinct = _string_builder(list(index))       # each distinct value converted by Arrow, once
    _, starts, pool = distinct.buffers()
    expanded = _expanded(codes, array("i", starts.to_pybytes()[:4 * (len(distinct) + 1)]),
                         pool.to_pybytes() if pool is not None else b"", index.get(None, -1))
    if expanded is None:
        raise pa.ArrowInvalid("a row group's text column exceeds 2 GiB")
    offsets, data, valid = expanded
    return pa.Array.from_buffers(pa.string(), len(values), [_validity(valid), pa.py_buffer(offsets),
                                                          pa.py_buffer(data)])


def _expanded(codes: array, starts: array, pool: bytes,
              null: int) -> tuple[array, bytearray, bytearray | None] | None:
    """Arrow's offsets, data and validity bytes of the cells ``pool[starts[code]:starts[code + 1]]``
    (``null``: the code of None, -1 if none); None past 2 GiB. Arrow's ``take`` did this before, and
    loading Arrow's compute library for it cost every decode ~10 ms of start-up."""
    n = len(codes)
    out = array("i", bytes(4 * (n + 1)))
    offsets = memoryview(out)
    code = memoryview(codes)
    start = memoryview(starts)
    # Offsets that go back, or past the pool, would move the copies below out of bounds (unchecked:
    # see the module's doc). Arrow's builder makes none; this is a guard, not a case.
    k = len(starts) - 1
    if k < 0 or start[0] != 0 or start[k] > len(pool):
        raise ValueError("text offsets outside their data")
    for i in range(k):
        if start[i + 1] < start[i]:
            raise ValueError("text offsets out of order")
    valid = None
    end = 0
    for i in range(n):
        c = code[i]
        end += start[c + 1] - start[c]
        if end > 2147483647:
            return None
        offsets[i + 1] = end
        if c == null:
            if valid is None:
                valid = bytearray(b"\x01") * n
            valid[i] = 0
    data = bytearray(end)
    dst = data
    src = pool
    for i in range(n):
        c = code[i]
        o = offsets[i]
        for j in range(start[c], start[c + 1]):
            dst[o] = src[j]
            o += 1
    return out, data, valid


def _steps(step: int, n: int) -> array:
    """Int32 offsets 0, step, 2 step ... n step: ``n`` cells of one text."""
    out = array("i", bytes(4 * (n + 1)))
    offsets = memoryview(out)
    for i in range(1, n + 1):
        offsets[i] = i * step
    return out


def _codes(values: list[Any], index: dict[Any, int]) -> array:
    """Each cell's position among the distinct values (added to ``index`` in order of appearance).

    A cell that is the very object of the cell before (a connection's rows carry its one id string,
    names come from one table) reuses its code without a lookup.
    """
    n = len(values)
    out = array("i", bytes(4 * n))
    codes = memoryview(out)
    last: Any = index            # no cell is this object
    code = 0
    for i in range(n):
        v = values[i]
        if v is not last:
            known = index.get(v)
            if known is None:
                known = len(index)
                index[v] = known
            code = known
            last = v
        codes[i] = code
    return out


def _text(cells: tuple[bytes | bytearray, list[int], bytearray], type_: pa.DataType) -> pa.Array:
    import pyarrow as pa
    data, ends, valid = cells
    n = len(ends)
    if ends and ends[-1] >= 1 << 31:
        raise pa.ArrowInvalid("a row group's text exceeds 2 GiB")
    large = pa.types.is_large_string(type_) or pa.types.is_large_binary(type_)
    offsets = array("q" if large else "i", bytes(8 if large else 4))
    offsets.extend(ends)
    return pa.Array.from_buffers(type_, n, [_validity(valid), pa.py_buffer(offsets), pa.py_buffer(data)])


def _repeated(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    """``n`` cells of ``value``: the value converted once, its bytes repeated."""
    import pyarrow as pa
    if value is None:
        return pa.nulls(n, type_)
    one = to_arrow([value], type_)
    if one.null_count:                 # numpy's path makes an int beyond int64 null
        return pa.nulls(n, type_)
    buffers = one.buffers()
    if pa.types.is_boolean(type_):
        bits = (b"\xff" if one[0].as_py() else b"\0") * ((n + 7) >> 3)
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(bits)])
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        bounds = array("i", buffers[1].to_pybytes()[:8])
        cell = buffers[2].to_pybytes()[bounds[0]:bounds[1]] if buffers[2] is not None else b""
        if n * len(cell) > 2147483647:
            raise pa.ArrowInvalid("a row group's text column exceeds 2 GiB")
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(_steps(len(cell), n)), pa.py_buffer(cell * n)])
    if pa.types.is_integer(type_) or pa.types.is_timestamp(type_):
        width = type_.bit_width >> 3
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(buffers[1].to_pybytes()[:width] * n)])
    return pa.array([value] * n, type=type_)


def _packed(cells: Any, type_: pa.DataType) -> pa.Array:
    """Typed cells (:data:`Packed`) as an array of ``type_``: their buffers as they are, the ints narrowed to
    the column's width."""
    import pyarrow as pa
    n, kind = cells.n, cells.kind
    valid = pa.py_buffer(cells.valid) if cells.valid is not None else None
    if kind == "text":
        return pa.Array.from_buffers(type_, n, [valid, pa.py_buffer(cells.offsets), pa.py_buffer(cells.data)])
    data = cells.data
    if kind == "int" and pa.types.is_integer(type_) and type_.bit_width != 64:
        data = cells.narrowed(type_.bit_width >> 3)
        if data is None:
            raise pa.ArrowInvalid(f"a value does not fit {type_}")      # as pa.array refuses it
    return pa.Array.from_buffers(type_, n, [valid, pa.py_buffer(data)])


def to_arrow(values: Any, type_: pa.DataType) -> pa.Array:
    """Cells taken from a column buffer (:func:`take`) as an Arrow array of ``type_``."""
    import pyarrow as pa
    if isinstance(values, tuple):
        return _text(values, type_)
    if Packed is not None and type(values) is Packed:
        return _packed(values, type_)
    n = len(values)
    # Many columns hold one value throughout a row group (the capture, a plaintext connection's
    # TLS columns, the topic of a single-topic producer): counting is a C loop over the list, a
    # few nanoseconds a cell, against ~50 for converting each. The last and middle cells turn
    # most other columns away before a count. Not floats: 0.0 == -0.0, yet they differ.
    if n > 1 and not pa.types.is_floating(type_):
        first = values[0]
        if values[-1] == first and values[n >> 1] == first and values.count(first) == n:
            return _repeated(first, n, type_)
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        return _strings(values, type_)
    if pa.types.is_boolean(type_):
        return _booleans(values, type_)
    if pa.types.is_timestamp(type_):
        return _integers(values, pa.int64()).view(type_)
    if type_ == pa.float64():
        return _floats(values, type_)
    if type_ in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        return _integers(values, type_)
    return pa.array(values, type=type_)
