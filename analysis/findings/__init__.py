"""Findings: what is wrong, read from the wire.

Each rule is a pure ``(Inputs, thresholds) -> DataFrame`` transform over the
dataset's tables producing rows of ``FINDINGS``; ``findings()`` runs the enabled
ones and orders the result worst first.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.findings import brokers, clients, consumers, groups, payloads, producer
from analysis.findings.config import Config, FindingsConfigError, load
from analysis.findings.core import COLUMNS, FINDINGS, SEVERITIES, Inputs, Rule, with_client

RULES: tuple[Rule, ...] = (producer.RULES + clients.RULES + consumers.RULES + groups.RULES + brokers.RULES
                           + payloads.RULES)
BY_ID = {r.id: r for r in RULES}

__all__ = ["BY_ID", "COLUMNS", "FINDINGS", "RULES", "SEVERITIES", "Config", "FindingsConfigError", "Inputs",
           "Rule", "findings", "from_dataset", "load", "rules_markdown", "severity_rank", "tables"]


def severity_rank() -> F.Column:
    """0 for critical, 1 warning, 2 info: sort ascending for worst first."""
    return F.array_position(F.array(*[F.lit(s) for s in SEVERITIES]), F.col("severity"))


def prepared(inp: Inputs) -> Inputs:
    """The inputs with what several rules derive (parsed Produce batches, partitions with their client)
    computed once and kept by Spark."""
    from dataclasses import replace

    from pyspark import StorageLevel
    keep = StorageLevel.MEMORY_AND_DISK
    return replace(inp, produce=producer.produce_batches(inp.exchanges).persist(keep),
                   partitions_with_client=with_client(inp.partitions, inp.exchanges).persist(keep))


def findings(inp: Inputs, config: Config | None = None) -> DataFrame:
    """Every enabled rule's findings, worst first, then by time."""
    cfg = config or load(RULES)
    inp = prepared(inp)
    parts = [r.run(inp, cfg.for_rule(r.id)) for r in RULES if r.id not in cfg.disabled]
    spark = inp.exchanges.sparkSession
    empty = spark.createDataFrame([], FINDINGS)
    out = reduce(DataFrame.unionByName, parts, empty)
    return out.orderBy(severity_rank(), "first_ts", "finding", "subject")


def rules_markdown() -> str:
    """The README's rules table (a test keeps the README in step with the rules)."""
    def thresholds(rule: Rule) -> str:
        return ", ".join(f"`{k}`={int(v) if float(v).is_integer() else v}" for k, v in rule.thresholds.items()) or "-"
    lines = ["| id | severity | detects | evidence | thresholds (default) | advice: settings |",
             "|---|---|---|---|---|---|"]
    lines += [f"| `{r.id}` | {r.severity} | {r.detects} | {r.evidence} | {thresholds(r)} | {r.advice} |"
              for r in RULES]
    return "\n".join(lines) + "\n"


def from_dataset(spark: SparkSession, path: str, config: Config | None = None) -> DataFrame:
    """The findings of one dataset directory written by ``kdissect decode``."""
    from analysis import dataset

    ex = dataset.read_table(spark, path, "exchanges").cache()
    parts = dataset.read_table(spark, path, "partitions").cache()
    return findings(Inputs(ex, parts, records=dataset.read_table(spark, path, "records")), config)


def tables(ds: Any, opts: Any) -> dict[str, DataFrame]:
    """The job interface of ``kdissect analyze``: the dataset (its ``exchanges``, ``partitions``) and options
    (``opts.findings``: a :class:`Config`, defaults when absent) in, the ``findings`` table out."""
    config = getattr(opts, "findings", None)
    return {"findings": findings(Inputs(ds.exchanges, ds.partitions, getattr(ds, "anomalies", None),
                                        records=getattr(ds, "records", None)), config)}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m analysis findings DATASET...`` / spark-submit: the findings table alone."""
    from analysis import runner
    return runner.run_job("findings", tables, argv)
