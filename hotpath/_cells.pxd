# The typed column buffers of _cells.pyx, for compiled row builders to cimport. ``add`` is ``append``
# inlined into the caller: a cell that fits the buffer's room and type is stored in a few instructions
# (a call, even a C one, cost more than a list's own append); anything else goes through ``append``.
# Python sees ``append`` only; ``hotpath.cells`` gives its lists an ``add`` too, for rows.py's one source.
from cpython.long cimport PyLong_AsLongLongAndOverflow
cdef class Packed:
    cdef readonly str kind
    cdef readonly Py_ssize_t n
    cdef readonly bytes data
    cdef readonly object valid
    cdef readonly bytes offsets

cdef class _Cells:
    cdef Py_ssize_t n, cap, nulls
    cdef unsigned char *valid
    cdef list spill
    cdef object _cell(self, Py_ssize_t k)
    cdef int _room(self) except -1
    cdef int _spill(self) except -1
    cpdef truncate(self, Py_ssize_t k)
    cdef object _valid_bits(self, Py_ssize_t k)
    cdef int _drop(self, Py_ssize_t k, Py_ssize_t size, void *cells) except -1
    cdef object _take_spilled(self, Py_ssize_t k)

cdef class IntCells(_Cells):
    cdef long long *cells
    cpdef append(self, object x)
    cpdef take(self, Py_ssize_t k)

    cdef inline int add(self, object x) except -1:
        cdef Py_ssize_t n = self.n
        cdef int overflow = 0
        cdef long long v
        if n < self.cap and self.spill is None:
            if x is None:
                self.cells[n] = 0
                self.valid[n] = 0
                self.nulls += 1
                self.n = n + 1
                return 0
            if type(x) is int:
                v = PyLong_AsLongLongAndOverflow(x, &overflow)
                if not overflow:
                    self.cells[n] = v
                    self.valid[n] = 1
                    self.n = n + 1
                    return 0
        self.append(x)
        return 0

cdef class FloatCells(_Cells):
    cdef double *cells
    cpdef append(self, object x)
    cpdef take(self, Py_ssize_t k)

    cdef inline int add(self, object x) except -1:
        cdef Py_ssize_t n = self.n
        if n < self.cap and self.spill is None and type(x) is float:
            self.cells[n] = <double>x
            self.valid[n] = 1
            self.n = n + 1
            return 0
        self.append(x)
        return 0

cdef class BoolCells(_Cells):
    cdef unsigned char *cells
    cpdef append(self, object x)
    cpdef take(self, Py_ssize_t k)

    cdef inline int add(self, object x) except -1:
        cdef Py_ssize_t n = self.n
        if n < self.cap and self.spill is None and (x is True or x is False):
            self.cells[n] = x is True
            self.valid[n] = 1
            self.n = n + 1
            return 0
        self.append(x)
        return 0

cdef class TextCells(_Cells):
    cdef int *cells
    cdef dict index
    cdef list distinct
    cdef object last, prev
    cdef int last_code, prev_code
    cpdef append(self, object x)
    cpdef take(self, Py_ssize_t k)
    cdef void _forget(self)

    cdef inline int add(self, object x) except -1:
        # The same object as the cell before (a connection's id, a name from one table): its code again.
        cdef Py_ssize_t n = self.n
        if n < self.cap and self.spill is None and x is self.last and x is not None:
            self.cells[n] = self.last_code
            self.valid[n] = 1
            self.n = n + 1
            return 0
        self.append(x)
        return 0
