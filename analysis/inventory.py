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
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/inventory.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis import facts, frames, runner
from analysis.dataset import Dataset
from analysis.options import Options

CONNECTION = ["capture", "connection"]


def summary(exchanges: DataFrame, anomalies: DataFrame) -> DataFrame:
    """One row: capture span, captures, connections, clients, brokers, exchanges, errors, bytes, anomalies."""
    ts = frames.exchange_ts()
    # A connection counts when the dataset holds a row of it, an exchange or an anomaly (a TLS connection
    # without its keys has only the latter), in its capture: as decode's summary counts them.
    conns = (exchanges.select(*CONNECTION)
             .unionByName(anomalies.where(F.col("connection").isNotNull()).select(*CONNECTION))
             .distinct().agg(F.count(F.lit(1)).alias("connections")))
    ex = exchanges.agg(
        F.min(ts).alias("first_ts"), F.max(ts).alias("last_ts"),
        F.countDistinct("capture").alias("captures"),
        F.countDistinct("client_id").alias("clients"),
        F.countDistinct(frames.broker()).alias("brokers"),
        F.count(F.lit(1)).alias("exchanges"),
        F.sum(frames.failed().cast("long")).alias("errors"),
        F.sum(F.coalesce("request_bytes", F.lit(0)) + F.coalesce("response_bytes", F.lit(0))).alias("bytes"))
    an = anomalies.agg(F.count(F.lit(1)).alias("anomalies"))
    return (ex.crossJoin(conns).crossJoin(an)
            .withColumn("duration_s", frames.millis_between("first_ts", "last_ts") / 1000.0)
            .select("first_ts", "last_ts", "duration_s", "captures", "connections", "clients", "brokers",
                    "exchanges", "errors", "bytes", "anomalies"))


def with_connection_client(exchanges: DataFrame) -> DataFrame:
    """``client_id`` filled in for orphan responses from the other exchanges of their connection."""
    known = F.max("client_id").over(Window.partitionBy(*CONNECTION))
    return exchanges.withColumn("client_id", F.coalesce(F.col("client_id"), known))


def client_software(exchanges: DataFrame) -> DataFrame:
    """(capture, connection, name, version) from ApiVersions v3+ requests."""
    name = F.col("req_client_software_name")
    version = F.col("req_client_software_version")
    return (facts.typed(exchanges).where((F.col("api_key") == frames.API_VERSIONS) & name.isNotNull())
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
    return (facts.typed(exchanges).where((F.col("api_key") == frames.API_VERSIONS) & F.col("has_response"))
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
        "summary": summary(ds.exchanges, ds.anomalies),
        "clients": frames.ordered(clients(ds.exchanges), F.col("exchanges").desc(), "client_id"),
        "api_versions": frames.ordered(api_versions(ds.exchanges), F.col("outdated").desc_nulls_last(), "client_id",
                                       "api_key", "api_version"),
        "anomalies_by_kind": frames.ordered(anomalies_by_kind(ds.anomalies), F.col("count").desc(), "kind"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("inventory", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
