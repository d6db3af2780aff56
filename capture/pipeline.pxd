# Compiled build only (setup.py): the event every exchange is wrapped in, as an extension type (see
# dissector/events.pxd). pipeline.py stays the only source; pure Python ignores this file.

cdef class CaptureEvent:
    cdef public object conn, event

from capture.flows cimport Flow
from capture.reassembly cimport HalfStream

cpdef _established(pipe, Flow flow, h, HalfStream hs, HalfStream peer, seg, seq, ack, flags, payload, missing, ts)
