# Compiled build only (setup.py): RowBuilder as an extension type, so that its methods read
# their own attributes from a C struct rather than through Python's attribute lookup, one of
# the larger costs per exchange (issue #8). rows.py stays the only source; pure Python ignores this.
cimport cython
from capture.flows cimport ConnectionInfo
from dissector.events cimport Exchange, Request, Response
from dissector.records cimport RecordsSummary
from kdissect.dataset.bodies cimport body_bytes
from hotpath._speedups cimport find
from hotpath._cells cimport BoolCells, FloatCells, IntCells, TextCells
from kdissect.dataset.columns cimport TextColumn

cdef class Tally:
    cdef public object partitions, records, record_bytes

cdef class RowBuilder:
    cdef public object capture, options, topics, cols, kinds
    cdef public object _position, _unresolved, _ex, _pa, _an, _rec, _recrows
    cdef public object _ex0, _pa0, _an0
    cdef public object _rec0
    cdef public dict _api_names, _plans, _error_names, _quirky_brokers
    cpdef _api_name(self, api_key)
    cpdef _error_name(self, code)
    # The columns are typed cells (hotpath/_cells.pyx: append in C), the body and its entries dicts (get in C).
    @cython.locals(rq=Request, rs=Response, summary=RecordsSummary, body=dict, topic=dict, p=dict, n=Py_ssize_t,
                   capture=TextCells, connection=TextCells, a_corr=IntCells, a_key=IntCells, a_name=TextCells,
                   a_version=IntCells, direction=TextCells, a_ts=IntCells, a_topic=TextCells, a_topic_id=TextCells,
                   a_partition=IntCells, a_error_code=IntCells, a_error_name=TextCells, a_record_count=IntCells,
                   a_batch_count=IntCells, a_bytes=IntCells, a_offset=IntCells, a_base_offset=IntCells,
                   a_last_offset=IntCells, a_high_watermark=IntCells, a_compression=TextCells, a_client_id=TextCells)
    cpdef _partitions(self, conn, msg, kind, Tally tally, cid, name, ts, client)
    @cython.locals(n_ex=Py_ssize_t, n_pa=Py_ssize_t, n_an=Py_ssize_t, n_rec=Py_ssize_t)
    cpdef exchange(self, conn, ex, Tally tally)
    @cython.locals(ex=Exchange, req=Request, resp=Response, body=dict, ci=ConnectionInfo,
                   capture=TextCells, connection=TextCells, client_ip=TextCells, client_port=IntCells,
                   broker_ip=TextCells, broker_port=IntCells, tls_version=TextCells, tls_cipher=TextCells,
                   tls_sni=TextCells, a_key=IntCells, a_name=TextCells, a_version=IntCells, a_protocol=TextCells,
                   a_corr=IntCells, client_id=TextCells, request_ts=IntCells, response_ts=IntCells,
                   latency_ms=FloatCells, request_bytes=IntCells, response_bytes=IntCells, error_code=IntCells,
                   error_name_=TextCells, throttle=IntCells, status=TextCells, decode_error=TextCells,
                   request=TextColumn, response=TextColumn, inferred=BoolCells)
    cpdef _exchange(self, conn, ex, Tally tally)
    cpdef tuple _mark(self)

cpdef _plan_key(api_key, kind, version)

@cython.locals(text=bytes)
cpdef _nested_error(text)

cdef class RowOptions:
    cdef readonly object records, record_bytes, max_decompressed, payloads
