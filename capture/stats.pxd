# Compiled build only (setup.py); stats.py stays the only source, pure Python ignores this file.
cdef class CaptureStats:
    cdef public object bytes_read, size, packets, tcp_segments, non_tcp, ip_fragments, truncated_headers
    cdef public object malformed_packets, unsupported_linktype, caplen_exceeds_wirelen, capture_problems
    cdef public object connections, gaps, gap_bytes, truncated_segments, duplicate_segments
    cdef public object out_of_order_segments, conflicts, evicted, causal_held, causal_forced, dissector_errors
    cdef public object kernel_drops, rested, woken
