# Compiled build only (setup.py); infer.py stays the only source, pure Python ignores this file.
# Startup: declared here, a dataclass is built by Cython at compile time; as Python, each costs
# ~0.6 ms of exec'd methods at import, 24 ms for the 38 a decode loaded (issue #8).
cdef class Inference:
    cdef public object api_key, api_version, header_version, body, candidates

cdef class InferenceBudget:
    cdef public object limit, misses
