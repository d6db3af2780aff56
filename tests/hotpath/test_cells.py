"""The typed column buffers (hotpath/_cells.pyx) against the lists they stand in for: the same cells in,
the same Arrow arrays out, whatever the cells (spilled ones included), after truncation and partial takes."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hotpath.cells import ListCells, Packed, new_cells
from kdissect.dataset.columns import take, to_arrow

compiled = pytest.mark.skipif(Packed is None, reason="the typed buffers exist only where kdissect runs compiled")

TS = pa.timestamp("us", tz="UTC")
KINDS = {"int": [pa.int8(), pa.int16(), pa.int32(), pa.int64(), TS], "float": [pa.float64()], "bool": [pa.bool_()],
         "text": [pa.string()]}


def arrow_of(col, k: int, type_: pa.DataType) -> pa.Array:
    return to_arrow(take(col, k), type_)


def fill(kind: str, values: list) -> tuple[object, list]:
    typed, plain = new_cells(kind), []
    for v in values:
        typed.append(v)
        plain.append(v)
    return typed, plain


def cells_of(kind: str, rng: random.Random, n: int) -> list:
    if kind == "int":
        pool = [None, 0, 1, -1, 127, -128, 32767, 2**31 - 1, -2**31, 2**62, -(2**63)]
        return [rng.choice(pool) if rng.random() < 0.5 else rng.randint(-100, 100) for _ in range(n)]
    if kind == "float":
        return [None if rng.random() < 0.2 else rng.uniform(-1e6, 1e6) for _ in range(n)]
    if kind == "bool":
        return [rng.choice([True, False, None]) for _ in range(n)]
    names = ["", "produce", "fetch", "é-topic", "127.0.0.1:9092", "a" * 300]
    return [None if rng.random() < 0.2 else rng.choice(names) + ("" if rng.random() < 0.5 else str(rng.randint(0, 9)))
            for _ in range(n)]


@compiled
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_same_arrays_as_lists(kind: str) -> None:
    rng = random.Random(kind)
    for type_ in KINDS[kind]:
        values = cells_of(kind, rng, 3000)
        if type_ in (pa.int8(), pa.int16(), pa.int32()):
            values = [v if v is None or -100 <= v <= 100 else 7 for v in values]
        typed, plain = fill(kind, values)
        assert len(typed) == len(plain) and typed[:] == plain and typed[5] == plain[5] and typed[-1] == plain[-1]
        # A partial take, more cells, a failed exchange's rows taken back, then everything.
        assert arrow_of(typed, 1000, type_).equals(arrow_of(plain, 1000, type_))
        for v in cells_of(kind, rng, 500):
            if type_ in (pa.int8(), pa.int16(), pa.int32()) and v is not None:
                v = 3
            typed.append(v)
            plain.append(v)
        typed.truncate(len(typed) - 7)
        del plain[len(plain) - 7:]
        assert typed[:] == plain
        assert arrow_of(typed, len(typed), type_).equals(arrow_of(plain, len(plain), type_))
        assert len(typed) == 0
        typed.append(values[0])         # emptied, it takes cells again
        assert typed[:] == [values[0]]


@compiled
@pytest.mark.parametrize(("kind", "type_", "odd"), [
    ("int", pa.int64(), 2**70),             # past int64: numpy's path nulls it
    ("int", pa.int64(), True),              # a bool among ints
    ("int", pa.float64(), 1.5),
    ("float", pa.float64(), 3),             # an int among floats
    ("bool", pa.bool_(), 1),
    ("text", pa.string(), b"bytes"),
    ("text", pa.string(), "\ud800"),        # a lone surrogate: Arrow refuses it, as it refuses the list's
])
def test_a_cell_the_buffer_is_not_made_for_spills_and_converts_as_a_list(kind: str, type_: pa.DataType,
                                                                        odd: object) -> None:
    values = cells_of(kind, random.Random(1), 50)
    values[20] = odd
    typed, plain = fill(kind, values)
    assert typed[:] == plain and len(typed) == 50
    try:
        expected = arrow_of(plain, 30, type_)
    except (pa.ArrowException, UnicodeEncodeError) as exc:
        with pytest.raises(type(exc)):
            arrow_of(typed, 30, type_)
        return
    assert arrow_of(typed, 30, type_).equals(expected)
    assert arrow_of(typed, 20, type_).equals(arrow_of(plain, 20, type_))


@compiled
def test_a_value_past_a_narrow_column_fails_as_the_list_does_and_gives_its_cells_back() -> None:
    typed, plain = fill("int", [1, None, 40000, 2])
    with pytest.raises(pa.ArrowInvalid):
        arrow_of(plain, 4, pa.int16())
    packed = take(typed, 4)
    with pytest.raises(pa.ArrowInvalid):
        to_arrow(packed, pa.int16())
    assert packed.tolist() == [1, None, 40000, 2]


@compiled
def test_text_cells_come_back_as_they_went_in() -> None:
    values = ["a", None, "é", "a", "", None, "b" * 70]
    typed, _ = fill("text", values)
    packed = take(typed, len(values))
    assert packed.tolist() == values
    assert to_arrow(packed, pa.string()).to_pylist() == values


def test_lists_stand_in_where_kdissect_runs_as_python() -> None:
    cells = ListCells()
    cells.add(1)
    cells.append(None)
    assert cells == [1, None] and to_arrow(take(cells, 2), pa.int32()).to_pylist() == [1, None]
