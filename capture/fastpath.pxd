# Compiled build only (setup.py); fastpath.py stays the only source, pure Python ignores this file.
cimport cython
from capture.events cimport CaptureEvent
from capture.flows cimport Flow
from capture.reassembly cimport HalfStream
from dissector.connection cimport Connection

@cython.locals(kafka=Connection)
cpdef established(release, delivery, Flow flow, h, HalfStream hs, HalfStream peer, seg, seq, ack, flags, payload,
                  missing, ts)
