# Compiled build only (setup.py); codecs.py stays the only source, pure Python ignores this file.
cdef class Budget:
    cdef public object remaining
