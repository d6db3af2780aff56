# Compiled build only (setup.py): the summary every records field gets, as an extension type, so
# that building it and reading it back into the body's JSON run in C (issue #8). records.py stays
# the only source; pure Python ignores this file.

cdef class RecordsSummary:
    cdef public object total_bytes, magics, batch_count, record_count, legacy_wrappers, first_offset
    cdef public object last_offset, first_timestamp, max_timestamp, codec, producer_id, producer_epoch
    cdef public object base_sequence, transactional, control, crc_checked, crc_failures, partial_tail
    cdef public object tail_bytes, error, error_offset, first_crc, data, out_of_range

cimport cython

from dissector.ints cimport be_int, be_uint
from hotpath._speedups cimport crc32c_of, summary_json

# Constants of the batch header's checks, as C integers.
cdef Py_ssize_t _V2_MIN_LENGTH, _V2_CRC_FROM, _MIN_RECORD
cdef long long _I64_TOP, _I64_BOTTOM

# The batch header's fields as C integers; the last offset, a sum that may leave int64, is checked
# before it is made (first, last and last_offset stay Python objects: a legacy wrapper's may be None).
@cython.locals(b=bytes, n=Py_ssize_t, pos=Py_ssize_t, end="long long", length="long long", magic=int,
               magic_mask=int, batches=Py_ssize_t, records="long long", wrappers=Py_ssize_t, unopened=Py_ssize_t,
               codec="long long", c="long long", attrs="long long", lod="long long", base_ts="long long",
               max_t="long long", count="long long", crc="long long", offset="long long", s=RecordsSummary)
cpdef object _summarize(object data, object check_crc, object max_decompressed)

# With --records, these are built per batch and record.
cdef class ControlRecord:
    cdef public object version, type, type_name, value_version, coordinator_epoch

cdef class Record:
    cdef public object offset, timestamp, key, value, headers, offset_delta, timestamp_delta, attributes, length
    cdef public object control

cdef class RecordBatch:
    cdef public object position, base_offset, batch_length, partition_leader_epoch, magic, crc, crc_valid
    cdef public object attributes, codec, timestamp_type, transactional, control, delete_horizon
    cdef public object last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch
    cdef public object base_sequence, record_count, records, decompressed_size, error, out_of_range

cdef class RecordSet:
    cdef public object batches, total_bytes, partial_tail, tail_bytes, error, error_offset
