"""Inventory: the capture at a glance, who the clients are, which protocol versions they speak, anomalies.

``clients``: per client id, the software it announced (ApiVersions v3+
``client_software_name``/``_version``, when the capture saw a connection
start), its connections and apis, and how many of its exchanges were paired
(request and response), unpaired (a request without response) or orphans (a
response whose request was not captured, attributed through the connection).
``api_versions``: per client, api and version, with the highest version the
broker offered that client in its ApiVersions response on the same connections;
``outdated`` where the client used less.

Tables: ``summary`` (one row), ``clients``, ``api_versions``, ``anomalies_by_kind``.

Usage::

    python -m analysis inventory DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/inventory.py DATASET [--out DIR]
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis import derived, facts, frames, runner
from analysis.dataset import Dataset
from analysis.options import Options

CONNECTION = ["capture", "connection"]


def summary(exchanges: DataFrame, anomalies: DataFrame, rowless: int | None = None) -> DataFrame:
    """One row: capture span, captures, connections, clients, brokers, exchanges, errors, bytes, anomalies.

    ``captures`` counts them as decode does: those with a row (an exchange, or anomalies only: a TLS capture
    without its keys), plus ``rowless`` (:func:`rowless_captures`), whose files hold no row at all. Those
    without an exchange are counted apart (``captures_without_exchanges``, the kinds of their anomalies),
    so a dataset that holds more captures than the exchanges show says why."""
    ts = frames.exchange_ts()
    # A connection counts when the dataset holds a row of it, an exchange or an anomaly (a TLS connection
    # without its keys has only the latter), in its capture: as decode's summary counts them.
    conns = (exchanges.select(*CONNECTION)
             .unionByName(anomalies.where(F.col("connection").isNotNull()).select(*CONNECTION))
             .distinct().agg(F.count(F.lit(1)).alias("connections")))
    ex = exchanges.agg(
        F.min(ts).alias("first_ts"), F.max(ts).alias("last_ts"),
        F.countDistinct("client_id").alias("clients"),
        F.countDistinct(derived.broker()).alias("brokers"),
        F.count(F.lit(1)).alias("exchanges"),
        F.sum(frames.failed().cast("long")).alias("errors"),
        F.sum(F.coalesce("request_bytes", F.lit(0)) + F.coalesce("response_bytes", F.lit(0))).alias("bytes"))
    an = anomalies.agg(F.count(F.lit(1)).alias("anomalies"))
    empty = F.lit(rowless).cast("long")
    return (ex.crossJoin(conns).crossJoin(an).crossJoin(_captures(exchanges, anomalies))
            .withColumn("duration_s", frames.millis_between("first_ts", "last_ts") / 1000.0)
            .select("first_ts", "last_ts", "duration_s",
                    (F.col("with_rows") + F.coalesce(empty, F.lit(0))).alias("captures"),
                    "connections", "clients", "brokers", "exchanges", "errors", "bytes", "anomalies",
                    (F.col("anomalies_only") + F.coalesce(empty, F.lit(0))).alias("captures_without_exchanges"),
                    empty.alias("captures_without_rows"), "anomalies_without_exchanges"))


def _captures(exchanges: DataFrame, anomalies: DataFrame) -> DataFrame:
    """One row: ``with_rows``, the captures with an exchange or an anomaly; ``anomalies_only``, those with
    anomalies and no exchange; ``anomalies_without_exchanges``, the kinds of those anomalies, sorted."""
    with_exchanges = exchanges.select("capture").distinct()
    only = anomalies.select("capture", "kind").join(with_exchanges, "capture", "left_anti")
    rows = (with_exchanges.unionByName(anomalies.select("capture")).distinct()
            .agg(F.count(F.lit(1)).alias("with_rows")))
    return rows.crossJoin(only.agg(F.countDistinct("capture").alias("anomalies_only"),
                                   F.array_sort(F.collect_set("kind")).alias("anomalies_without_exchanges")))


# A capture decoded in shares (decode --jobs) writes <name>-<k>of<n>.parquet per share (kdissect's writer).
_SHARE = re.compile(r"-\d+of\d+$")


def rowless_captures(paths: Sequence[str]) -> int | None:
    """How many captures of the local datasets at ``paths`` have files with no row in any table: decode read
    them and found no Kafka connection (no anomaly either), so no query sees them. Counted by their file
    names in ``exchanges/`` and ``anomalies/`` (a capture's shares are one); None when a dataset is not a
    local directory (its files are Spark's to list)."""
    import pyarrow.parquet as pq
    if any("://" in p for p in paths):
        return None
    rows: dict[str, int] = {}
    for path in paths:
        for table in ("exchanges", "anomalies"):
            directory = os.path.join(path, table)
            for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
                if not name.endswith(".parquet") or name.startswith((".", "_")):
                    continue
                capture = os.path.join(path, _SHARE.sub("", name.removesuffix(".parquet")))
                if rows.get(capture, 0) == 0:     # a capture with rows needs no more footers read
                    rows[capture] = pq.read_metadata(os.path.join(directory, name)).num_rows
    return sum(1 for n in rows.values() if n == 0)


def with_connection_client(exchanges: DataFrame) -> DataFrame:
    """``client_id`` filled in for orphan responses from the other exchanges of their connection."""
    known = F.max("client_id").over(Window.partitionBy(*CONNECTION))
    return exchanges.withColumn("client_id", F.coalesce(F.col("client_id"), known))


def client_software(exchanges: DataFrame) -> DataFrame:
    """(capture, connection, name, version) from ApiVersions v3+ requests."""
    name = F.col("req_client_software_name")
    version = F.col("req_client_software_version")
    return (facts.typed(exchanges).where(derived.api(frames.API_VERSIONS) & name.isNotNull())
            .groupBy(*CONNECTION).agg(F.max(name).alias("client_software_name"),
                                      F.max(version).alias("client_software_version")))


def clients(exchanges: DataFrame) -> DataFrame:
    # Per connection, client id and api first (a few rows however many exchanges): the connection's client
    # for its orphans (a window, which sorts its input), the software and the distinct counts then read those.
    api = F.when(F.col("request_ts").isNotNull(),
                 F.concat(F.col("api_name"), F.lit(" v"), F.col("api_version").cast("string")))
    per = (exchanges.groupBy(*CONNECTION, "client_id", api.alias("api"))
           .agg(F.sum((F.col("request_ts").isNotNull() & F.col("response_ts").isNotNull()).cast("long"))
                 .alias("paired"),
                F.sum((F.col("status") == "no_response").cast("long")).alias("unpaired"),
                F.sum((F.col("status") == "orphan_response").cast("long")).alias("orphans"),
                F.count(F.lit(1)).alias("exchanges")))
    software = client_software(exchanges)
    return (with_connection_client(per).join(software, CONNECTION, "left").groupBy("client_id")
            .agg(F.max("client_software_name").alias("client_software_name"),
                 F.max("client_software_version").alias("client_software_version"),
                 F.countDistinct(*CONNECTION).alias("connections"),
                 F.array_join(F.array_sort(F.collect_set("api")), ", ").alias("apis"),
                 F.sum("paired").alias("paired"), F.sum("unpaired").alias("unpaired"),
                 F.sum("orphans").alias("orphans"), F.sum("exchanges").alias("exchanges")))


def broker_offers(exchanges: DataFrame) -> DataFrame:
    """(capture, connection, api_key, broker_max_version) from ApiVersions responses."""
    return (facts.typed(exchanges).where(derived.api(frames.API_VERSIONS) & F.col("has_response"))
            .select(*CONNECTION, F.explode("resp_api_keys").alias("k"))
            .groupBy(*CONNECTION, F.col("k.api_key").alias("api_key"))
            .agg(F.max("k.max_version").alias("broker_max_version")))


def api_versions(exchanges: DataFrame) -> DataFrame:
    """Per client, api and version of requests actually seen; what the broker offered; outdated or not."""
    seen = exchanges.where(F.col("request_ts").isNotNull() & ~F.coalesce(F.col("inferred"), F.lit(False))
                           & F.col("api_key").isNotNull())
    # Counted per connection first: the join with what the broker offered on each connection then reads a
    # few rows, not every request.
    per = seen.groupBy(*CONNECTION, "client_id", "api_key", "api_name", "api_version").agg(
        F.count(F.lit(1)).alias("n"))
    return (per.join(broker_offers(exchanges), [*CONNECTION, "api_key"], "left")
            .groupBy("client_id", "api_key", "api_name", "api_version")
            .agg(F.max("broker_max_version").alias("broker_max_version"), F.sum("n").alias("count"))
            .withColumn("outdated", F.col("api_version") < F.col("broker_max_version"))
            .select("client_id", "api_name", "api_key", "api_version", "broker_max_version", "outdated", "count"))


def anomalies_by_kind(anomalies: DataFrame) -> DataFrame:
    return anomalies.groupBy("kind").agg(F.count(F.lit(1)).alias("count"), F.min("ts").alias("first_ts"),
                                         F.max("ts").alias("last_ts"),
                                         F.countDistinct("capture").alias("captures"))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    return {
        "summary": summary(ds.exchanges, ds.anomalies, rowless_captures(ds.paths)),
        "clients": frames.ordered(clients(ds.exchanges), F.col("exchanges").desc(), "client_id"),
        "api_versions": frames.ordered(api_versions(ds.exchanges), F.col("outdated").desc_nulls_last(), "client_id",
                                       "api_key", "api_version"),
        "anomalies_by_kind": frames.ordered(anomalies_by_kind(ds.anomalies), F.col("count").desc(), "kind"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("inventory", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
