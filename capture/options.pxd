# Compiled build only (setup.py); options.py stays the only source, pure Python ignores this file.
cdef class CaptureOptions:
    cdef public object ports, dissector, protocol, detect_limit, max_pending_bytes, max_pending_segments
    cdef public object max_hole_age, max_flows, soft_flows, idle_timeout, linger, report_limit, max_causal_wait
    cdef public object max_causal_segments, max_causal_bytes, max_held_frame_bytes, share, tls_keylog
    cdef public object tls_keylog_live, max_reorder_segments
