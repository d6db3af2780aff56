# Compiled build only (setup.py); pcapng.py stays the only source, pure Python ignores this file.
from hotpath._speedups cimport frame_share

cdef class Interface:
    cdef public object linktype, snaplen, mul, div, offset_ns, name
