# Compiled build only (setup.py); shard.py stays the only source, pure Python ignores this file.
cdef class Share:
    cdef readonly object index, count

cdef class Dropping:
    cdef public unsigned int index, count
    cdef public long long seen, last_ts
