"""Building a SparkSession that suits both a laptop and a cluster."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

# Applied only when running locally: a 2-core laptop gains nothing from 200 shuffle partitions.
LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def build_session(app_name: str, master: str | None = None,
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A session in UTC; ``master`` overrides whatever spark-submit or SPARK_MASTER chose.

    Under spark-submit (which sets PYSPARK_GATEWAY_PORT) the master comes from its
    command line; started from plain Python it defaults to ``local[*]``.
    """
    builder = SparkSession.builder.appName(app_name)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = os.environ.get("SPARK_MASTER", "local[*]")
    if master is not None:
        builder = builder.master(master)
    settings = {"spark.sql.session.timeZone": "UTC"}
    if master is not None and master.startswith("local"):
        settings.update(LOCAL_DEFAULTS)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KDISSECT_SPARK_LOG", "WARN"))
    return spark
