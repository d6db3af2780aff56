# Compiled build only (setup.py): the connection state as extension types, so that the per-frame
# code reads its own state from C structs rather than through Python's attribute lookup (issue #8).
# connection.py stays the only source; pure Python ignores this file.
cimport cython
from dissector cimport fixedwidth
from dissector.decoders cimport Decoded, Decoders
from dissector.events cimport Request, Response, response_expected
from dissector.framing cimport RequestHeader, parse_request_header, parse_response_header, response_header_version
from dissector.redact cimport needs_redaction
from dissector.ints cimport be_int
from dissector.skim cimport Skim, answers_skimmed, skimmed

cdef long long _SKIM_UNCOPIED

cdef class _Side:
    cdef public object budget, chunks, counted, have, need, first_ts, offset, synced, skip
    cpdef take(self)
    cpdef keep(self, rest, ts)

cdef class Options:
    cdef readonly object max_frame_size, keep_secrets, max_in_flight_bytes, infer_orphans, held, inference
    cdef readonly object message_events, skim

# options typed: its fields, read per frame, are C struct reads.
cdef class Connection:
    cdef public Decoders _decoders
    cdef public dict _pending
    cdef public Options options
    cdef public object topics, _sides, _pending_bytes, _cap_hits, _seq, _older_from
    cdef public object _seen_versions, _sasl_raw, _sasl_mechanism, _last_ts, _orphans, _full_misses
    cdef public object _inference_limited, _inferred, _skew_reported, _messages, _software
    cdef public Skim _skim

    @cython.locals(side=_Side)
    cpdef feed(self, direction, data, ts)
    cpdef _size_ok(self, direction, size)
    @cython.locals(side=_Side, b="const unsigned char*", pos=Py_ssize_t, n=Py_ssize_t, end=Py_ssize_t,
                   size="long long", to_broker=bint)
    cpdef _frames(self, direction, side, buf, first_ts, ts, out)
    @cython.locals(hdr=RequestHeader, d=Decoded, req=Request)
    cpdef _request(self, frame, first_ts, last_ts, offset, out, truncated_size=*)
    @cython.locals(gone=Request, pending=dict, old=tuple)
    cpdef _wait(self, Request req, corr, first_ts, offset, out)
    cpdef Request _unskim(self, Request req)
    @cython.locals(req=Request, d=Decoded, v0=Decoded, unanswered=Request, resp=Response, pending=dict)
    cpdef _response(self, frame, first_ts, last_ts, offset, out, truncated_size=*)
    cpdef _after_request(self, api_key, version, body, size=*)
    cpdef _after_response(self, api_key, body, request_body, size=*)
