# Compiled build only (setup.py): RowBuilder as an extension type, so that its methods read
# their own attributes from a C struct rather than through Python's attribute lookup, one of
# the larger costs per exchange (issue #8). rows.py stays the only source; pure Python ignores this.
cimport cython
from capture.flows cimport ConnectionInfo
from dissector.events cimport Exchange, Request, Response
from dissector.records cimport RecordsSummary
from kdissect.dataset.bodies cimport body_bytes
from hotpath._speedups cimport find

cdef class Tally:
    cdef public object partitions, records, record_bytes

cdef class RowBuilder:
    cdef public object capture, options, topics, cols, kinds
    cdef public object _position, _unresolved, _ex, _pa, _an, _rec, _recrows
    cdef public list _ex0, _pa0, _an0
    cdef public object _rec0
    cdef public dict _api_names, _plans, _error_names, _quirky_brokers
    cpdef _api_name(self, api_key)
    cpdef _error_name(self, code)
    # The columns are lists (append in C), the body and its entries dicts (get in C).
    @cython.locals(rq=Request, rs=Response, summary=RecordsSummary, body=dict, topic=dict, p=dict, n=Py_ssize_t,
                   capture=list, connection=list, a_corr=list, a_key=list, a_name=list, a_version=list,
                   direction=list, a_ts=list, a_topic=list, a_topic_id=list, a_partition=list,
                   a_error_code=list, a_error_name=list, a_record_count=list, a_batch_count=list, a_bytes=list,
                   a_offset=list, a_base_offset=list, a_last_offset=list, a_high_watermark=list,
                   a_compression=list, a_client_id=list)
    cpdef _partitions(self, conn, msg, kind, Tally tally, cid, name, ts, client)
    @cython.locals(n_ex=Py_ssize_t, n_pa=Py_ssize_t, n_an=Py_ssize_t, n_rec=Py_ssize_t)
    cpdef exchange(self, conn, ex, Tally tally)
    @cython.locals(ex=Exchange, req=Request, resp=Response, body=dict, ci=ConnectionInfo)
    cpdef _exchange(self, conn, ex, Tally tally)
    cpdef tuple _mark(self)

cpdef _plan_key(api_key, kind, version)

@cython.locals(text=bytes)
cpdef _nested_error(text)

cdef class RowOptions:
    cdef readonly object records, record_bytes, max_decompressed, payloads
