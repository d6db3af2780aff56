# Compiled build only (setup.py): the summary every records field gets, as an extension type, so
# that building it and reading it back into the body's JSON run in C (issue #8). records.py stays
# the only source; pure Python ignores this file.

cdef class RecordsSummary:
    cdef public object total_bytes, magics, batch_count, record_count, legacy_wrappers, first_offset
    cdef public object last_offset, first_timestamp, max_timestamp, codec, producer_id, producer_epoch
    cdef public object base_sequence, transactional, control, crc_checked, crc_failures, partial_tail
    cdef public object tail_bytes, error, error_offset, first_crc, data, out_of_range

cimport cython

from dissector.ints cimport be_int, be_uint

# Constants of the batch header's checks, as C integers.
cdef Py_ssize_t _V2_MIN_LENGTH, _V2_CRC_FROM, _MIN_RECORD
cdef long long _I64_TOP, _I64_BOTTOM

# The batch header's fields as C integers; the last offset, a sum that may leave int64, is checked
# before it is made (first, last and last_offset stay Python objects: a legacy wrapper's may be None).
@cython.locals(b=bytes, n=Py_ssize_t, pos=Py_ssize_t, end="long long", length="long long", magic=int,
               magic_mask=int, batches=Py_ssize_t, records="long long", wrappers=Py_ssize_t, unopened=Py_ssize_t,
               codec="long long", c="long long", attrs="long long", lod="long long", base_ts="long long",
               max_t="long long", count="long long", crc="long long", offset="long long", s=RecordsSummary)
cpdef object _summarize(object data, object check_crc, object max_decompressed)

cdef extern from *:
    """
    /* CRC-32C (Castagnoli, reflected 0x82F63B78), eight bytes a step by eight tables: the
       checksum of a small v2 batch, summed in place. Calling the crc32c package on a memoryview
       slice cost ~2,400 instructions a batch, most of it making the view and the slice. */
    static unsigned int kd_crc32c_table[8][256];
    static int kd_crc32c_ready = 0;

    static void kd_crc32c_init(void) {
        unsigned int i, k, c;
        for (i = 0; i < 256; i++) {
            c = i;
            for (k = 0; k < 8; k++)
                c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            kd_crc32c_table[0][i] = c;
        }
        for (i = 0; i < 256; i++) {
            c = kd_crc32c_table[0][i];
            for (k = 1; k < 8; k++) {
                c = kd_crc32c_table[0][c & 0xFF] ^ (c >> 8);
                kd_crc32c_table[k][i] = c;
            }
        }
        kd_crc32c_ready = 1;
    }

    static inline unsigned int kd_crc32c(const unsigned char *p, Py_ssize_t n) {
        unsigned int c = 0xFFFFFFFFu, lo, hi;
        if (!kd_crc32c_ready)
            kd_crc32c_init();
        while (n >= 8) {
            lo = c ^ ((unsigned int)p[0] | (unsigned int)p[1] << 8 | (unsigned int)p[2] << 16
                      | (unsigned int)p[3] << 24);
            hi = (unsigned int)p[4] | (unsigned int)p[5] << 8 | (unsigned int)p[6] << 16
                 | (unsigned int)p[7] << 24;
            c = kd_crc32c_table[7][lo & 0xFF] ^ kd_crc32c_table[6][(lo >> 8) & 0xFF]
                ^ kd_crc32c_table[5][(lo >> 16) & 0xFF] ^ kd_crc32c_table[4][lo >> 24]
                ^ kd_crc32c_table[3][hi & 0xFF] ^ kd_crc32c_table[2][(hi >> 8) & 0xFF]
                ^ kd_crc32c_table[1][(hi >> 16) & 0xFF] ^ kd_crc32c_table[0][hi >> 24];
            p += 8;
            n -= 8;
        }
        while (n-- > 0)
            c = kd_crc32c_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        return c ^ 0xFFFFFFFFu;
    }
    """
    unsigned int _crc32c_in_place "kd_crc32c"(const unsigned char *p, Py_ssize_t n)

@cython.locals(p="const unsigned char*")
cpdef object crc32c_of(bytes b, Py_ssize_t start, Py_ssize_t end)

# With --records, these are built per batch and record.
cdef class ControlRecord:
    cdef public object version, type, type_name, value_version, coordinator_epoch

cdef class Record:
    cdef public object offset, timestamp, key, value, headers, offset_delta, timestamp_delta, attributes, length
    cdef public object control

cdef class RecordBatch:
    cdef public object position, base_offset, batch_length, partition_leader_epoch, magic, crc, crc_valid
    cdef public object attributes, codec, timestamp_type, transactional, control, delete_horizon
    cdef public object last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch
    cdef public object base_sequence, record_count, records, decompressed_size, error, out_of_range

cdef class RecordSet:
    cdef public object batches, total_bytes, partial_tail, tail_bytes, error, error_offset

cdef extern from *:
    """
    /* RecordsSummary.to_dict() as compact JSON, byte for byte what orjson writes for that dict
       (kdissect.dataset.bodies embeds it as an orjson.Fragment): every exchange with records writes one,
       and building the 22-key dict for orjson cost more than the rest of the summary (issue #8).
       Takes to_dict's values in its order; returns None (so the caller builds the dict) for any
       value it does not write the same way: not an exact int / bool / None where one is expected,
       an int past 64 bits, a string needing escapes. */
    static inline int kd_json_int(char **p, PyObject *v) {
        long long x;
        unsigned long long u;
        int overflow = 0, n = 0;
        char digits[24];
        if (!PyLong_CheckExact(v))
            return -1;
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        do {
            digits[n++] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (x < 0)
            *(*p)++ = '-';
        while (n)
            *(*p)++ = digits[--n];
        return 0;
    }

    static inline int kd_json_lit(char **p, const char *s) {
        size_t n = strlen(s);
        memcpy(*p, s, n);
        *p += n;
        return 0;
    }

    static inline int kd_json_opt_int(char **p, PyObject *v) {
        return v == Py_None ? kd_json_lit(p, "null") : kd_json_int(p, v);
    }

    static inline int kd_json_bool(char **p, PyObject *v) {
        if (v == Py_True)
            return kd_json_lit(p, "true");
        if (v == Py_False)
            return kd_json_lit(p, "false");
        return -1;
    }

    /* Printable ASCII without quote or backslash: written as is, as orjson writes it. */
    static inline Py_ssize_t kd_json_plain_len(PyObject *v) {
        const char *s;
        Py_ssize_t n, i;
        if (v == Py_None)
            return 4;
        if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
            return -1;
        s = (const char *)PyUnicode_DATA(v);
        n = PyUnicode_GET_LENGTH(v);
        for (i = 0; i < n; i++)
            if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\\\')
                return -1;
        return n + 2;
    }

    static inline void kd_json_opt_str(char **p, PyObject *v) {
        Py_ssize_t n;
        if (v == Py_None) {
            kd_json_lit(p, "null");
            return;
        }
        n = PyUnicode_GET_LENGTH(v);
        *(*p)++ = '"';
        memcpy(*p, PyUnicode_DATA(v), (size_t)n);
        *p += n;
        *(*p)++ = '"';
    }

    static inline int kd_json_ints(char **p, PyObject *v) {
        Py_ssize_t i, n;
        PyObject **items;
        if (PyTuple_CheckExact(v)) {
            n = PyTuple_GET_SIZE(v);
            items = ((PyTupleObject *)v)->ob_item;
        } else if (PyList_CheckExact(v)) {
            n = PyList_GET_SIZE(v);
            items = ((PyListObject *)v)->ob_item;
        } else {
            return -1;
        }
        *(*p)++ = '[';
        for (i = 0; i < n; i++) {
            if (i)
                *(*p)++ = ',';
            if (kd_json_int(p, items[i]) < 0)
                return -1;
        }
        *(*p)++ = ']';
        return 0;
    }

    static inline Py_ssize_t kd_json_seq_len(PyObject *v) {
        if (PyTuple_CheckExact(v))
            return PyTuple_GET_SIZE(v);
        if (PyList_CheckExact(v))
            return PyList_GET_SIZE(v);
        return -1;
    }

    static inline PyObject *kd_summary_json(PyObject *t) {
        char small[1024], *buf = small, *p;
        PyObject **v, *out;
        Py_ssize_t codec_len, error_len, magics, failures, room;
        int bad = 0;
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 22)
            Py_RETURN_NONE;
        v = ((PyTupleObject *)t)->ob_item;
        codec_len = kd_json_plain_len(v[9]);
        error_len = kd_json_plain_len(v[20]);
        magics = kd_json_seq_len(v[1]);
        failures = kd_json_seq_len(v[16]);
        if (codec_len < 0 || error_len < 0 || magics < 0 || failures < 0)
            Py_RETURN_NONE;
        /* keys and punctuation ~330 bytes, each int at most 20 characters and a comma */
        room = 400 + 21 * (17 + magics + failures) + codec_len + error_len;
        if (room > (Py_ssize_t)sizeof(small)) {
            buf = (char *)PyMem_Malloc((size_t)room);
            if (buf == NULL)
                return PyErr_NoMemory();
        }
        p = buf;
        bad |= kd_json_lit(&p, "{\\"total_bytes\\":") | kd_json_int(&p, v[0]);
        bad |= kd_json_lit(&p, ",\\"magics\\":") | kd_json_ints(&p, v[1]);
        bad |= kd_json_lit(&p, ",\\"batch_count\\":") | kd_json_int(&p, v[2]);
        bad |= kd_json_lit(&p, ",\\"record_count\\":") | kd_json_opt_int(&p, v[3]);
        bad |= kd_json_lit(&p, ",\\"legacy_wrappers\\":") | kd_json_int(&p, v[4]);
        bad |= kd_json_lit(&p, ",\\"first_offset\\":") | kd_json_opt_int(&p, v[5]);
        bad |= kd_json_lit(&p, ",\\"last_offset\\":") | kd_json_opt_int(&p, v[6]);
        bad |= kd_json_lit(&p, ",\\"first_timestamp\\":") | kd_json_opt_int(&p, v[7]);
        bad |= kd_json_lit(&p, ",\\"max_timestamp\\":") | kd_json_opt_int(&p, v[8]);
        kd_json_lit(&p, ",\\"codec\\":");
        kd_json_opt_str(&p, v[9]);
        bad |= kd_json_lit(&p, ",\\"producer_id\\":") | kd_json_opt_int(&p, v[10]);
        bad |= kd_json_lit(&p, ",\\"producer_epoch\\":") | kd_json_opt_int(&p, v[11]);
        bad |= kd_json_lit(&p, ",\\"base_sequence\\":") | kd_json_opt_int(&p, v[12]);
        bad |= kd_json_lit(&p, ",\\"transactional\\":") | kd_json_bool(&p, v[13]);
        bad |= kd_json_lit(&p, ",\\"control\\":") | kd_json_bool(&p, v[14]);
        bad |= kd_json_lit(&p, ",\\"crc_checked\\":") | kd_json_bool(&p, v[15]);
        bad |= kd_json_lit(&p, ",\\"crc_failures\\":") | kd_json_ints(&p, v[16]);
        bad |= kd_json_lit(&p, ",\\"first_crc\\":") | kd_json_opt_int(&p, v[17]);
        bad |= kd_json_lit(&p, ",\\"partial_tail\\":") | kd_json_bool(&p, v[18]);
        bad |= kd_json_lit(&p, ",\\"tail_bytes\\":") | kd_json_int(&p, v[19]);
        kd_json_lit(&p, ",\\"error\\":");
        kd_json_opt_str(&p, v[20]);
        bad |= kd_json_lit(&p, ",\\"error_offset\\":") | kd_json_opt_int(&p, v[21]);
        *p++ = '}';
        out = bad ? (Py_INCREF(Py_None), Py_None) : PyBytes_FromStringAndSize(buf, p - buf);
        if (buf != small)
            PyMem_Free(buf);
        return out;
    }
    """
    object _summary_json "kd_summary_json"(object values)
