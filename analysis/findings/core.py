"""What every rule shares: the findings schema, the rule record, and column helpers.

A rule is a pure function ``(Inputs, thresholds) -> DataFrame`` whose rows have
exactly the ``FINDINGS`` columns; ``emit`` builds them from a rule's own
aggregate so each rule only says what it measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from analysis import derived, frames

SEVERITIES = ("critical", "warning", "info")  # worst first

FINDINGS = StructType([
    StructField("finding", StringType(), False),
    StructField("severity", StringType(), False),
    StructField("subject_kind", StringType(), False),
    StructField("subject", StringType(), True),
    StructField("capture", StringType(), True),
    StructField("first_ts", TimestampType(), True),
    StructField("last_ts", TimestampType(), True),
    StructField("evidence", StringType(), True),
    StructField("explanation", StringType(), True),
    StructField("advice", StringType(), True),
    StructField("show", StringType(), True),
])
COLUMNS = tuple(f.name for f in FINDINGS.fields)


@dataclass(frozen=True)
class Inputs:
    """The dataset tables a rule may read (Spark DataFrames with the dataset's schemas).

    ``exchanges`` are always facts (:mod:`analysis.facts`): the body fields a rule reads are typed
    columns (``req_group_id``, ``req_max_wait_ms``, ...), and ``request``/``response`` are not there.
    Exchanges given with their bodies are parsed on construction.
    """

    exchanges: DataFrame
    partitions: DataFrame
    anomalies: DataFrame | None = None
    # Derived once and kept by Spark when several rules read them (see ``findings.prepared``).
    produce: DataFrame | None = None                 # producer.produce_batches(exchanges)
    group_requests: DataFrame | None = None          # groups.group_requests(exchanges)
    generations: DataFrame | None = None             # derived.generations(derived.group_exchanges(exchanges))
    resent: DataFrame | None = None                  # producer.resent_batches(inputs)
    records: DataFrame | None = None                 # the records table (with --records; else None or empty)

    def __post_init__(self) -> None:
        from analysis.facts import typed
        object.__setattr__(self, "exchanges", typed(self.exchanges))


Thresholds = Mapping[str, float]


@dataclass(frozen=True)
class Rule:
    id: str
    detects: str                   # README: what it detects
    evidence: str                  # README: the figures it reports
    advice: str                    # README: the settings to look at
    run: Callable[[Inputs, Thresholds], DataFrame]
    thresholds: Mapping[str, float] = field(default_factory=dict)
    severity: str = "warning"      # README: the severities it can give
    # Whether it can fire on a dataset holding these (an analysis.options.Present); None: always.
    applies: Callable[[Any], bool] | None = None


def uses(*api_keys: int) -> Callable[[Any], bool]:
    """``Rule.applies`` of a rule that reads only the exchanges or partition rows of ``api_keys``."""
    wanted = frozenset(api_keys)
    return lambda present: bool(present.api_keys & wanted)


def has_records(present: Any) -> bool:
    """``Rule.applies`` of a rule over the records table: the dataset was decoded with ``--records``."""
    return bool(present.records)


# --------------------------------------------------------------------------
# Column helpers

def ts(prefix: str = "") -> Column:
    """An exchange's time: its request, or its response when the request was not captured."""
    return F.coalesce(F.col(f"{prefix}request_ts"), F.col(f"{prefix}response_ts"))


def seconds(first: Column, last: Column) -> Column:
    return frames.seconds_between(first, last)


def per_second(count: Column, first: Column, last: Column, floor_s: float = 1.0) -> Column:
    """Rate over a span, the span counted as at least ``floor_s`` (a burst is not a rate)."""
    return count / F.greatest(seconds(first, last), F.lit(floor_s))


def rounded(c: Column, digits: int = 2) -> Column:
    return F.round(c.cast("double"), digits)


def sh_quote(c: Column) -> Column:
    """POSIX shell quoting of a string column, so a show line can be pasted as it is."""
    safe = c.rlike(r"^[A-Za-z0-9_./:=@,+%^-]+$")
    return F.when(safe, c).otherwise(F.concat(F.lit("'"), F.regexp_replace(c, "'", "'\"'\"'"), F.lit("'")))


def show_line(capture: Column, apis: Sequence[str] = (), client_id: Column | None = None,
              topic: Column | None = None, errors: bool = False) -> Column:
    """``kdissect show CAPTURE --api ... [--client-id ID] [--topic T] [--errors]``."""
    parts: list[Column] = [F.lit("kdissect show"), sh_quote(capture)]
    if apis:
        parts += [F.lit("--api"), F.lit(",".join(apis))]
    if client_id is not None:
        parts.append(F.when(client_id.isNotNull() & (client_id != ""),
                            F.concat(F.lit("--client-id "), sh_quote(client_id))))
    if topic is not None:
        parts.append(F.when(topic.isNotNull(), F.concat(F.lit("--topic "), sh_quote(topic))))
    if errors:
        parts.append(F.lit("--errors"))
    return F.concat_ws(" ", *parts)


def fmt(template: str, *cols: Column) -> Column:
    """``format_string`` with null-safe arguments (a null would blank the whole sentence)."""
    return F.format_string(template, *[F.coalesce(c.cast("string"), F.lit("?")) for c in cols])


def emit(df: DataFrame, finding: str, severity: Column | str, subject_kind: str, subject: Column,
         evidence: Mapping[str, Column], explanation: Column, advice: Column | str, show: Column,
         first_ts: Column | None = None, last_ts: Column | None = None) -> DataFrame:
    """Rows of ``FINDINGS`` from one rule's aggregate (which must have ``capture``, ``first_ts``, ``last_ts``)."""
    sev = F.lit(severity) if isinstance(severity, str) else severity
    adv = F.lit(advice) if isinstance(advice, str) else advice
    ev = F.to_json(F.struct(*[c.alias(k) for k, c in evidence.items()]))
    return df.select(
        F.lit(finding).alias("finding"),
        sev.alias("severity"),
        F.lit(subject_kind).alias("subject_kind"),
        subject.cast("string").alias("subject"),
        F.col("capture").alias("capture"),
        (first_ts if first_ts is not None else F.col("first_ts")).cast("timestamp").alias("first_ts"),
        (last_ts if last_ts is not None else F.col("last_ts")).cast("timestamp").alias("last_ts"),
        ev.alias("evidence"),
        explanation.alias("explanation"),
        adv.alias("advice"),
        show.alias("show"),
    )


def requests_of(exchanges: DataFrame, *api_keys: int) -> DataFrame:
    """Exchanges whose request was captured, limited to ``api_keys`` when given."""
    out = exchanges.where(F.col("request_ts").isNotNull())
    return out.where(derived.api(*api_keys)) if api_keys else out


# What the rules read of a Produce or Fetch partition row with its client (kept narrow: it is kept).
CLIENT_PARTITION_COLUMNS = ["capture", "connection", "correlation_id", "api_key", "api_name", "direction", "ts",
                            "topic", "partition", "error_name", "record_count", "batch_count", "bytes",
                            "compression", "client_id"]


def client_partitions(partitions: DataFrame) -> DataFrame:
    """The Produce and Fetch partition rows, narrowed to :data:`CLIENT_PARTITION_COLUMNS` (each row carries its
    exchange's client id, so no join to the exchanges)."""
    return partitions.where(derived.api(frames.PRODUCE, frames.FETCH)).select(*CLIENT_PARTITION_COLUMNS)


def parts_with_client(inp: Inputs) -> DataFrame:
    """``client_partitions(inp.partitions)``."""
    return client_partitions(inp.partitions)


def tp(topic: Column, partition: Column) -> Column:
    """``topic-partition``, as Kafka's own TopicPartition prints it."""
    return F.concat(F.coalesce(topic, F.lit("?")), F.lit("-"), partition.cast("string"))
