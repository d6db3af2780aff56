# Compiled build only (setup.py); messages.py stays the only source, pure Python ignores this file.
# MessageSetSummary stays Python: it extends the compiled RecordsSummary of another module (see
# hotpath.inheritable).
cdef class Message07:
    cdef public object position, offset, length, magic, attributes, codec, checksum, crc_valid, payload
    cdef public object inner, error

cdef class MessageSet07:
    cdef public object messages, total_bytes, partial_tail, tail_bytes, error, error_offset
