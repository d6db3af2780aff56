"""The analysis's one error hierarchy; the command line turns it into one line and a non-zero exit."""

from __future__ import annotations


class AnalysisError(Exception):
    """Something the user can fix: the message is the whole story, no traceback."""


class DatasetError(AnalysisError):
    """The input is not a usable kdissect dataset (missing, empty, or from a kdissect lacking a column)."""


class SparkUnavailable(AnalysisError):
    """Spark cannot start here: no Java, a Java too old, or the JVM died at startup."""
