"""Spark jobs over a kdissect dataset (Parquet only; never imports the dissector).

Every job is a module of pure ``DataFrame -> DataFrame`` functions plus
``tables(dataset, options)`` naming its result tables and a thin ``main()``:
``inventory``, ``latency``, ``errors``, ``throughput``, ``groups``, ``lag``,
``producers``. Run them all with ``kdissect analyze DATASET...`` (see
:mod:`analysis.cli`), one with::

    python -m analysis latency DATASET [--master local[*]] [--out DIR]

or submit a job module directly (see each module's docstring).
"""
