# Compiled build only (setup.py); batchheader.py stays the only source, and its docstring says what this file changes.
cimport cython
from dissector cimport fixedwidth
from hotpath._speedups cimport crc32c_of

cdef Py_ssize_t _V2_MIN_LENGTH, _V2_CRC_FROM, _MIN_RECORD

@cython.locals(length="long long", magic=int, end=Py_ssize_t)
cpdef Py_ssize_t entry_end(bytes b, Py_ssize_t pos, Py_ssize_t n) except -2

cdef class BatchHeader:
    cdef public long long base_offset, batch_length, partition_leader_epoch, crc, attributes, last_offset_delta
    cdef public long long base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, record_count

    cpdef read(self, bytes b, Py_ssize_t pos)
    @cython.locals(got="long long")
    cpdef bint crc_matches(self, bytes b, Py_ssize_t pos) except -1
    cpdef bint count_fits(self)
