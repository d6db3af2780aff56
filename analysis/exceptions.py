"""The analysis's one error hierarchy; the command line turns it into one line and an exit status
(the README's exit codes: 1 failed, 2 bad use, 3 an input that is not a usable dataset)."""

from __future__ import annotations


class AnalysisError(Exception):
    """Something the user can fix: the message is the whole story, no traceback. Exit 1."""

    exit_code = 1


class UsageError(AnalysisError):
    """Bad use: a bad option or value (--conf, --since/--until, a threshold), a path that does not exist. Exit 2."""

    exit_code = 2


class DatasetError(AnalysisError):
    """The input is not a usable kdissect dataset (not one, empty, or from a kdissect lacking a column). Exit 3."""

    exit_code = 3


class NoSuchDataset(DatasetError, UsageError):
    """A dataset path that does not exist: bad use (exit 2), and still a DatasetError to its callers."""

    exit_code = 2


class SparkUnavailable(AnalysisError):
    """Spark cannot start here: no Java, a Java too old, or the JVM died at startup. Exit 1."""


class SparkFailed(AnalysisError):
    """A query Spark ran for the analysis failed (out of memory in a task, a broadcast too big, ...): its
    first line, without the JVM's stack trace. Exit 1."""
