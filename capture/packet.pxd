# Compiled build only (setup.py): the fast IPv4 parser's offsets and header fields as C integers,
# so that each byte it reads is a C load (issue #8). packet.py stays the only source; pure Python
# ignores this file.
cimport cython

@cython.locals(b="const unsigned char*", n=Py_ssize_t, doff=Py_ssize_t, start=Py_ssize_t, end=Py_ssize_t, t=Py_ssize_t,
               seq=Py_ssize_t, ack=Py_ssize_t)
cpdef object fast_ipv4(object data, Py_ssize_t l3, Py_ssize_t ethertype_at)

cdef class PacketIssue:
    cdef readonly object kind, detail
