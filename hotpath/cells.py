"""Column buffers for the dataset's row builders: typed C buffers (``_cells.pyx``) when kdissect runs
compiled, plain lists when it runs as Python (``hotpath.runs_as_python``), chosen here for everyone.

Both hold the same cells and give the same Arrow arrays (``kdissect.dataset.columns.to_arrow``);
compiled row builders cimport the typed classes and append to them in C.
"""
from __future__ import annotations

from typing import Any

from hotpath import switched_to_python

Packed: Any = None
if not switched_to_python():
    try:
        from hotpath._cells import BoolCells, FloatCells, IntCells, Packed, TextCells  # type: ignore
    except ImportError:         # not compiled (no compiler at install)
        pass



class ListCells(list):
    """A list with the typed buffers' ``add`` (their ``append`` inlined into compiled row builders), so that
    rows.py is one source for both builds."""

    __slots__ = ()
    add = list.append


_TYPED = {} if Packed is None else {"int": IntCells, "float": FloatCells, "bool": BoolCells, "text": TextCells}


def new_cells(kind: str) -> Any:
    """An empty buffer for cells of ``kind`` ("int", "float", "bool" or "text"): typed where kdissect runs
    compiled, else a :class:`ListCells`; a plain list for any other kind."""
    made = _TYPED.get(kind)
    if made is not None:
        return made()
    return ListCells() if kind in ("int", "float", "bool", "text") else []


__all__ = ["ListCells", "Packed", "new_cells"]
