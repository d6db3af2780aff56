# Compiled build only (setup.py): the event every exchange is wrapped in, as an extension type (see
# dissector/events.pxd). pipeline.py stays the only source; pure Python ignores this file.

cdef class CaptureEvent:
    cdef public object conn, event
