"""The analysis' copy of the dataset schema agrees with the one the writer uses.

`analysis` reads Parquet and never imports kdissect, so it states the columns it relies on itself
(`analysis/dataset.py`), and its tests build their frames from that copy. This test is where the two
meet: every column the analysis reads is written, under a type Spark reads it as without loss.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from analysis import dataset
import kdissect

# Spark type the analysis declares -> the Arrow types the writer may use for it (Parquet widens integers).
READS_AS = {
    T.StringType: {pa.string()},
    T.BinaryType: {pa.binary()},
    T.BooleanType: {pa.bool_()},
    T.ShortType: {pa.int8(), pa.int16()},
    T.IntegerType: {pa.int8(), pa.int16(), pa.int32()},
    T.LongType: {pa.int8(), pa.int16(), pa.int32(), pa.int64()},
    T.DoubleType: {pa.float64()},
    T.TimestampType: {pa.timestamp("us", tz="UTC")},
}


@pytest.mark.parametrize("table", ["exchanges", "partitions", "anomalies", "records"])
def test_every_column_the_analysis_reads_is_written_as_a_type_it_reads(table: str) -> None:
    written = kdissect.SCHEMAS[table]
    assert table in dataset.SCHEMAS, f"the analysis does not know table {table}"
    for field in dataset.SCHEMAS[table].fields:
        assert field.name in written.names, f"{table}.{field.name}: the analysis reads a column nobody writes"
        arrow_type = written.field(field.name).type
        assert arrow_type in READS_AS[type(field.dataType)], (
            f"{table}.{field.name}: written as {arrow_type}, read as {field.dataType.simpleString()}")


def test_the_analysis_requires_the_tables_every_decode_writes() -> None:
    assert set(dataset.REQUIRED) | set(dataset.OPTIONAL) == set(kdissect.SCHEMAS)
