# Compiled callers only: the C twins of fixedwidth.py's readers, inlined where they are called (see its
# docstring). No module is compiled from this file; nothing here is needed at run time but the callers'.
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from dissector.ints cimport be_int, be_uint

cdef extern from *:
    """
    /* Big-endian reads of bytes known to be there; the casts to signed types of the width sign-extend. */
    static inline long long kd_be_i8(const unsigned char *s) { return (signed char)s[0]; }
    static inline long long kd_be_i16(const unsigned char *s) {
        return (short)(unsigned short)((unsigned)s[0] << 8 | s[1]);
    }
    static inline unsigned long long kd_be_u16(const unsigned char *s) { return (unsigned)s[0] << 8 | s[1]; }
    static inline unsigned long long kd_be_u32(const unsigned char *s) {
        return (unsigned)s[0] << 24 | (unsigned)s[1] << 16 | (unsigned)s[2] << 8 | s[3];
    }
    static inline long long kd_be_i32(const unsigned char *s) { return (int)(unsigned)kd_be_u32(s); }
    static inline long long kd_be_i64(const unsigned char *s) {
        return (long long)(kd_be_u32(s) << 32 | kd_be_u32(s + 4));
    }
    """
    long long kd_be_i8(const unsigned char *s)
    long long kd_be_i16(const unsigned char *s)
    long long kd_be_i32(const unsigned char *s)
    long long kd_be_i64(const unsigned char *s)
    unsigned long long kd_be_u16(const unsigned char *s)
    unsigned long long kd_be_u32(const unsigned char *s)


cdef inline bint _there(object b, Py_ssize_t p, Py_ssize_t size) noexcept:
    return PyBytes_CheckExact(b) and p >= 0 and PyBytes_GET_SIZE(b) - p >= size


cdef inline const unsigned char *_at(object b, Py_ssize_t p) noexcept:
    return <const unsigned char *>PyBytes_AS_STRING(b) + p


cdef inline long long i8(object b, Py_ssize_t p) except? -1:
    return kd_be_i8(_at(b, p)) if _there(b, p, 1) else be_int(b, p, 1)


cdef inline long long i16(object b, Py_ssize_t p) except? -1:
    return kd_be_i16(_at(b, p)) if _there(b, p, 2) else be_int(b, p, 2)


cdef inline long long i32(object b, Py_ssize_t p) except? -1:
    return kd_be_i32(_at(b, p)) if _there(b, p, 4) else be_int(b, p, 4)


cdef inline long long i64(object b, Py_ssize_t p) except? -1:
    return kd_be_i64(_at(b, p)) if _there(b, p, 8) else be_int(b, p, 8)


cdef inline long long u16(object b, Py_ssize_t p) except? -1:
    return kd_be_u16(_at(b, p)) if _there(b, p, 2) else be_uint(b, p, 2)


cdef inline long long u32(object b, Py_ssize_t p) except? -1:
    return kd_be_u32(_at(b, p)) if _there(b, p, 4) else be_uint(b, p, 4)
