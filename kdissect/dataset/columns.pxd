# Compiled build only (setup.py): TextColumn as an extension type, its buffers read from a C struct
# (issue #8). columns.py stays the only source; pure Python ignores this file.

cimport cython
from hotpath._speedups cimport clear_keeping_capacity

cdef class TextColumn:
    cdef public bytearray data, valid
    cdef public list ends
    cpdef append(self, value)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, cells="long long[::1]", valid=bytearray)
cpdef object _packed_ints(object values)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, v="long long", src="const long long[::1]", d8="signed char[::1]",
               d16="short[::1]", d32="int[::1]")
cpdef object _narrowed(object cells, str typecode)

cpdef object _repeated_strings(object values)

# The bytes through pointers: unchecked, where memoryview indexing checked each byte (~10
# instructions a byte). Every copy stays inside the offsets the first loop computed from the
# distinct values' own Arrow offsets ``start``, which ``data`` is sized by and ``pool`` holds.
@cython.locals(n=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, c=Py_ssize_t, o=Py_ssize_t, k=Py_ssize_t, end="long long",
               offsets="int[::1]", code="const int[::1]", start="const int[::1]", valid=bytearray,
               dst="unsigned char*", src="const unsigned char*")
cpdef object _expanded(object codes, object starts, bytes pool, Py_ssize_t null)

@cython.locals(i=Py_ssize_t, offsets="int[::1]")
cpdef object _steps(Py_ssize_t step, Py_ssize_t n)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, codes="int[::1]", code=int)
cpdef object _codes(object values, dict index)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, bits="unsigned char[::1]")
cpdef object _bits(const unsigned char[::1] flags)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, bits="unsigned char[::1]")
cpdef object _packed_bools(object values)
