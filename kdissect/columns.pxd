# Compiled build only (setup.py): TextColumn as an extension type, its buffers read from a C struct
# (issue #8). columns.py stays the only source; pure Python ignores this file.

cimport cython

cdef class TextColumn:
    cdef public object data, ends, valid
    cpdef append(self, value)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, cells="long long[::1]", valid=bytearray)
cpdef object _packed_ints(object values)

@cython.locals(index=dict)
cpdef object _repeated_strings(object values)
