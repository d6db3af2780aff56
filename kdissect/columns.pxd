# Compiled build only (setup.py): TextColumn as an extension type, its buffers read from a C struct
# (issue #8). columns.py stays the only source; pure Python ignores this file.

cimport cython

cdef class TextColumn:
    cdef public bytearray data, valid
    cdef public list ends
    cpdef append(self, value)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, cells="long long[::1]", valid=bytearray)
cpdef object _packed_ints(object values)

cpdef object _repeated_strings(object values)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, codes="int[::1]", code=int)
cpdef object _codes(object values, dict index)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, bits="unsigned char[::1]")
cpdef object _bits(const unsigned char[::1] flags)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, bits="unsigned char[::1]")
cpdef object _packed_bools(object values)
