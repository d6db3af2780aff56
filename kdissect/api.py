"""The pipeline as a library, for notebooks and scripts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from capture import ConnectionInfo
from dissector.events import Exchange

from kdissect.dataset.rows import exchange_row
from kdissect.run.source import DecodeOptions, open_capture_run
from kdissect.dataset.tables import EXCHANGES

if TYPE_CHECKING:
    import pandas


@dataclass(frozen=True, slots=True)
class CapturedExchange:
    """One request and its response (or a lone side), with the connection that carried it."""

    capture: str                 # the capture file's name
    connection: ConnectionInfo   # id, client_ip/port, broker_ip/port, ...
    exchange: Exchange           # dissector event: .request, .response, .status, .latency_ns

    def row(self) -> dict[str, Any]:
        """This exchange as a row of the ``exchanges`` table."""
        return exchange_row(self.capture, self.connection, self.exchange)


def _options(ports: str | frozenset[int] | None, keep_secrets: bool,
             tls_keylog: str | os.PathLike[str] | list[str | os.PathLike[str]] | tuple = ()) -> DecodeOptions:
    return DecodeOptions.from_mapping({"ports": ports, "keep_secrets": keep_secrets, "tls_keylog": tls_keylog})


def read_pcap(path: str | os.PathLike[str], *, ports: str | frozenset[int] | None = None,
              keep_secrets: bool = False,
              tls_keylog: str | os.PathLike[str] | list[str | os.PathLike[str]] = ()) -> Iterator[CapturedExchange]:
    """Decoded exchanges of a pcap/pcapng file (gzip allowed), in the order they complete.

    ``ports``: Kafka ports (``"9092,9093"``); by default Kafka is detected on any port.
    ``tls_keylog``: NSS key log file(s) to decrypt TLS connections (pcapng-embedded keys are used anyway).
    Raises :class:`kdissect.KdissectError` if ``path`` is not a readable capture or a key log is unreadable.
    """
    run = open_capture_run(path, _options(ports, keep_secrets, tls_keylog), messages=False)
    name = os.path.basename(os.fspath(path))
    try:
        for ce in run:
            if isinstance(ce.event, Exchange) and ce.conn is not None:
                yield CapturedExchange(name, ce.conn, ce.event)
    finally:
        run.close()


def exchanges_table(path: str | os.PathLike[str], **kw: Any) -> pa.Table:
    """The ``exchanges`` table of one capture, with the dataset's Arrow schema."""
    return pa.Table.from_pylist([e.row() for e in read_pcap(path, **kw)], schema=EXCHANGES)


def exchanges_frame(path: str | os.PathLike[str], **kw: Any) -> pandas.DataFrame:
    """The ``exchanges`` table of one capture as a pandas DataFrame (timestamps UTC)."""
    return exchanges_table(path, **kw).to_pandas()
