# Compiled build only (setup.py): the readers as C functions that other compiled modules cimport.
cimport cython

@cython.locals(b=bytes, v="long long", i=Py_ssize_t)
cpdef long long be_int(object buf, Py_ssize_t p, Py_ssize_t size) except? -1
@cython.locals(v="long long", i=Py_ssize_t)
cpdef long long be_uint(bytes b, Py_ssize_t p, Py_ssize_t size) except? -1
