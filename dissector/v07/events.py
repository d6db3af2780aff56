"""The 0.7 flavour of the dissector's request and response events.

They are :class:`~dissector.events.Request` and :class:`~dissector.events.Response`
(so every consumer of events handles them), with what 0.7 adds or lacks:
``api_version`` and ``client_id`` are None (0.7 has neither), the
``correlation_id`` is the request's ordinal on the connection (1, 2, ...; an
orphan response gets -1, -2, ...), ``api_key`` is the key of the Kafka api that
does the same job, and ``request_type`` is the 0.7 wire value.

They have no slots: compiled, their bases are extension types whose fields a
slot of the same name would shadow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dissector.events import Request, Response
from dissector.v07.wire import API_NAMES, EXPECTS_RESPONSE, Target, error_name

PROTOCOL = "0.7"


@dataclass
class V07Request(Request):
    request_type: int = 0
    protocol = PROTOCOL

    @property
    def api_name(self) -> str:
        return API_NAMES[self.request_type]

    @property
    def expects_response(self) -> bool:
        return self.request_type in EXPECTS_RESPONSE


@dataclass
class V07Response(Response):
    request_type: int | None = None                       # of the request it answers (or inferred)
    targets: list[Target] = field(default_factory=list)   # that request's topic-partitions, in order
    protocol = PROTOCOL

    @property
    def api_name(self) -> str:
        return "Unknown" if self.request_type is None else API_NAMES[self.request_type]


def api_name_of(msg: Request | Response) -> str | None:
    """The api name of any request or response event, 0.7 or later."""
    if isinstance(msg, V07Request) or (isinstance(msg, V07Response) and msg.request_type is not None):
        return msg.api_name
    if isinstance(msg, V07Response) or msg.api_key is None:
        return None
    from dissector.schema import api_name
    return api_name(msg.api_key)


def error_name_of(msg: Request | Response, code: int) -> str:
    """The name of an error code in the table of the message's protocol generation."""
    if isinstance(msg, (V07Request, V07Response)):
        return error_name(code)
    from dissector.schema import error_name as kafka_error_name
    return kafka_error_name(code)
