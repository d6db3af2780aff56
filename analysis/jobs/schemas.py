"""Schemas by topic: which schemas (or unframed formats) each topic's keys and values carry, and who wrote them.

From the records table (``kdissect decode --records``; empty without it): one row per capture, topic,
side (``key`` or ``value``), schema id / GUID and format, with the client ids of the Produce requests
that carried such records, the records (produced and fetched) and when they were first and last seen.
Unframed keys and values have no schema id: their row is their format (``json-text``, ``text``,
``binary``); framed ones whose schema was not known have an id and no format.

Tables: ``schemas_by_topic``.

Usage::

    python -m analysis schemas DATASET... [--master local[*]] [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import derived, frames, runner
from analysis.dataset import Dataset
from analysis.jobs import needs
from analysis.options import Options

SCHEMAS_BY_TOPIC = ["capture", "topic", "side", "schema_id", "schema_guid", "format", "producer_client_ids",
                    "records", "produced", "first_ts", "last_ts"]


def sides(records: DataFrame) -> DataFrame:
    """One row per record key and per record value that is not null: side, schema id, GUID, format."""
    cols = ["capture", "connection", "correlation_id", "api_key", "direction", "ts", "topic"]
    key = records.where(F.col("key_size").isNotNull()).select(
        *cols, F.lit("key").alias("side"), F.col("key_schema_id").alias("schema_id"),
        F.col("key_schema_guid").alias("schema_guid"), F.col("key_format").alias("format"))
    value = records.where(F.col("value_size").isNotNull()).select(
        *cols, F.lit("value").alias("side"), F.col("value_schema_id").alias("schema_id"),
        F.col("value_schema_guid").alias("schema_guid"), F.col("value_format").alias("format"))
    return key.unionByName(value)


def schemas_by_topic(records: DataFrame, exchanges: DataFrame) -> DataFrame:
    clients = exchanges.select(*frames.KEYS, "client_id")
    produced = (F.col("direction") == "request") & derived.api(frames.PRODUCE)
    s = sides(records).join(clients, frames.KEYS, "left")
    return (s.groupBy("capture", "topic", "side", "schema_id", "schema_guid", "format")
            .agg(F.sort_array(F.collect_set(F.when(produced, F.col("client_id")))).alias("producer_client_ids"),
                 F.count(F.lit(1)).alias("records"), F.count(F.when(produced, 1)).alias("produced"),
                 F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
            .select(*SCHEMAS_BY_TOPIC)
            .orderBy("capture", "topic", "side", "schema_id", "schema_guid", "format"))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    return {"schemas_by_topic": needs(opts, schemas_by_topic(ds.records, ds.exchanges), records=True)}


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("schemas", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
