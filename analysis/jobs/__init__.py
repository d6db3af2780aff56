"""The table jobs: which there are, and what one hands the scheduler.

A job is a module of pure ``DataFrame -> DataFrame`` functions, a ``tables(dataset, options)`` naming its
result tables (lazy DataFrames, or :class:`Pieces` / :class:`Empty`), and a thin ``main()`` for
``python -m analysis JOB`` and spark-submit. :data:`MODULES` is the registry: a job's name on the command
line and the module that computes it. The modules are imported only when a job runs (:func:`tables_of`),
so ``kdissect --help`` does not load pyspark.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# A job: the dataset and options in, named result tables out (lazy DataFrames).
Tables = Callable[[Any, Any], "dict[str, Any]"]

# In the order ``kdissect analyze`` runs and prints them.
MODULES: Mapping[str, str] = {
    "inventory": "analysis.jobs.inventory",
    "latency": "analysis.jobs.latency",
    "errors": "analysis.jobs.errors",
    "throughput": "analysis.jobs.throughput",
    "groups": "analysis.jobs.groups",
    "lag": "analysis.jobs.lag",
    "shares": "analysis.jobs.shares",
    "producers": "analysis.jobs.producers",
    "schemas": "analysis.jobs.schemas",
    "findings": "analysis.jobs.findings",
}
JOBS = tuple(MODULES)


def module_of(name: str) -> Any:
    """The module of job ``name`` (a KeyError for a name not in :data:`MODULES`)."""
    return importlib.import_module(MODULES[name])


def tables_of(name: str) -> Tables:
    """Job ``name``'s ``tables`` function."""
    return module_of(name).tables


@dataclass(frozen=True)
class Pieces:
    """A table computed as several smaller queries, collected side by side and put together on the driver
    by ``merge`` (the findings: one query per rule, where their union was one very wide plan)."""

    frames: Mapping[str, Any]
    merge: Callable[[list[pa.Table]], pa.Table]


@dataclass(frozen=True)
class Empty:
    """A table known to be empty without asking Spark (:func:`needs`): collected as its schema alone."""

    frame: Any


def needs(opts: Any, df: Any, *any_of: int, all_of: Sequence[int] = (), records: bool = False) -> Any:
    """``df``, or :class:`Empty` when the dataset (``opts.present``) holds none of the api keys ``any_of``,
    lacks one of ``all_of``, or (``records``) has no records table: a table over those exchanges or
    records, which would be empty, costs no query."""
    present = getattr(opts, "present", None)
    if present is None:
        return df
    if (any_of and not present.api_keys & set(any_of)) or not set(all_of) <= present.api_keys \
            or (records and not present.records):
        return Empty(df)
    return df


def empty_table(df: Any) -> pa.Table:
    """The table ``collect(df)`` gives when ``df`` has no rows, from its schema alone."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC").empty_table()
