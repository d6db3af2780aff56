"""Clients and protocol versions: which client_id uses which api_version of each api.

For the platform engineer hunting old clients before a broker upgrade: every
(client_id, client software, api, version) seen in requests, and the rows that
lag behind the newest version any client used for that api in the capture.
Client software name/version come from ApiVersions v3+ requests on the same
connection, when the capture saw the connection start.

Usage::

    python -m analysis versions DATASET [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/versions.py DATASET [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis import dataset, report

API_VERSIONS = 18


def requests_seen(exchanges: DataFrame) -> DataFrame:
    """Exchanges whose request was captured: only those state a version rather than guess it."""
    return exchanges.where(F.col("request_ts").isNotNull() & ~F.coalesce(F.col("inferred"), F.lit(False)))


def client_software(exchanges: DataFrame) -> DataFrame:
    """(capture, connection, client_software): what the client's ApiVersions request called itself."""
    name = F.get_json_object("request", "$.client_software_name")
    version = F.get_json_object("request", "$.client_software_version")
    return (requests_seen(exchanges)
            .where((F.col("api_key") == API_VERSIONS) & name.isNotNull())
            .groupBy("capture", "connection")
            .agg(F.max(F.concat_ws(" ", name, version)).alias("client_software")))


def client_versions(exchanges: DataFrame) -> DataFrame:
    """Per client_id, software, api and version: requests, connections, client addresses, first/last seen."""
    seen = requests_seen(exchanges).join(client_software(exchanges), ["capture", "connection"], "left")
    return (seen.groupBy("client_id", "client_software", "api_key", "api_name", "api_version")
            .agg(F.count(F.lit(1)).alias("requests"),
                 F.countDistinct("capture", "connection").alias("connections"),
                 F.array_sort(F.collect_set("client_ip")).alias("client_ips"),
                 F.min("request_ts").alias("first_seen"),
                 F.max("request_ts").alias("last_seen")))


def outdated(versions: DataFrame) -> DataFrame:
    """Rows of :func:`client_versions` below the newest version seen for their api, with how far behind."""
    newest = F.max("api_version").over(Window.partitionBy("api_key"))
    return (versions.withColumn("newest_seen", newest)
            .where(F.col("api_version") < F.col("newest_seen"))
            .withColumn("behind", F.col("newest_seen") - F.col("api_version")))


def results(spark: SparkSession, path: str, args: argparse.Namespace) -> report.Results:
    versions = client_versions(dataset.read_exchanges(spark, path)).cache()
    return {
        "client_versions": versions.orderBy("client_id", "api_key", "api_version"),
        "outdated": outdated(versions).orderBy(F.col("behind").desc(), "client_id", "api_key"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return report.run("versions", results, argv)


if __name__ == "__main__":
    sys.exit(main())
