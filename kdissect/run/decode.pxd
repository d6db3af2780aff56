# Compiled build only (setup.py): the loop that hands each capture event to the writer, its event
# and writer typed so that both reads and the call are C operations (issue #8). decode.py stays the
# only source; pure Python ignores this file.
cimport cython
from capture.events cimport CaptureEvent
from kdissect.dataset.writer cimport CaptureWriter

@cython.locals(ce=CaptureEvent)
cpdef _route(run, CaptureWriter writer)

cdef class DecodeResult:
    cdef public object outdir, counts, files, rotated, packets, bytes_read, elapsed

cdef class Progress:
    cdef public object capture, index, total, bytes_read, size, packets, exchanges, elapsed
