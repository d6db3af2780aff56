# Compiled build only (setup.py): the record loop's fields and offsets as C integers and the
# buffer as a pointer (issue #8). pcapfile.py stays the only source; pure Python ignores this file.
cimport cython
from capture.shard cimport Dropping
from hotpath._speedups cimport frame_share

@cython.locals(p="const unsigned char*", sec="unsigned long long", frac="unsigned long long",
               caplen="unsigned long long", wirelen="unsigned long long", end=Py_ssize_t,
               seen="long long", ts="long long", index=int, count="unsigned int", dropped=Py_ssize_t)
cpdef Py_ssize_t _plain_records(bytes b, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t hlen, bint little,
                                unsigned long long frac_ns, unsigned long long soft, object linktype,
                                Py_ssize_t l3, Py_ssize_t ethertype_at, Dropping dropping, list out) except -1

@cython.locals(p="const unsigned char*", c=Py_ssize_t, caplen="unsigned long long")
cpdef tuple skip_records(bytes b, Py_ssize_t at, Py_ssize_t stop, Py_ssize_t hlen, bint little, Py_ssize_t n,
                         Py_ssize_t every)
