# Compiled build only (setup.py): the skim's state as an extension type and its per-frame checks as C
# calls from dissector.connection, which skims every Produce and Fetch before a worker's range.
# skim.py stays the only source; pure Python ignores this file.
cimport cython
from dissector.events cimport Request
from dissector.framing cimport RequestHeader, known_request

cdef class Skim:
    cdef public object counter
    cdef public long long start
    cdef public bint done
    @cython.locals(packets="long long")
    cpdef bint active(self)

@cython.locals(o=Py_ssize_t, n=Py_ssize_t, length=Py_ssize_t, shift=int, b=int)
cpdef object produce_acks(bytes frame, Py_ssize_t body_offset, long long version)

cdef int _i16(bytes b, Py_ssize_t o)

@cython.locals(api_key=int, acks=object)
cpdef Request skimmed(Skim skim, RequestHeader hdr, bytes frame, object size, object first_ts, object last_ts,
                      object offset)

@cython.locals(entry=tuple, req=Request)
cpdef bint answers_skimmed(Skim skim, dict pending, object corr) except -1
