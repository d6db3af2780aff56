# Compiled build only (setup.py): the request header as an extension type (see events.pxd).
# framing.py stays the only source; pure Python ignores this file.
cimport cython
from dissector cimport fixedwidth

# The header-version tables as C-level dicts, read with a typed get per frame (compiled, they
# are not module attributes: other modules ask known_request and the *_header_version functions).
cdef dict _REQ_HEADER, _RESP_HEADER

cdef class RequestHeader:
    cdef public object api_key, api_version, correlation_id, client_id, header_version, body_offset, tags

@cython.locals(b=bytes, size=Py_ssize_t, whole=bint, api_key="long long", version="long long", corr="long long",
               hv=Py_ssize_t, o=Py_ssize_t, n=Py_ssize_t, end=Py_ssize_t)
cpdef RequestHeader parse_request_header(object frame)

cpdef bint known_request(api_key, version)

cpdef response_header_version(api_key, version)

@cython.locals(corr="long long")
cpdef tuple parse_response_header(object frame, Py_ssize_t header_version)
