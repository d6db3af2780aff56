"""The kdissect dataset's tables, read with explicit schemas.

``kdissect decode`` writes ``OUTDIR/{exchanges,partitions,anomalies,records}`` as
Parquet directories (timestamps UTC, microseconds). Declaring the schema here
spares Spark a footer scan per file and pins the types the jobs rely on;
integer columns are declared at least as wide as the writer's, which Spark's
Parquet reader widens to, and a column the writer left out reads as null.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, typ, True) for name, typ in fields])  # type: ignore[arg-type]


EXCHANGES = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("client_ip", StringType()),
    ("client_port", IntegerType()),
    ("broker_ip", StringType()),
    ("broker_port", IntegerType()),
    ("api_key", IntegerType()),
    ("api_name", StringType()),
    ("api_version", IntegerType()),
    ("protocol", StringType()),
    ("correlation_id", IntegerType()),
    ("client_id", StringType()),
    ("request_ts", TimestampType()),
    ("response_ts", TimestampType()),
    ("latency_ms", DoubleType()),
    ("request_bytes", LongType()),
    ("response_bytes", LongType()),
    ("error_code", IntegerType()),
    ("error_name", StringType()),
    ("throttle_ms", IntegerType()),
    ("status", StringType()),
    ("decode_error", StringType()),
    ("request", StringType()),
    ("response", StringType()),
    ("inferred", BooleanType()),
)

PARTITIONS = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("correlation_id", IntegerType()),
    ("api_key", IntegerType()),
    ("api_name", StringType()),
    ("api_version", IntegerType()),
    ("direction", StringType()),
    ("ts", TimestampType()),
    ("topic", StringType()),
    ("topic_id", StringType()),
    ("partition", IntegerType()),
    ("error_code", IntegerType()),
    ("error_name", StringType()),
    ("record_count", LongType()),
    ("batch_count", LongType()),
    ("bytes", LongType()),
    ("base_offset", LongType()),
    ("last_offset", LongType()),
    ("high_watermark", LongType()),
    ("compression", StringType()),
)

ANOMALIES = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("ts", TimestampType()),
    ("kind", StringType()),
    ("direction", StringType()),
    ("detail", StringType()),
)

RECORDS = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("correlation_id", IntegerType()),
    ("api_key", IntegerType()),
    ("direction", StringType()),
    ("ts", TimestampType()),
    ("topic", StringType()),
    ("topic_id", StringType()),
    ("partition", IntegerType()),
    ("offset", LongType()),
    ("timestamp", TimestampType()),
    ("key_size", IntegerType()),
    ("value_size", IntegerType()),
    ("header_count", IntegerType()),
    ("producer_id", LongType()),
    ("transactional", BooleanType()),
    ("control", BooleanType()),
)

SCHEMAS: dict[str, StructType] = {
    "exchanges": EXCHANGES,
    "partitions": PARTITIONS,
    "anomalies": ANOMALIES,
    "records": RECORDS,
}


# Written only on request (``kdissect decode --records``): absent reads as empty.
OPTIONAL = frozenset({"records"})


def read_table(spark: SparkSession, dataset: str, name: str) -> DataFrame:
    """One table of the dataset; FileNotFoundError if a required table is missing."""
    schema = SCHEMAS[name]
    path = dataset.rstrip("/") + "/" + name
    # Only a local path can be checked cheaply; remote stores (s3a://, hdfs://) are read as given.
    if "://" not in dataset and not os.path.isdir(path):
        if name in OPTIONAL:
            return spark.createDataFrame([], schema)
        raise FileNotFoundError(f"{path}: no such directory; is {dataset} a dataset written by kdissect decode?")
    return spark.read.schema(schema).parquet(path)


def read_exchanges(spark: SparkSession, dataset: str) -> DataFrame:
    return read_table(spark, dataset, "exchanges")


def read_partitions(spark: SparkSession, dataset: str) -> DataFrame:
    return read_table(spark, dataset, "partitions")


def read_anomalies(spark: SparkSession, dataset: str) -> DataFrame:
    return read_table(spark, dataset, "anomalies")


def read_records(spark: SparkSession, dataset: str) -> DataFrame:
    return read_table(spark, dataset, "records")
