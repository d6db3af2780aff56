# Compiled build only (setup.py); infer.py stays the only source, pure Python ignores this file.
cdef class Inference:
    cdef public object api_key, api_version, header_version, body, candidates

cdef class InferenceBudget:
    cdef public object limit, misses
