# Compiled build only (setup.py): the fold as an extension type, so that the per-exchange update
# reads its dicts from a C struct rather than through Python's attribute lookup. fold.py stays the
# only source; pure Python ignores this file.
cimport cython

cdef class MetricsFold:
    cdef public object max_series, idle_fraction, health, latencies
    cdef public dict requests, durations, produced, fetched
    cdef public dict throttle, rebalances, anomalies, folded
    cdef public dict commits, positions, watermarks, client_groups, generations, classic_members
    cdef public dict kip848_members, open, _gauges
    cdef public object shares
    cpdef _admit(self, dict d, tuple key, metric)
    cpdef _add(self, dict d, tuple key, n, metric)
    @cython.locals(d=dict, h=list)
    cpdef _observe(self, tuple key, seconds)
    # The columns are the writer's buffers (typed cells, read by index) or lists read back from Parquet.
    @cython.locals(requests=dict, durations=dict, h=list)
    cpdef exchange(self, ex, Py_ssize_t i, pa, Py_ssize_t p0, Py_ssize_t p1, source)
    @cython.locals(r=Py_ssize_t, j=Py_ssize_t, answers=dict)
    cpdef _produce(self, client_l, status, pa, Py_ssize_t p0, Py_ssize_t p1)
    cpdef _produced(self, tuple label, records, nbytes)
    @cython.locals(v=list)
    cpdef _flow(self, dict d, tuple label, records, nbytes, metric, metric_bytes)
    @cython.locals(j=Py_ssize_t, answers=dict)
    cpdef _partitions(self, api_key, client, client_l, status, request, pa, Py_ssize_t p0, Py_ssize_t p1)

@cython.locals(bound=double, k=Py_ssize_t)
cpdef Py_ssize_t _bucket(double seconds)
