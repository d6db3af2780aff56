"""Column buffers -> Arrow: the same arrays ``pyarrow.array`` makes, without importing pandas."""

from __future__ import annotations

import subprocess
import sys
import weakref
from pathlib import Path

import pyarrow as pa
import pytest

from kdissect.dataset import columns
from hotpath import is_compiled
from hotpath.speedups import reserve_list
from kdissect.dataset.columns import TextColumn, take, to_arrow

REPO = Path(__file__).resolve().parents[3]
TS = pa.timestamp("us", tz="UTC")

CASES = [
    ([1795462398926000, None, 0, -5], TS),
    ([1, None, -32768, 32767], pa.int16()),
    ([0, 2, -128, 127], pa.int8()),
    ([None, None], pa.int32()),
    ([1 << 40, None], pa.int64()),
    ([-(1 << 63), None, (1 << 63) - 1, 0], pa.int64()),      # int64's ends, with a gap
    ([None, 5, -1], pa.int32()),                              # the gap first
    ([0.25, None, float("nan"), 1e300], pa.float64()),
    ([True, False, True], pa.bool_()),
    (["a", None, "é漢", ""], pa.string()),
    ([b"\x00\xff", None, b""], pa.binary()),
    ([], pa.string()),
    ([], pa.int64()),
    # One value throughout (converted once and repeated), all null, and more distinct texts than
    # one byte can number.
    (["capture.pcap"] * 5, pa.string()),
    ([None] * 4, pa.string()),
    ([None] * 3, TS),
    ([7] * 3, pa.int16()),
    ([1 << 20] * 2, pa.int64()),
    ([False] * 3, pa.bool_()),
    ([0.5] * 2, pa.float64()),
    ([0.0, -0.0, 0.0], pa.float64()),
    # Each narrow width at its ends; texts repeated, empty, non-ASCII, null among repeats.
    ([-128, 127, None, 0], pa.int8()),
    ([-(1 << 31), (1 << 31) - 1, None], pa.int32()),
    ([-(1 << 31)] * 3, pa.int32()),
    (["", "", ""], pa.string()),
    (["é漢"] * 3, pa.string()),
    (["a", None, "a", "bb", None, "", "a"], pa.string()),
    ([True] * 9, pa.bool_()),
    ([f"topic-{i % 300}" for i in range(700)] + [None], pa.string()),
    # Filled without numpy: validity bits across byte boundaries, ints among floats, nulls among bools.
    ([None if i % 3 == 0 else i - 9 for i in range(19)], pa.int32()),
    ([1, None, 2.5, 1 << 40, -0.0], pa.float64()),
    ([True, None, False, True, None, None, True, False, True], pa.bool_()),
    ([True] * 9 + [False], pa.bool_()),
]


@pytest.mark.parametrize("values,type_", CASES, ids=[f"{t}-{i}" for i, (_, t) in enumerate(CASES)])
def test_lists_become_the_arrays_pyarrow_makes(values: list, type_: pa.DataType) -> None:
    col = list(values)
    got = to_arrow(take(col, len(col)), type_)
    got.validate(full=True)
    expected = pa.array(values, type=type_)
    assert got.type == expected.type and col == []
    assert repr(got.to_pylist()) == repr(expected.to_pylist())     # repr: NaN equals NaN
    assert got.null_count == expected.null_count


def test_out_of_range_values_are_refused_as_pyarrow_refuses_them() -> None:
    with pytest.raises(pa.ArrowInvalid):
        to_arrow([1 << 20], pa.int16())
    with pytest.raises(pa.ArrowInvalid):
        to_arrow([1 << 20] * 3, pa.int16())
    with pytest.raises(pa.ArrowInvalid):
        to_arrow([5, None, -129], pa.int8())
    with pytest.raises(pa.ArrowInvalid):
        to_arrow([0, 1 << 31], pa.int32())


def test_values_no_row_builder_writes_go_through_numpy_as_before() -> None:
    # A bool or a float in an int column, an int beyond int64 (null, not a lost file), a truthy
    # non-bool in a bool column: numpy's conversions, which the packers leave to it.
    assert to_arrow([1, True, None, 2.0], pa.int64()).to_pylist() == [1, 1, None, 2]
    assert to_arrow([1 << 64, 5, None], pa.int64()).to_pylist() == [None, 5, None]
    assert to_arrow([1, 0, None, "x"], pa.bool_()).to_pylist() == [True, False, None, True]
    assert to_arrow([True, None], pa.int16()).to_pylist() == [1, None]


def test_the_decode_command_writes_the_dataset_without_numpy(tmp_path: Path) -> None:
    # pyarrow imports numpy (~80 ms) unless the command's own process hides it; the dataset is the
    # same, numpy stays importable afterwards, and pyarrow works beside it.
    code = """
import sys
from kdissect.commands.cli import main
assert main(["decode", "-q", "-o", sys.argv[2], sys.argv[1]], own_process=True) == 0
assert "pyarrow" in sys.modules and "numpy" not in sys.modules, "numpy imported by the decode command"
# Nor Arrow's compute library, nor pyarrow.parquet's filesystems and ssl: ~20 ms of start-up.
assert not {"pyarrow._compute", "pyarrow.fs", "ssl"} & set(sys.modules), "start-up regained an import"
import pyarrow as pa
from kdissect.dataset.columns import to_arrow
assert to_arrow([1, True, None], pa.int64()).to_pylist() == [1, 1, None]     # numpy's path, after
assert "numpy" in sys.modules
import pyarrow.parquet as pq
print(pq.read_table(sys.argv[2] + "/exchanges").num_rows)
"""
    lean = subprocess.run([sys.executable, "-c", code, str(REPO / "samples" / "mixed.pcap"), str(tmp_path / "a")],
                          check=True, cwd=REPO, capture_output=True, text=True).stdout
    from kdissect.commands.cli import main
    assert main(["decode", "-q", "-o", str(tmp_path / "b"), str(REPO / "samples" / "mixed.pcap")]) == 0
    import pyarrow.parquet as pq
    for table in ("exchanges", "partitions", "anomalies"):
        assert pq.read_table(tmp_path / "a" / table).equals(pq.read_table(tmp_path / "b" / table))
    assert int(lean) > 0


def test_a_process_not_claimed_gets_pyarrow_with_numpy() -> None:
    code = """
import sys
from kdissect.dataset.arrow import import_pyarrow
import_pyarrow()
assert "numpy" in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_text_cells_taken_in_two_parts() -> None:
    col = TextColumn()
    cells = [b'{"a":1}', None, "é".encode(), b"", b'{"b":[2]}']
    for c in cells:
        col.append(c)
    first = to_arrow(col.take(2), pa.string())
    assert len(col) == 3
    rest = to_arrow(col.take(3), pa.string())
    for arr in (first, rest):
        arr.validate(full=True)
    assert first.to_pylist() + rest.to_pylist() == [c.decode() if c is not None else None for c in cells]
    assert len(col) == 0 and to_arrow(col.take(0), pa.string()).to_pylist() == []


def test_text_offsets_that_would_move_the_unchecked_copies_out_of_bounds_are_refused() -> None:
    from array import array
    codes = array("i", [0, 1, 0])
    assert columns._expanded(codes, array("i", [0, 2, 3]), b"abc", -1)[:2] == (array("i", [0, 2, 3, 5]),
                                                                               bytearray(b"abcab"))
    for starts, pool in ((array("i", [0, 5]), b"ab"), (array("i", [0, 3, 1]), b"abc"), (array("i", [1, 2]), b"ab")):
        with pytest.raises(ValueError):
            columns._expanded(array("i", [0]), starts, pool, -1)


class _Cell:
    pass


def test_a_column_list_keeps_its_memory_from_one_row_group_to_the_next() -> None:
    col: list = []
    reserve_list(col, 1000)
    size = sys.getsizeof(col)
    if is_compiled(columns):
        assert size >= sys.getsizeof([None] * 1000)
    cells = [_Cell() for _ in range(1000)]
    alive = [weakref.ref(c) for c in cells]
    col.extend(cells)
    if is_compiled(columns):
        assert sys.getsizeof(col) == size              # no growth on the way to a row group
    del cells
    taken = take(col, 1000)
    assert len(taken) == 1000 and col == []
    assert sys.getsizeof(col) == (size if is_compiled(columns) else sys.getsizeof([]))
    del taken                                          # the emptied list holds no cell
    assert not any(r() for r in alive)
    col.append(5)
    assert col == [5] and take(col, 1) == [5]
    text = TextColumn()
    reserve_list(text.ends, 10)
    for _ in range(10):
        text.append(b"ab")
    data, ends, valid = text.take(10)
    assert (bytes(data), ends, bytes(valid)) == (b"ab" * 10, list(range(2, 22, 2)), b"\x01" * 10)
    assert len(text) == 0
    text.append(None)
    assert text.take(1)[1:] == ([0], bytearray(b"\x00"))


def test_a_decode_imports_neither_pandas_nor_pyarrow_before_its_first_row_group(tmp_path: Path) -> None:
    # Start-up is most of a small capture's decode: what it does not need, it does not import.
    code = """
import sys
from kdissect.commands.parser import build_parser
from kdissect.run.decode import decode_files
from kdissect.run.source import DecodeOptions, open_capture_run
run = open_capture_run(sys.argv[1], DecodeOptions())
next(iter(run))
assert "pyarrow" not in sys.modules and "pandas" not in sys.modules, "imported before the first packet"
run.close()
decode_files([sys.argv[1]], sys.argv[2], DecodeOptions())
assert "pandas" not in sys.modules, "pandas imported by a decode"
assert "pyarrow.compute" not in sys.modules, "pyarrow.compute's wrappers imported by a decode"
assert "cryptography" not in sys.modules, "cryptography imported for a capture without TLS"
assert "capture.tls.session" not in sys.modules, "the TLS layer loaded for a capture without TLS"
from kdissect.commands.cli import main
assert main(["decode", "-q", "-o", sys.argv[2], sys.argv[1]]) == 0   # the command, default --jobs
# Asked for by crc32c's package import and by --version; read by neither a decode nor its command line.
assert "importlib.metadata" not in sys.modules, "package metadata read by a decode"
assert "multiprocessing" not in sys.modules, "multiprocessing imported for a capture not split among workers"
"""
    subprocess.run([sys.executable, "-c", code, str(REPO / "samples" / "mixed.pcap"), str(tmp_path)], check=True,
                   cwd=REPO)
