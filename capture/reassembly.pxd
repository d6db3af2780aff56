# Compiled build only (setup.py): one direction's ordering state as an extension type (see
# flows.pxd). reassembly.py stays the only source; pure Python ignores this file.

cdef class HalfStream:
    cdef public object _acked_seen, ack_wait
    cdef public object _last, _last_off, _offs, _pend, conflicts, dup_segments, fin_off, gap_bytes, gaps, isn
    cdef public object max_bytes, max_hole_age, max_segments, next_seq, offset, ooo_segments, peer_ack
    cdef public object pending_bytes, started

    cpdef bint has_pending(self)
    cpdef object take_next(self, object payload)
