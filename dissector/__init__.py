"""Sans-IO dissector of the Kafka wire protocol: bytes in, events out.

Nothing here opens a socket or a file. A caller (``capture``, a test, a
notebook) owns one :class:`Connection` per TCP connection and feeds it the
bytes of each direction with their capture timestamps (integer nanoseconds)::

    conn = Connection(Options(), topics=TopicRegistry())
    for event in conn.feed(Direction.TO_BROKER, data, ts):   # request bytes
        ...
    for event in conn.feed(Direction.TO_CLIENT, data, ts):   # response bytes
        ...
    for event in conn.gap(Direction.TO_CLIENT, ts, nbytes):  # bytes lost: resync
        ...
    for event in conn.close(ts):                              # end of capture
        ...

Events are the dataclasses of :mod:`dissector.events`: ``Request``,
``Response``, ``Exchange`` (the pair, or a lone side with its status),
``SaslToken`` and ``Anomaly``. No method raises on bad bytes.

Kafka 0.7, the protocol before 0.8, has its own connection
(:class:`dissector.v07.V07Connection`) yielding the same events;
:mod:`dissector.protocols` picks the generation per connection from its first
request (or as the user forces it).
"""

import hotpath  # noqa: F401  (first: installs the KDISSECT_PURE switch)

from dissector.events import (  # noqa: E402

    Anomaly,
    DecodeFailure,
    Direction,
    Event,
    Exchange,
    Request,
    Response,
    SaslToken,
    Status,
)

__all__ = [
    "Anomaly",
    "DecodeFailure",
    "Direction",
    "Event",
    "Exchange",
    "Request",
    "Response",
    "SaslToken",
    "Status",
]
