# Compiled build only (setup.py): the summary every records field gets, as an extension type, so
# that building it and reading it back into the body's JSON run in C (issue #8). records.py stays
# the only source; pure Python ignores this file.

cdef class RecordsSummary:
    cdef public object total_bytes, magics, batch_count, record_count, legacy_wrappers, first_offset
    cdef public object last_offset, first_timestamp, max_timestamp, codec, producer_id, producer_epoch
    cdef public object base_sequence, transactional, control, crc_checked, crc_failures, partial_tail
    cdef public object tail_bytes, error, error_offset, first_crc, data
