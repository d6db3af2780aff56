"""Kafka 0.7, the wire protocol before 0.8: requests without correlation or client ids.

:mod:`~dissector.v07.wire` parses frames, :mod:`~dissector.v07.messages` the
message sets, :mod:`~dissector.v07.connection` is the sans-IO connection that
yields the same events as :class:`dissector.connection.Connection`, with the
subclasses of :mod:`~dissector.v07.events`. :mod:`dissector.protocols` decides
which of the two a connection speaks.
"""

from dissector.v07.connection import V07Connection
from dissector.v07.events import PROTOCOL, V07Request, V07Response

__all__ = ["PROTOCOL", "V07Connection", "V07Request", "V07Response"]
