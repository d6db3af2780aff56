# Compiled build only (setup.py): the request header as an extension type (see events.pxd).
# framing.py stays the only source; pure Python ignores this file.
from dissector.ints cimport be_int

cdef class RequestHeader:
    cdef public object api_key, api_version, correlation_id, client_id, header_version, body_offset, tags
