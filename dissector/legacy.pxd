# Compiled build only (setup.py); legacy.py stays the only source, pure Python ignores this file.
cdef class LegacyMessage:
    cdef public object position, offset, wire_offset, message_size, crc, crc_valid, magic, attributes, codec
    cdef public object timestamp_type, timestamp, wire_timestamp, key, value, inner, error, out_of_range
