# Compiled build only (setup.py): the value loop as C methods, the bytes read as C loads.
cimport cython

cdef class Program:
    cdef readonly object root
    cdef bytes data
    cdef Py_ssize_t pos, end
    cdef int depth, max_depth
    cdef long long empties, empty_floor

    cpdef object read(self, bytes data, Py_ssize_t start)
    @cython.locals(data=bytes, pos=Py_ssize_t, end=Py_ssize_t, shift=int, n="unsigned long long", b="unsigned long long",
                   half="long long")
    cdef long long varint(self) except? -1
    @cython.locals(pos=Py_ssize_t)
    cdef bytes take(self, long long size)
    cdef object too_deep(self)
    @cython.locals(kind=int, pos=Py_ssize_t, at=Py_ssize_t, i="long long", n="long long", out=dict, items=list,
                   entries=dict)
    cdef object value(self, tuple node)
    @cython.locals(n="long long", at=Py_ssize_t)
    cdef long long block(self, bint empty) except? -1
