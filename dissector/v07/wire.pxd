# Compiled build only (setup.py); wire.py stays the only source, pure Python ignores this file.
cdef class Target:
    cdef public object topic, partition, offset
