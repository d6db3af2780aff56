"""Spark jobs over a kdissect dataset (Parquet only; never imports the dissector).

Every table job (:mod:`analysis.jobs`) is a module of pure ``DataFrame -> DataFrame``
functions plus ``tables(dataset, options)`` naming its result tables and a thin ``main()``:
``inventory``, ``latency``, ``errors``, ``throughput``, ``groups``, ``lag``,
``producers``, ``schemas``, ``findings`` (the rules of :mod:`analysis.findings`). Facts
that more than one job or rule reads are derived once, in :mod:`analysis.derived`.
Run them all with ``kdissect analyze DATASET...`` (see :mod:`analysis.cli`), one with::

    python -m analysis latency DATASET [--master local[*]] [--out DIR]

or submit a job module (``analysis/jobs/<job>.py``) directly (see each module's docstring).
"""
