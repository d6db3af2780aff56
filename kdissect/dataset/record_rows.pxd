# Compiled build only (setup.py): RecordRows as an extension type, so that its methods read their
# own attributes from a C struct, as RowBuilder's do (rows.pxd). record_rows.py stays the only source;
# pure Python ignores this file.

cdef class RecordRows:
    cdef public object capture, options, table, columns, payloads
