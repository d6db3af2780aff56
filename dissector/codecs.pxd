# Compiled build only (setup.py); codecs.py stays the only source, pure Python ignores this file.
# Startup: declared here, a dataclass is built by Cython at compile time; as Python, each costs
# ~0.6 ms of exec'd methods at import, 24 ms for the 38 a decode loaded (issue #8).
cdef class Budget:
    cdef public object remaining
