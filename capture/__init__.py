"""Packets in, ordered TCP byte streams out, fed to the sans-IO Kafka dissector.

    from capture import read_capture, CaptureOptions
    run = read_capture("traffic.pcapng.gz", CaptureOptions())
    for ev in run:                 # CaptureEvent(conn: ConnectionInfo | None, event)
        ...
    print(run.stats)

Files (pcap, pcapng, either gzipped) and live interfaces (:mod:`capture.live`)
go through the same :class:`Pipeline`. Only an unreadable input raises
:class:`CaptureError`; everything else is an event. Besides the dissector's own
events and :class:`ConnectionEnd`, capture reports ``dissector.events.Anomaly``
kinds (``conn`` None for capture-level ones):

* file: ``capture_truncated``, ``capture_corrupt``, ``caplen_exceeds_wirelen`` and
  ``caplen_exceeds_snaplen`` (once per file), ``capture_drops`` (writer/kernel
  counters), ``no_timestamps``, ``unsupported_linktype``;
* live: ``capture_drops`` (kernel or spool-cap drops, where they happened), ``snaplen_cut``;
* packets: ``ip_fragment``, ``truncated_header``, ``malformed`` (capped per kind);
* streams: ``gap`` (the dissector's, with ``extra["reason"]`` lost / truncated /
  midstream / reorder_limit and ``extra["tcp_offset"]`` added), ``tcp_conflict``,
  ``tcp_out_of_window``, ``causal_order_limit`` (see :mod:`capture.causal`);
* connections: ``tls`` (a TLS connection not decoded: no keys, joined after its handshake,
  unsupported version or suite; version, cipher suite and SNI in the detail),
  ``tls_decrypt_failed`` (keys that do not authenticate its records), ``dissector_error``;
* state caps: ``flow_table_full`` (live connections ended early), ``topic_registry_full``,
  ``frame_held_limit`` (the dissector's, from ``max_held_frame_bytes``), ``inference_limit``
  (orphan responses that fit no schema, per connection and capture-wide).

TLS connections are decrypted by :mod:`capture.tls` given the session keys
(``CaptureOptions.tls_keylog``, or a pcapng file's Decryption Secrets Blocks),
then detected and dissected like plaintext; ``ConnectionInfo.tls`` holds what
their handshake said.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import hotpath  # noqa: F401  (first: installs the KDISSECT_PURE switch)

from capture.capfile import open_capture
from capture.detect import WELL_KNOWN_PORTS, KafkaProbe, parse_ports
from capture.errors import CaptureError
from capture.flows import ConnectionEnd, ConnectionInfo
from capture.pipeline import CaptureEvent, CaptureOptions, CaptureRun, CaptureStats, Pipeline
from capture.records import RawRecord, RecordSource
from capture.rotation import capture_sets, open_captures

__all__ = [
    "WELL_KNOWN_PORTS",
    "CaptureError",
    "CaptureEvent",
    "CaptureOptions",
    "CaptureRun",
    "CaptureStats",
    "ConnectionEnd",
    "ConnectionInfo",
    "KafkaProbe",
    "Pipeline",
    "RawRecord",
    "RecordSource",
    "open_capture",
    "parse_ports",
    "capture_sets",
    "open_captures",
    "read_capture",
]


def read_capture(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 options: CaptureOptions | None = None, **pipeline_kw: object) -> CaptureRun:
    """Events of every Kafka connection in a pcap/pcapng file (gzip allowed).

    ``path`` may also be the files of a rotated capture, in order (see
    :func:`capture.rotation.capture_sets`): they are read as one capture.
    Raises :class:`CaptureError` at once when (the first) ``path`` is not a readable capture.
    """
    source = open_captures(path)
    return CaptureRun(source, Pipeline(options, **pipeline_kw))  # type: ignore[arg-type]
