# Compiled build only (setup.py): a TCP connection's state as an extension type, so that the
# per-packet code (capture.fastpath.established) reads it from a C struct (issue #8). flows.py
# stays the only source; pure Python ignores this file.

cdef class Flow:
    cdef public object bufs, causal_cap, client_half, closed, closing, conn, dirs, entries, first_ts, full
    cdef public object gate, h0, h1, held, info, key, last_ts, lost_start, ops, rkey, serial, skip, src_ports
    cdef public object state, syn_seen

cdef class ConnectionInfo:
    cdef public object id, client_ip, client_port, broker_ip, broker_port, first_ts, last_ts, state
    cdef public object handshake_seen, detection, tls

cdef class ConnectionEnd:
    cdef public object ts, reason, bytes_to_broker, bytes_to_client, gaps, gap_bytes, duplicate_segments
    cdef public object out_of_order_segments
