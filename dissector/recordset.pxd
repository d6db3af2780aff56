# Compiled build only (setup.py); recordset.py stays the only source, and its docstring says what this file changes.
cimport cython

from dissector.batchheader cimport BatchHeader, entry_end

cdef Py_ssize_t MIN_RECORD, V2_HEADER
cdef unsigned long long _U32, _U64

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

@cython.locals(c="long long", attrs="long long", count="long long")
cpdef RecordBatch _decode_batch(bytes buf, Py_ssize_t pos, Py_ssize_t end, BatchHeader h, object budget,
                                object check_crc, object strict)

@cython.locals(b=int)
cdef (long long, Py_ssize_t) _varint(bytes buf, Py_ssize_t pos, int width) except *

@cython.locals(result="unsigned long long", shift=int, i=Py_ssize_t, b="unsigned long long")
cdef (long long, Py_ssize_t) _long_varint(bytes buf, Py_ssize_t pos, int width) except *

@cython.locals(count="long long", records=list, rec_start=Py_ssize_t, near_end=bint, lost=Py_ssize_t,
               length="long long", rec_end=Py_ssize_t, attrs=int, ts_delta="long long", off_delta="long long",
               n="long long", hk="long long", hv="long long", control=bint,
               _="long long", _h="long long")
cpdef _parse_records(bytes buf, Py_ssize_t pos, Py_ssize_t end, RecordBatch batch)
