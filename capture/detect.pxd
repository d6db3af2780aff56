# Compiled build only (setup.py); detect.py stays the only source, pure Python ignores this file.
cdef class Decision:
    cdef readonly object verdict, client_half, reason

cdef class KafkaProbe:
    cdef readonly object sniff_request, find_request_frame, kafka, not_kafka, find_whole_request, known_request
    cdef readonly object max_frame
