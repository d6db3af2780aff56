# The C-level entries of _speedups.pyx, for compiled callers to cimport (a C call, not a Python one).
cpdef object crc32c_of(bytes b, Py_ssize_t start, Py_ssize_t end)
cpdef int frame_share(bytes buf, Py_ssize_t start, Py_ssize_t caplen, Py_ssize_t l3, Py_ssize_t ethertype_at,
                      unsigned int count) except -2
cpdef object summary_json(object values)
cpdef object plain_json(object value, object summary_type, object summary_text)
cpdef Py_ssize_t find(bytes text, bytes key, Py_ssize_t start) except -2
cpdef int reserve_list(list values, Py_ssize_t n) except -1
cpdef void clear_keeping_capacity(list values)
