# Compiled build only (setup.py): the events every exchange creates, as extension types. Cython
# builds their dataclass methods in C and code that declares a local of these types (the .pxd
# files beside connection.py and rows.py) reads their fields from a C struct, where Python would
# look each up by name (issue #8). events.py stays the only source; pure Python ignores this file.

cdef class DecodeFailure:
    cdef public object error, detail, offset

cdef class Request:
    cdef public object api_key, api_version, correlation_id, client_id, size, first_ts, last_ts
    cdef public object header_version, body, failure, stream_offset, raw, header_tags

cdef class Response:
    cdef public object correlation_id, size, first_ts, last_ts, api_key, api_version, header_version
    cdef public object body, failure, inferred, stream_offset, raw, header_tags

cdef class Exchange:
    cdef public Request request
    cdef public Response response
    cdef public object status

cdef class Anomaly:
    cdef public object kind, direction, ts, detail, stream_offset, extra

cdef class SaslToken:
    cdef public object direction, size, ts, mechanism, token

cpdef bint response_expected(object api_key, object body) except -1
