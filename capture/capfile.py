"""Opening a capture file: sniff the format (pcap, pcapng, gzip of either) and pick a reader."""

from __future__ import annotations

import os

from capture.errors import CaptureError
from capture.pcapfile import MAGICS, PcapReader
from capture.pcapng import PcapngReader
from capture.records import RecordSource
from capture.stream import ByteStream, describe_unknown

PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def open_capture(path: str | os.PathLike[str]) -> RecordSource:
    """A record source over ``path``; raises :class:`CaptureError` if it is not a capture at all."""
    stream = ByteStream.open(path)
    try:
        head = stream.read(16)
        if stream.problems:
            raise CaptureError(f"{stream.name}: {stream.problems[0].detail.split(': ', 1)[-1]}")
        magic = head[:4]
        if magic in MAGICS or magic == PCAPNG_MAGIC:
            # The readers expect the stream at offset 0; gzip streams cannot seek cheaply, so a file is
            # reopened, and a pipe, which cannot be, hands its head back.
            if stream.seekable:
                stream.close()
                stream = ByteStream.open(path)
            else:
                stream.unread(head)
            return PcapReader(stream) if magic in MAGICS else PcapngReader(stream)
        what = "gzip-compressed, and the content is " if stream.compressed else ""
        raise CaptureError(f"{stream.name}: {what}{describe_unknown(head)}")
    except BaseException:
        stream.close()
        raise
