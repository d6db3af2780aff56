# Compiled build only (setup.py); protocols.py stays the only source, pure Python ignores this file.
cdef class ProtocolChoice:
    cdef readonly object default, ports
