"""Live metrics: the decoded exchanges as counters, histograms and gauges (issue #32).

One more sink of the same rows the dataset gets, beside the Parquet writer:

* :mod:`kdissect.metrics.catalog`: what is exported (names, labels, help), once;
* :mod:`kdissect.metrics.fold`: rows in, metric state out; no I/O, no exporter library;
* :mod:`kdissect.metrics.shares`: the fold's share groups (KIP-932) part;
* :mod:`kdissect.metrics.prometheus`: the fold as a ``prometheus-client`` collector, served over
  HTTP (``live --metrics``) or written as a text file (``decode --metrics-out``);
* :mod:`kdissect.metrics.otlp`: the fold through the OpenTelemetry SDK's OTLP exporter (``live --otlp``);
* :mod:`kdissect.metrics.parquet`: the fold over a finished capture's Parquet files;
* :mod:`kdissect.metrics.run`: what ``live`` starts and stops.

The exporter libraries are the ``metrics`` extra; a missing one is one line naming it.
"""
