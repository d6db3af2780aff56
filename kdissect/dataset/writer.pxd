# Compiled build only (setup.py): the writers as extension types, so that the per-exchange calls
# between them are C calls on C structs rather than Python attribute look-ups (issue #8).
# dataset.py stays the only source; pure Python ignores this file.
cimport cython
from kdissect.dataset.rows cimport RowBuilder, Tally

cdef class Counts:
    cdef public object captures, connections, exchanges, per_api, statuses, errors, anomalies, partitions, records
    cdef public object flows

cdef class TableWriter:
    cdef public object path, tmp, table, rows, cols, weight, _batch_rows, _batch_bytes, _writer, out_of_range
    cpdef full(self)
    cpdef flush(self, final=*)

cdef class CaptureWriter:
    cdef public object capture, options, topics, _outdir, _name, _capture_level, _writers, _metrics
    cdef public Tally _tally
    cdef public Counts _counts
    cdef public dict _per_api, _statuses, _errors
    cdef public TableWriter _ex, _pa, _an, _rec
    cdef public RowBuilder _rows
    cpdef event(self, conn, ev)
    @cython.locals(per_api=dict, statuses=dict, errors=dict)
    cpdef exchange(self, conn, ex)
