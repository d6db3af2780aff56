"""Protocols carried inside Kafka fields as opaque bytes.

The classic consumer group protocol puts a subscription (JoinGroup metadata)
and an assignment (SyncGroup) inside ``bytes`` fields; the broker never looks
at them, but a developer debugging a rebalance needs them. They are decoded
when the group's protocol type is ``consumer`` (or, for old SyncGroup versions
that do not say, when the bytes decode as an assignment completely) and the
bytes are replaced by ``{"version": v, ...fields}``.
"""

from __future__ import annotations

import struct
from typing import Any

from dissector import schema
from dissector.decoders import Decoders, run

_H = struct.Struct(">h").unpack_from

SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"


def decode_consumer_data(decoders: Decoders, name: str, data: Any, allowance: list[int] | None = None) -> Any:
    """Decode subscription/assignment bytes, or return them unchanged if they do not decode cleanly, or
    (``allowance``: decoded cost still allowed, taken from as they decode) would cost more than is left."""
    if not isinstance(data, (bytes, bytearray)) or len(data) < 2:
        return data
    version = _H(data, 0)[0]
    lo_hi = schema.data_versions(name)
    if lo_hi is None or version < lo_hi[0]:
        return data
    if allowance is not None:
        cost = decoders.data_cost(name, min(version, lo_hi[1]), len(data))
        if cost > allowance[0]:
            return data
        allowance[0] -= cost
    # Newer versions only append fields, so decode an unknown one with the newest we know.
    if not decoders.unchecked(len(data)):
        d = decoders.decode_large(name, "data", min(version, lo_hi[1]), bytes(data), 2)   # within the budget
        if d is None:
            return data
    else:
        fn = decoders.get_data(name, min(version, lo_hi[1]))
        if fn is None:
            return data
        d = run(fn, data, 2)
    if d.failure is not None or (d.end != len(data) and version <= lo_hi[1]):
        return data
    return {"version": version, **d.body}


def _is_consumer(protocol_type: Any) -> bool | None:
    if protocol_type is None:
        return None
    return protocol_type == "consumer"


def decode_group_payloads(decoders: Decoders, api_key: int, kind: str, body: dict,
                          request_body: dict | None, size: int | None = None) -> None:
    """Replace consumer-protocol bytes in JoinGroup, SyncGroup and DescribeGroups bodies, in place.

    ``size``: the message's frame size; its payloads then decode within a budget of their own as large
    as the body's (dissector.budget), and those past it stay bytes."""
    left = [decoders.budget(size)] if size else None
    if api_key in (11, 14):
        # Newer versions say the protocol type on both sides; older responses only in the request.
        ptype = body.get("protocol_type")
        if ptype is None and request_body is not None:
            ptype = request_body.get("protocol_type")
        if _is_consumer(ptype) is False:
            return
    if api_key == 11:  # JoinGroup
        if kind == "request":
            for p in body.get("protocols") or ():
                p["metadata"] = decode_consumer_data(decoders, SUBSCRIPTION, p.get("metadata"), left)
        else:
            for m in body.get("members") or ():
                m["metadata"] = decode_consumer_data(decoders, SUBSCRIPTION, m.get("metadata"), left)
    elif api_key == 14:  # SyncGroup
        if kind == "request":
            for a in body.get("assignments") or ():
                a["assignment"] = decode_consumer_data(decoders, ASSIGNMENT, a.get("assignment"), left)
        elif "assignment" in body:
            body["assignment"] = decode_consumer_data(decoders, ASSIGNMENT, body["assignment"], left)
    elif api_key == 15 and kind == "response":  # DescribeGroups
        for g in body.get("groups") or ():
            if _is_consumer(g.get("protocol_type")) is not True:
                continue
            for m in g.get("members") or ():
                m["member_metadata"] = decode_consumer_data(decoders, SUBSCRIPTION, m.get("member_metadata"), left)
                m["member_assignment"] = decode_consumer_data(decoders, ASSIGNMENT, m.get("member_assignment"), left)
