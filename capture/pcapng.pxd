# Compiled build only (setup.py); pcapng.py stays the only source, pure Python ignores this file.
cdef class Interface:
    cdef public object linktype, snaplen, mul, div, offset_ns, name
