# Compiled build only (setup.py): the event every exchange is wrapped in, as an extension type (see
# dissector/events.pxd). pipeline.py stays the only source; pure Python ignores this file.

cdef class CaptureEvent:
    cdef public object conn, event

from capture.flows cimport Flow
from capture.reassembly cimport HalfStream

cpdef _established(pipe, Flow flow, h, HalfStream hs, HalfStream peer, seg, seq, ack, flags, payload, missing, ts)

cdef class CaptureOptions:
    cdef public object ports, dissector, protocol, detect_limit, max_pending_bytes, max_pending_segments
    cdef public object max_hole_age, max_flows, soft_flows, idle_timeout, linger, report_limit, max_causal_wait
    cdef public object max_causal_segments, max_causal_bytes, max_held_frame_bytes, share, tls_keylog
    cdef public object tls_keylog_live, max_reorder_segments

cdef class CaptureStats:
    cdef public object bytes_read, size, packets, tcp_segments, non_tcp, ip_fragments, truncated_headers
    cdef public object malformed_packets, unsupported_linktype, caplen_exceeds_wirelen, capture_problems
    cdef public object connections, gaps, gap_bytes, truncated_segments, duplicate_segments
    cdef public object out_of_order_segments, conflicts, evicted, causal_held, causal_forced, dissector_errors
    cdef public object kernel_drops, rested, woken
