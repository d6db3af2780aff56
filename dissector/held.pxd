# Compiled build only (setup.py); held.py stays the only source, pure Python ignores this file.
cdef class HeldBytes:
    cdef public object limit, used, cuts
