"""Column buffers (plain Python lists) -> Arrow arrays, one row group at a time.

Rows are appended cell by cell to one list per column (no dict per row), and
each list becomes an Arrow array here when a row group is flushed. This goes
through numpy and Arrow's builders rather than ``pyarrow.array(list)``: that
function asks pandas whether a list is "array-like" and so imports pandas, a
second or more of start-up that a decode never otherwise needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyarrow.lib import StringBuilder

_NUMPY: dict[pa.DataType, Any] = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.float64(): np.float64,
}


def _objects(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values            # slice assignment keeps each value a scalar cell
    return arr


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _integers(values: list[Any], type_: pa.DataType, dtype: Any) -> pa.Array:
    objs = _objects(values)
    missing = objs == None  # noqa: E711 - elementwise on an object array
    if missing.any():
        objs[missing] = 0
    wide = objs.astype(np.int64) if dtype is not np.float64 else objs.astype(np.float64)
    if dtype is not np.int64 and dtype is not np.float64:
        info = np.iinfo(dtype)
        if len(wide) and (wide.min() < info.min or wide.max() > info.max):
            raise pa.ArrowInvalid(f"a value does not fit {type_}")
        wide = wide.astype(dtype)
    return pa.Array.from_buffers(type_, len(values), [_validity(~missing), pa.py_buffer(wide)])


def _booleans(values: list[Any], type_: pa.DataType) -> pa.Array:
    objs = _objects(values)
    missing = objs == None  # noqa: E711
    if missing.any():
        objs[missing] = False
    bits = np.packbits(objs.astype(bool), bitorder="little")
    return pa.Array.from_buffers(type_, len(values), [_validity(~missing), pa.py_buffer(bits)])


def _strings(values: list[Any], type_: pa.DataType) -> pa.Array:
    # str and bytes alike (JSON bodies arrive as orjson's UTF-8 bytes); None is null.
    b = StringBuilder()
    b.append_values(values)
    arr = b.finish()
    return arr if type_ == pa.string() else arr.view(type_)


def to_arrow(values: list[Any], type_: pa.DataType) -> pa.Array:
    """``values`` (Python scalars or None) as an Arrow array of ``type_``."""
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        return _strings(values, type_)
    if pa.types.is_boolean(type_):
        return _booleans(values, type_)
    if pa.types.is_timestamp(type_):
        return _integers(values, pa.int64(), np.int64).view(type_)
    dtype = _NUMPY.get(type_)
    if dtype is None:
        return pa.array(values, type=type_)
    return _integers(values, type_, dtype)
