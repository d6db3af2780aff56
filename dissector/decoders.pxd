# Compiled build only (setup.py): Decoders as an extension type, so that a connection's call to
# decode a body is a C call (issue #8). decoders.py stays the only source; pure Python ignores this.

cdef class Decoders:
    cdef public object _records_hook, _cache, code_cache
    cdef public dict _prebuilt, _budgeted, _safe
    cdef public object _floor, _ratio
    cdef public Py_ssize_t _unchecked
    cpdef get(self, api_key, kind, version)
    cpdef decode(self, api_key, kind, version, b, o)
    cpdef _plain(self, api_key, kind, version, b, o)

cdef class Decoded:
    cdef public object body, end, failure
