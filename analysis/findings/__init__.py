"""Findings: what is wrong, read from the wire.

Each rule is a pure ``(Inputs, thresholds) -> DataFrame`` transform over the
dataset's tables producing rows of ``FINDINGS``; ``findings()`` runs the enabled
ones and orders the result worst first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import derived
from analysis.findings import brokers, clients, consumers, groups, payloads, producer, shares
from analysis.findings.config import Config, FindingsConfigError, load
from analysis.findings.core import COLUMNS, FINDINGS, SEVERITIES, Inputs, Rule

RULES: tuple[Rule, ...] = (producer.RULES + clients.RULES + consumers.RULES + groups.RULES + shares.RULES
                           + brokers.RULES + payloads.RULES)
BY_ID = {r.id: r for r in RULES}

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BY_ID", "COLUMNS", "FINDINGS", "RULES", "SEVERITIES", "Config", "FindingsConfigError", "Inputs",
           "Rule", "findings", "from_dataset", "load", "merge", "prepared", "rule_frames", "rules_markdown",
           "severity_rank"]


# After the severity's rank (worst first): time, rule and subject; capture and evidence last, so that findings
# tied on the rest (one client's in two captures of the same moment, its acks=0 and acks=1 at once) keep one order.
ORDER = ("first_ts", "finding", "subject", "capture", "evidence")


def severity_rank() -> F.Column:
    """0 for critical, 1 warning, 2 info: sort ascending for worst first."""
    return F.array_position(F.array(*[F.lit(s) for s in SEVERITIES]), F.col("severity"))


def prepared(inp: Inputs, keep: Callable[[DataFrame], DataFrame] | None = None) -> Inputs:
    """The inputs with what several rules derive (Produce batches and those re-sent, the group apis'
    requests and the generations they formed) computed once and kept by Spark: by ``keep``
    (``Dataset.keep`` releases them with the dataset), else persisted for the session's life. (The
    partition rows the rules read are a filter of the dataset's Parquet: read again, they cost no more.)"""
    from dataclasses import replace

    from pyspark import StorageLevel
    keep = keep or (lambda df: df.persist(StorageLevel.MEMORY_AND_DISK))
    inp = replace(inp, produce=keep(producer.produce_batches(inp.exchanges)),
                  group_requests=keep(groups.group_requests(inp.exchanges)),
                  generations=keep(derived.generations(derived.group_exchanges(inp.exchanges))))
    return replace(inp, resent=keep(producer.resent_batches(inp)))


def rule_frames(inp: Inputs, config: Config | None = None, present: Any = None) -> dict[str, DataFrame]:
    """Each enabled rule's findings, by rule id (``inp`` as :func:`prepared` gives it, or not). Given what
    the dataset holds (``present``, an ``analysis.options.Present``), the rules that cannot fire on it are
    left out: their findings would be none, and each is a Spark query."""
    cfg = config or load(RULES)
    return {r.id: r.run(inp, cfg.for_rule(r.id)) for r in RULES if r.id not in cfg.disabled
            and (present is None or r.applies is None or r.applies(present))}


def findings(inp: Inputs, config: Config | None = None) -> DataFrame:
    """Every enabled rule's findings, worst first, then by time."""
    inp = prepared(inp)
    spark = inp.exchanges.sparkSession
    empty = spark.createDataFrame([], FINDINGS)
    out = reduce(DataFrame.unionByName, rule_frames(inp, config).values(), empty)
    return out.orderBy(severity_rank(), *ORDER)


def merge(tables: Sequence[pa.Table]) -> pa.Table:
    """The rules' findings collected one rule at a time, as one table ordered as :func:`findings` orders
    it: worst first, then by time, rule, subject, capture and evidence (nulls first, as Spark sorts
    ascending)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(FINDINGS, timezone="UTC")
    table = pa.concat_tables([t.select(list(COLUMNS)).cast(schema) for t in tables]) if tables \
        else schema.empty_table()
    # severity_rank(): a severity's 1-based place in SEVERITIES, 0 for any other.
    rank = pc.add(pc.fill_null(pc.index_in(table["severity"], pa.array(SEVERITIES)), -1), 1)
    keyed = table.append_column("_rank", rank)
    keys = ["_rank", *ORDER]
    try:  # pyarrow 25+: null placement per key
        order = pc.sort_indices(keyed, sort_keys=[(k, "ascending", "at_start") for k in keys])
    except (TypeError, ValueError, pa.ArrowInvalid):
        order = pc.sort_indices(keyed, sort_keys=[(k, "ascending") for k in keys], null_placement="at_start")
    return table.take(order)


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
