"""Spark jobs over a kdissect dataset (Parquet only; never imports the dissector).

Jobs: ``latency``, ``errors``, ``throughput``, ``versions``. Run one with::

    python -m analysis latency DATASET [--master local[*]] [--out DIR]

or submit a job module directly (see each module's docstring).
"""
