# Compiled build only (setup.py); shard.py stays the only source, pure Python ignores this file.
cdef class Share:
    cdef readonly object index, count
