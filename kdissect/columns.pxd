# Compiled build only (setup.py): TextColumn as an extension type, its buffers read from a C struct
# (issue #8). columns.py stays the only source; pure Python ignores this file.

cdef class TextColumn:
    cdef public object data, ends, valid
    cpdef append(self, value)
