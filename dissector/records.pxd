# Compiled build only (setup.py); records.py stays the only source, and its docstring says what this file changes.
cimport cython

from dissector.batchheader cimport BatchHeader, entry_end
from dissector.ints cimport be_int
from hotpath._speedups cimport summary_json

cdef long long _I64_TOP, _I64_BOTTOM

cdef class RecordsSummary:
    cdef public object total_bytes, magics, batch_count, record_count, legacy_wrappers, first_offset
    cdef public object last_offset, first_timestamp, max_timestamp, codec, producer_id, producer_epoch
    cdef public object base_sequence, transactional, control, crc_checked, crc_failures, partial_tail
    cdef public object tail_bytes, error, error_offset, first_crc, data, out_of_range

cpdef object summarize_field(object data, object check_crc=*, object max_decompressed=*)
@cython.locals(at="const unsigned char*")
cpdef object summarize_span(bytes b, Py_ssize_t start, Py_ssize_t end)

# first_offset, last_offset and first_ts stay Python objects: a legacy wrapper's may be None.
@cython.locals(b=bytes, n=Py_ssize_t, pos=Py_ssize_t, end=Py_ssize_t, magic=int, magic_mask=int, batches=Py_ssize_t,
               records="long long", wrappers=Py_ssize_t, unopened=Py_ssize_t, codec="long long", c="long long",
               attrs="long long", lod="long long", max_t="long long", count="long long", offset="long long",
               h=BatchHeader, s=RecordsSummary)
cpdef object _summarize(object data, object check_crc, object max_decompressed)
