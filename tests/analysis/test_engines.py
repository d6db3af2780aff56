"""One analysis, two engines: every table of every bundled sample is the same on the embedded engine (Sail)
and on JVM Spark: rows in any order, floats to 6 significant digits, timestamps to the microsecond.

Each sample is its own dataset (:mod:`tests.analysis.samples`, decoded once for the test run). JVM Spark is
this run's shared local session; the embedded engine is the run's too.
"""

from __future__ import annotations

import pytest

from analysis import jobs, output, preflight, schedule
from tests.analysis.engines import connect_mode, differences
from tests.analysis.samples import NAMES

# JVM Spark's side needs Java (CI installs it); without, the embedded engine's answers are held to the
# samples' truths by the other tests.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(preflight.java_command() is None, reason="no Java: JVM Spark is not here to compare")]


def test_every_sample_is_covered():
    assert len(NAMES) >= 30 and any(n.startswith("payloads/") for n in NAMES) \
        and any(n.startswith("tls/") for n in NAMES) and any(n.startswith("findings/") for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_table_is_the_same_on_both_engines(spark, embedded, sample_datasets, name):
    request = schedule.Request([str(sample_datasets[name])])
    with connect_mode(True):
        sail = output.as_json(schedule.analyze(embedded, request, jobs.JOBS))
    with connect_mode(False):
        jvm = output.as_json(schedule.analyze(spark, request, jobs.JOBS))
    assert len(sail) >= 25 and sail["summary"][0]["exchanges"] > 0
    assert differences(sail, jvm) == {}
