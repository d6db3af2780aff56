# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed column buffers: the dataset's cells kept as C values from the moment a row builder appends them.

A list of Python objects per column costs an exchange three times over: the append, a conversion
loop over the list when the row group is flushed, and the list's release (a reference dropped per
cell, the ints and floats made only for the column freed there). These buffers keep int64,
float64, bool and text cells (text as a code per cell into the row group's distinct values) in C
arrays that become Arrow's buffers at the flush with one copy each.

What a buffer is not made for (an int past int64, a float or bool among ints, bytes among text) is
never judged here: the buffer turns into a plain list of the same cells (``spill``) and the list's
conversion (``kdissect.dataset.columns``) decides, as it does for every cell when kdissect runs as
Python, where these buffers are plain lists (``hotpath.cells``).

Their Python face is a list's, as far as anyone uses one: ``append``, ``len``, an index or a slice
(the live metrics read the rows just built), ``truncate`` (a failed exchange's rows taken back),
``take`` (the flush).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy, memmove, memset

cdef Py_ssize_t _FIRST = 1024      # cells of a new buffer; doubled when full


cdef void *_grown(void *p, Py_ssize_t cells, Py_ssize_t size) except NULL:
    cdef void *q = PyMem_Realloc(p, <size_t>(cells * size))
    if q == NULL:
        raise MemoryError()
    return q


cdef bytes _bits(const unsigned char *flags, Py_ssize_t n):
    """A bit per byte of ``flags`` (set where nonzero), least significant first: Arrow's bitmaps."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, (n + 7) >> 3)
    cdef unsigned char *bits = <unsigned char *>PyBytes_AS_STRING(out)
    cdef Py_ssize_t i
    memset(bits, 0, (n + 7) >> 3)
    for i in range(n):
        if flags[i]:
            bits[i >> 3] |= <unsigned char>(1 << (i & 7))
    return out


cdef class Packed:
    """Cells taken from a typed buffer, ready to be Arrow's buffers: ``kind`` is "int", "float", "bool"
    or "text"; ``data`` the values (int64, float64, value bits, or the texts' UTF-8 end to end, which
    ``offsets`` delimits as Arrow's int32 offsets); ``valid`` Arrow's validity bitmap, None when no cell
    is null. ``tolist()`` gives the cells as Python values, for the rare conversions that need a list
    (a value past a narrower int's range)."""

    def __init__(self, str kind, Py_ssize_t n, bytes data, object valid, bytes offsets=None):
        self.kind = kind
        self.n = n
        self.data = data
        self.valid = valid
        self.offsets = offsets

    def __len__(self):
        return self.n

    def narrowed(self, int width):
        """The int64 cells as ``width``-byte ints (1, 2 or 4); None if one does not fit."""
        cdef const long long *src = <const long long *>PyBytes_AS_STRING(self.data)
        cdef bytes out = PyBytes_FromStringAndSize(NULL, self.n * width)
        cdef char *dst = PyBytes_AS_STRING(out)
        cdef Py_ssize_t i
        cdef long long v
        if width == 1:
            for i in range(self.n):
                v = src[i]
                if v < -128 or v > 127:
                    return None
                (<signed char *>dst)[i] = <signed char>v
        elif width == 2:
            for i in range(self.n):
                v = src[i]
                if v < -32768 or v > 32767:
                    return None
                (<short *>dst)[i] = <short>v
        elif width == 4:
            for i in range(self.n):
                v = src[i]
                if v < -2147483648 or v > 2147483647:
                    return None
                (<int *>dst)[i] = <int>v
        else:
            raise ValueError(f"no {width}-byte ints")
        return out

    def tolist(self):
        cdef list out = []
        cdef Py_ssize_t i, start, end
        cdef const unsigned char *valid = NULL
        if self.valid is not None:
            valid = <const unsigned char *>PyBytes_AS_STRING(self.valid)
        for i in range(self.n):
            if valid != NULL and not (valid[i >> 3] >> (i & 7)) & 1:
                out.append(None)
            elif self.kind == "int":
                out.append((<const long long *>PyBytes_AS_STRING(self.data))[i])
            elif self.kind == "float":
                out.append((<const double *>PyBytes_AS_STRING(self.data))[i])
            elif self.kind == "bool":
                out.append(bool(((<const unsigned char *>PyBytes_AS_STRING(self.data))[i >> 3] >> (i & 7)) & 1))
            else:
                start = (<const int *>PyBytes_AS_STRING(self.offsets))[i]
                end = (<const int *>PyBytes_AS_STRING(self.offsets))[i + 1]
                out.append(self.data[start:end].decode())
        return out


cdef class _Cells:
    """What the typed buffers share: the validity bytes, the count, the spill list and its rules."""

    def __cinit__(self):
        self.n = 0
        self.cap = 0
        self.nulls = 0
        self.valid = NULL
        self.spill = None

    def __dealloc__(self):
        PyMem_Free(self.valid)

    def __len__(self):
        return self.n if self.spill is None else len(self.spill)

    def __getitem__(self, i):
        cdef Py_ssize_t k
        if self.spill is not None:
            return self.spill[i]
        if isinstance(i, slice):
            return [self._cell(j) for j in range(*i.indices(self.n))]
        k = i
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError("cell index out of range")
        return self._cell(k)

    def __iter__(self):
        return iter(self[:])

    cdef object _cell(self, Py_ssize_t k):
        raise NotImplementedError

    cdef int _room(self) except -1:
        raise NotImplementedError

    cdef int _spill(self) except -1:
        """From here on a list of the cells (see the module's doc)."""
        self.spill = [self._cell(k) for k in range(self.n)]
        self.n = self.nulls = 0
        return 0

    cpdef truncate(self, Py_ssize_t k):
        """Keep the first ``k`` cells."""
        cdef Py_ssize_t i
        if self.spill is not None:
            del self.spill[k:]
            return
        if k < 0:
            k = 0
        if k >= self.n:
            return
        for i in range(k, self.n):
            if not self.valid[i]:
                self.nulls -= 1
        self.n = k

    cdef object _valid_bits(self, Py_ssize_t k):
        cdef Py_ssize_t i
        if self.nulls == 0:
            return None
        for i in range(k):
            if not self.valid[i]:
                return _bits(self.valid, k)
        return None

    cdef int _drop(self, Py_ssize_t k, Py_ssize_t size, void *cells) except -1:
        """Remove the first ``k`` cells (``size`` bytes each, in ``cells``), keeping the rest in order."""
        cdef Py_ssize_t i
        if k == self.n:         # the usual flush: everything
            self.n = self.nulls = 0
            return 0
        for i in range(k):
            if not self.valid[i]:
                self.nulls -= 1
        memmove(cells, <char *>cells + k * size, (self.n - k) * size)
        memmove(self.valid, self.valid + k, self.n - k)
        self.n -= k
        return 0

    cdef object _take_spilled(self, Py_ssize_t k):
        """The first ``k`` cells of a spilled buffer, as a list; a buffer emptied this way is typed again."""
        taken = self.spill[:k]
        del self.spill[:k]
        if not self.spill:
            self.spill = None
        return taken


cdef class IntCells(_Cells):
    """int64 cells (the narrower ints and timestamps are narrowed or viewed at the flush)."""

    def __cinit__(self):
        self.cells = NULL

    def __dealloc__(self):
        PyMem_Free(self.cells)

    cdef int _room(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2 if self.cap else _FIRST
        self.cells = <long long *>_grown(self.cells, cap, sizeof(long long))
        self.valid = <unsigned char *>_grown(self.valid, cap, 1)
        self.cap = cap
        return 0

    cdef object _cell(self, Py_ssize_t k):
        return self.cells[k] if self.valid[k] else None

    cpdef append(self, object x):
        cdef int overflow = 0
        cdef long long v = 0
        if self.spill is not None:
            self.spill.append(x)
            return
        if x is not None:
            if type(x) is not int:
                self._spill()
                self.spill.append(x)
                return
            v = PyLong_AsLongLongAndOverflow(x, &overflow)
            if overflow:
                self._spill()
                self.spill.append(x)
                return
        if self.n == self.cap:
            self._room()
        self.cells[self.n] = v
        if x is None:
            self.valid[self.n] = 0
            self.nulls += 1
        else:
            self.valid[self.n] = 1
        self.n += 1

    cpdef take(self, Py_ssize_t k):
        """The first ``k`` cells, removed: a :class:`Packed` (a list once spilled)."""
        if self.spill is not None:
            return self._take_spilled(k)
        k = min(max(k, 0), self.n)
        out = Packed("int", k, PyBytes_FromStringAndSize(<char *>self.cells, k * sizeof(long long)),
                     self._valid_bits(k))
        self._drop(k, sizeof(long long), self.cells)
        return out


cdef class FloatCells(_Cells):
    """float64 cells; anything but a float or None spills (a list's conversion decides an int there)."""

    def __cinit__(self):
        self.cells = NULL

    def __dealloc__(self):
        PyMem_Free(self.cells)

    cdef int _room(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2 if self.cap else _FIRST
        self.cells = <double *>_grown(self.cells, cap, sizeof(double))
        self.valid = <unsigned char *>_grown(self.valid, cap, 1)
        self.cap = cap
        return 0

    cdef object _cell(self, Py_ssize_t k):
        return self.cells[k] if self.valid[k] else None

    cpdef append(self, object x):
        if self.spill is not None:
            self.spill.append(x)
            return
        if x is not None and type(x) is not float:
            self._spill()
            self.spill.append(x)
            return
        if self.n == self.cap:
            self._room()
        if x is None:
            self.cells[self.n] = 0.0
            self.valid[self.n] = 0
            self.nulls += 1
        else:
            self.cells[self.n] = PyFloat_AS_DOUBLE(x)
            self.valid[self.n] = 1
        self.n += 1

    cpdef take(self, Py_ssize_t k):
        if self.spill is not None:
            return self._take_spilled(k)
        k = min(max(k, 0), self.n)
        out = Packed("float", k, PyBytes_FromStringAndSize(<char *>self.cells, k * sizeof(double)),
                     self._valid_bits(k))
        self._drop(k, sizeof(double), self.cells)
        return out


cdef class BoolCells(_Cells):
    """True, False and None; anything else spills."""

    def __cinit__(self):
        self.cells = NULL

    def __dealloc__(self):
        PyMem_Free(self.cells)

    cdef int _room(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2 if self.cap else _FIRST
        self.cells = <unsigned char *>_grown(self.cells, cap, 1)
        self.valid = <unsigned char *>_grown(self.valid, cap, 1)
        self.cap = cap
        return 0

    cdef object _cell(self, Py_ssize_t k):
        return bool(self.cells[k]) if self.valid[k] else None

    cpdef append(self, object x):
        if self.spill is not None:
            self.spill.append(x)
            return
        if x is not None and x is not True and x is not False:
            self._spill()
            self.spill.append(x)
            return
        if self.n == self.cap:
            self._room()
        self.cells[self.n] = x is True
        if x is None:
            self.valid[self.n] = 0
            self.nulls += 1
        else:
            self.valid[self.n] = 1
        self.n += 1

    cpdef take(self, Py_ssize_t k):
        if self.spill is not None:
            return self._take_spilled(k)
        k = min(max(k, 0), self.n)
        out = Packed("bool", k, _bits(self.cells, k), self._valid_bits(k))
        self._drop(k, 1, self.cells)
        return out


cdef class TextCells(_Cells):
    """Text cells as int32 codes into the distinct values seen since the buffer was last emptied.

    A cell that is the very object of the cell before (a connection's id on each of its rows, names
    from one table) takes its code without a lookup. Only str and None: bytes spill, as their
    conversion differs.
    """

    def __cinit__(self):
        self.cells = NULL
        self.index = {}
        self.distinct = []
        self.last = self.prev = None
        self.last_code = self.prev_code = -1

    def __dealloc__(self):
        PyMem_Free(self.cells)

    cdef int _room(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2 if self.cap else _FIRST
        self.cells = <int *>_grown(self.cells, cap, sizeof(int))
        self.valid = <unsigned char *>_grown(self.valid, cap, 1)
        self.cap = cap
        return 0

    cdef object _cell(self, Py_ssize_t k):
        return self.distinct[self.cells[k]] if self.valid[k] else None

    cpdef append(self, object x):
        cdef int code
        cdef Py_ssize_t size
        if self.spill is not None:
            self.spill.append(x)
            return
        if x is self.last:
            code = self.last_code
        elif x is None:
            code = -1
        elif x is self.prev:        # two values taking turns (a request's row, then its response's)
            code = self.prev_code
            self.prev, self.prev_code = self.last, self.last_code
            self.last, self.last_code = x, code
        elif type(x) is str and type(self.last) is str and <str>x == <str>self.last:
            # A text decoded anew for each message (a client id, a topic name): equal to the cell before,
            # told by comparing, where a lookup would hash it first.
            code = self.last_code
        elif type(x) is str:
            known = self.index.get(x)
            if known is None:
                try:
                    PyUnicode_AsUTF8AndSize(x, &size)       # made once, kept by the str for take
                except UnicodeEncodeError:                  # a lone surrogate: the list's rules
                    self._spill()
                    self.spill.append(x)
                    return
                code = len(self.distinct)
                self.index[x] = code
                self.distinct.append(x)
            else:
                code = known
            self.prev, self.prev_code = self.last, self.last_code
            self.last, self.last_code = x, code
        else:
            self._spill()
            self.spill.append(x)
            return
        if self.n == self.cap:
            self._room()
        if code < 0:
            self.cells[self.n] = -1
            self.valid[self.n] = 0
            self.nulls += 1
        else:
            self.cells[self.n] = code
            self.valid[self.n] = 1
        self.n += 1

    cdef int _spill(self) except -1:
        _Cells._spill(self)
        self._forget()
        return 0

    cdef void _forget(self):
        self.index = {}
        self.distinct = []
        self.last = self.prev = None
        self.last_code = self.prev_code = -1

    cpdef take(self, Py_ssize_t k):
        """The first ``k`` cells, removed, as Arrow's offsets and UTF-8 data: each cell's text copied from
        the UTF-8 its str keeps (made once per distinct value). Past 2 GiB in one row group: ValueError."""
        cdef Py_ssize_t i, m = len(self.distinct), total = 0, size
        cdef int code
        cdef const char **texts
        cdef Py_ssize_t *sizes
        cdef bytes offsets, data
        cdef int *ends
        cdef char *out
        if self.spill is not None:
            return self._take_spilled(k)
        k = min(max(k, 0), self.n)
        texts = <const char **>_grown(NULL, m + 1, sizeof(char *))
        sizes = <Py_ssize_t *>_grown(NULL, m + 1, sizeof(Py_ssize_t))
        try:
            for i in range(m):
                texts[i] = PyUnicode_AsUTF8AndSize(self.distinct[i], &sizes[i])   # checked by append
            offsets = PyBytes_FromStringAndSize(NULL, (k + 1) * sizeof(int))
            ends = <int *>PyBytes_AS_STRING(offsets)
            ends[0] = 0
            for i in range(k):
                code = self.cells[i]
                if code >= 0:
                    total += sizes[code]
                    if total > 2147483647:
                        raise ValueError("a row group's text column exceeds 2 GiB")
                ends[i + 1] = <int>total
            data = PyBytes_FromStringAndSize(NULL, total)
            out = PyBytes_AS_STRING(data)
            for i in range(k):
                code = self.cells[i]
                if code >= 0:
                    size = sizes[code]
                    memcpy(out + ends[i], texts[code], size)
        finally:
            PyMem_Free(texts)
            PyMem_Free(sizes)
        out_cells = Packed("text", k, data, self._valid_bits(k), offsets)
        self._drop(k, sizeof(int), self.cells)
        if self.n == 0:         # a row group's distinct values are not kept for the next
            self._forget()
        return out_cells
