# Compiled build only (setup.py); events.py stays the only source, pure Python ignores this file.
cdef class CaptureEvent:
    cdef public object conn, event
