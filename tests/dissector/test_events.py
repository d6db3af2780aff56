"""The event classes behave as the same dataclasses in both builds.

Compiled, ``dissector/events.pxd`` makes them Cython's extension-type dataclasses; the 0.7 events
and the 0.7 records summary are Python dataclasses inheriting them. These hold what callers rely
on: fields, ``replace``, equality, repr, and positional construction of the subclasses.
"""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from dissector.events import Anomaly, DecodeFailure, Direction, Exchange, Request, Response, Status
from dissector.records import RecordsSummary
from dissector.v07.events import V07Request, V07Response
from dissector.v07.messages import MessageSetSummary

REQUEST_FIELDS = ["api_key", "api_version", "correlation_id", "client_id", "size", "first_ts", "last_ts",
                  "header_version", "body", "failure", "stream_offset", "raw", "header_tags"]


def _request(**kw) -> Request:
    return Request(0, 9, 7, "cid", 120, 1_000, 2_000, 1, {"acks": -1}, **kw)


def test_request_fields_replace_equality_and_repr() -> None:
    req = _request()
    assert [f.name for f in dataclasses.fields(Request)] == REQUEST_FIELDS
    assert dataclasses.is_dataclass(req) and req.protocol == "0.8+"
    assert req == _request() and req != _request(stream_offset=5)
    moved = dataclasses.replace(req, correlation_id=8)
    assert (moved.correlation_id, moved.body) == (8, {"acks": -1})
    assert repr(req).startswith("Request(api_key=0, api_version=9, correlation_id=7, client_id='cid'")
    assert req.api_name == "Produce" and req.expects_response
    with pytest.raises(TypeError):
        hash(req)   # mutable dataclasses are unhashable, as Python makes them


def test_exchange_and_anomaly_round_trip_through_pickle() -> None:
    resp = Response(7, 60, 3_000, 3_100, 0, 9, 1, {"responses": []})
    ex = Exchange(_request(failure=DecodeFailure("Underflow", "short", 12)), resp, Status.OK)
    assert pickle.loads(pickle.dumps(ex)) == ex
    a = Anomaly("gap", Direction.TO_BROKER, 5, "10 bytes missing", 100, {"bytes": 10})
    assert pickle.loads(pickle.dumps(a)) == a
    assert Anomaly("gap", None, 5, "x").extra == {}


def test_0_7_events_inherit_every_field_positionally() -> None:
    req = V07Request(0, None, 1, None, 40, 1, 2, None, {"topic": "t"}, None, 0, None, None, 0)
    assert (req.correlation_id, req.request_type, req.protocol) == (1, 0, "0.7")
    assert isinstance(req, Request) and req.api_name == "Produce" and not req.expects_response
    assert [f.name for f in dataclasses.fields(V07Request)] == REQUEST_FIELDS + ["request_type"]
    assert dataclasses.replace(req, request_type=1).request_type == 1
    resp = V07Response(1, 10, 3, 4, 1, None, None, {}, None, False, 0, None, None, 1)
    assert isinstance(resp, Response) and resp.request_type == 1 and resp.targets == []


def test_records_summary_leaves_its_bytes_out_of_equality_and_repr() -> None:
    a, b = RecordsSummary(total_bytes=3, data=b"abc"), RecordsSummary(total_bytes=3, data=b"xyz")
    assert a == b and "abc" not in repr(a)
    legacy = MessageSetSummary(3, (0,), 1, 1, base_offset=10)
    assert (legacy.total_bytes, legacy.batch_count, legacy.base_offset) == (3, 1, 10)
    assert legacy.to_dict()["base_offset"] == 10 and legacy.to_dict()["format"] == "0.7"
