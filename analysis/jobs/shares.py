"""Share groups (KIP-932): members, deliveries, records left unacknowledged, share session errors.

Read from the ``request``/``response`` bodies of ShareGroupHeartbeat, ShareFetch and ShareAcknowledge
(:mod:`analysis.facts`), by the derivations in :mod:`analysis.derived`, which the share findings read too.
Counts are records: the sizes of the ``acquired_records`` ranges of ShareFetch responses and of the
``acknowledgement_batches`` of ShareFetch and ShareAcknowledge requests.

Tables:

* ``share_groups``: per group and member, when it joined and left, its heartbeats, epochs and assignments
  (:func:`analysis.derived.share_members`);
* ``share_deliveries``: per group, topic, partition and client, records acquired, accepted, released,
  rejected and redelivered (delivery count above 1), and the highest delivery count
  (:func:`analysis.derived.share_deliveries`);
* ``share_in_flight``: runs of records acquired and never acknowledged by their member: still in flight
  at the capture's end, or delivered again once their lock ran out (:func:`analysis.derived.share_unacknowledged`);
* ``share_session_errors``: the errors ShareFetch and ShareAcknowledge answers carried
  (:func:`analysis.derived.share_session_errors`).

Usage::

    python -m analysis shares DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/shares.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame

from analysis import derived, frames, runner
from analysis.dataset import Dataset
from analysis.jobs import needs
from analysis.options import Options


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    ex, parts = ds.exchanges, ds.partitions
    fetch = (frames.SHARE_FETCH,)
    acks = (frames.SHARE_FETCH, frames.SHARE_ACKNOWLEDGE)
    return {
        "share_groups": needs(opts, frames.ordered(derived.share_members(ex, parts), "group_id", "joined_ts",
                                                   "client_id", "member_id"), frames.SHARE_GROUP_HEARTBEAT),
        "share_deliveries": needs(opts, frames.ordered(derived.share_deliveries(ex, parts), "group_id", "topic",
                                                       "partition", "client_id"), *acks),
        "share_in_flight": needs(opts, frames.ordered(derived.share_unacknowledged(ex, parts), "group_id", "topic",
                                                      "partition", "first_offset", "acquired_ts", "client_id", "member_id"),
                                 *fetch),
        "share_session_errors": needs(opts, frames.ordered(derived.share_session_errors(ex, parts), "group_id",
                                                           "client_id", "api_name", "error", "broker", "member_id", "level"),
                                 *acks),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("shares", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
