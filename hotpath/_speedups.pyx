# cython: language_level=3, binding=False
"""The few helpers of the hot path written in C: each is a loop over raw bytes or a list's
storage that Python cannot express at any speed. Their pure-Python twins, with the same names and
results, are in ``_speedups_pure.py``; ``speedups.py`` chooses between the two, once, at import.

A compiled caller reaches these through ``_speedups.pxd`` (``from hotpath._speedups cimport ...``),
a C call; its ``.py`` imports the same name from ``hotpath.speedups``, which as Python is the twin.
"""
from hotpath._speedups_pure import SUMMARY_KEYS  # noqa: F401 - the order kd_summary_json writes the keys in
from hotpath.crc import crc32c as _crc32c_package

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

cdef extern from *:
    """
    /* The share of a TCP/IPv4 connection, computed on the frame's bytes so that another share's
       packets are dropped before any Python object is made for them (issue #8). Exactly
       capture.shard.share_of on the flow key capture.packet.fast_ipv4 would return:
       CRC-32 (zlib's) of the smaller of the key and its reverse, modulo count. -1 for any frame
       fast_ipv4 would not take; those go the general way. */
    static unsigned int kd_crc32_table[256];
    static int kd_crc32_ready = 0;

    static void kd_crc32_init(void) {
        unsigned int i, k, c;
        for (i = 0; i < 256; i++) {
            c = i;
            for (k = 0; k < 8; k++)
                c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            kd_crc32_table[i] = c;
        }
        kd_crc32_ready = 1;
    }

    static inline int kd_ipv4_share(const unsigned char *b, Py_ssize_t n, Py_ssize_t l3, Py_ssize_t ethertype_at,
                                    unsigned int count) {
        const unsigned char *key, *lo;
        unsigned char rev[12];
        Py_ssize_t start, end;
        unsigned int doff, crc;
        int i;
        if (l3 < 0 || (ethertype_at >= 0 && ethertype_at > l3 - 2) || n < l3 + 40)
            return -1;
        if (ethertype_at >= 0 && (b[ethertype_at] != 0x08 || b[ethertype_at + 1] != 0x00))
            return -1;
        doff = b[l3 + 32];
        if (b[l3] != 0x45 || b[l3 + 9] != 6 || (b[l3 + 6] & 0x3F) || b[l3 + 7] || doff < 0x50)
            return -1;
        start = l3 + 20 + ((doff >> 4) << 2);
        end = l3 + ((b[l3 + 2] << 8) | b[l3 + 3]);
        if (start > end || end > n)
            return -1;
        key = b + l3 + 12;          /* source, destination, source port, destination port */
        memcpy(rev, key + 4, 4);
        memcpy(rev + 4, key, 4);
        rev[8] = key[10]; rev[9] = key[11]; rev[10] = key[8]; rev[11] = key[9];
        lo = memcmp(key, rev, 12) < 0 ? key : rev;
        if (!kd_crc32_ready)
            kd_crc32_init();
        crc = 0xFFFFFFFFu;
        for (i = 0; i < 12; i++)
            crc = kd_crc32_table[(crc ^ lo[i]) & 0xFF] ^ (crc >> 8);
        return (int)((crc ^ 0xFFFFFFFFu) % count);
    }
    """
    int _ipv4_share "kd_ipv4_share"(const unsigned char *b, Py_ssize_t n, Py_ssize_t l3, Py_ssize_t ethertype_at,
                                    unsigned int count)

cdef extern from *:
    """
    /* RecordsSummary.to_dict() as compact JSON, byte for byte what orjson writes for that dict
       (kdissect.dataset.bodies embeds it as an orjson.Fragment): every exchange with records writes one,
       and building the 22-key dict for orjson cost more than the rest of the summary (issue #8).
       Takes to_dict's values in its order; returns None (so the caller builds the dict) for any
       value it does not write the same way: not an exact int / bool / None where one is expected,
       an int past 64 bits, a string needing escapes. */
    /* "00".."99": an int is written two digits a division, where a digit a division cost
       ~1,800 instructions a summary (its timestamps and offsets are 13 to 19 digits). */
    static const char kd_json_pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";

    /* An exact int within 64 bits, as orjson writes it; -1 (no error set) for anything else. */
    static inline int kd_json_int(char **p, PyObject *v) {
        long long x;
        unsigned long long u;
        unsigned int r;
        int overflow = 0;
        /* Written right to left ending at digits + 24, then copied as 20 bytes, a fixed size the
           compiler copies in place: the callers leave 21 bytes of room for an int. */
        char digits[48], *d = digits + 24;
        if (!PyLong_CheckExact(v))
            return -1;
        /* An int of one digit (below 2**30) read in place: the call cost a third of the int's writing. */
    #if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
            x = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        } else
    #else
        if (Py_SIZE(v) >= -1 && Py_SIZE(v) <= 1) {
            x = (long long)Py_SIZE(v) * (long long)((PyLongObject *)v)->ob_digit[0];
        } else
    #endif
        {
            x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow || (x == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return -1;
            }
        }
        u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        while (u >= 100) {
            r = (unsigned int)(u % 100);
            u /= 100;
            d -= 2;
            memcpy(d, kd_json_pairs + 2 * r, 2);
        }
        if (u >= 10) {
            d -= 2;
            memcpy(d, kd_json_pairs + 2 * u, 2);
        } else {
            *--d = (char)('0' + u);
        }
        if (x < 0)
            *(*p)++ = '-';
        memcpy(*p, d, 20);
        *p += digits + 24 - d;
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

    /* The bytes a summary's values (a 22-tuple, to_dict's order) may take, or -1 for values
       kd_summary_write does not take. */
    static inline Py_ssize_t kd_summary_room(PyObject *t) {
        PyObject **v;
        Py_ssize_t codec_len, error_len, magics, failures;
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 22)
            return -1;
        v = ((PyTupleObject *)t)->ob_item;
        codec_len = kd_json_plain_len(v[9]);
        error_len = kd_json_plain_len(v[20]);
        magics = kd_json_seq_len(v[1]);
        failures = kd_json_seq_len(v[16]);
        if (codec_len < 0 || error_len < 0 || magics < 0 || failures < 0)
            return -1;
        /* keys and punctuation ~330 bytes, each int at most 20 characters and a comma */
        return 400 + 21 * (17 + magics + failures) + codec_len + error_len;
    }

    /* The summary at *p, within the room kd_summary_room gave; nonzero for a value written otherwise. */
    static inline int kd_summary_write(char **p, PyObject *t) {
        PyObject **v = ((PyTupleObject *)t)->ob_item;
        int bad = 0;
        bad |= kd_json_lit(p, "{\\"total_bytes\\":") | kd_json_int(p, v[0]);
        bad |= kd_json_lit(p, ",\\"magics\\":") | kd_json_ints(p, v[1]);
        bad |= kd_json_lit(p, ",\\"batch_count\\":") | kd_json_int(p, v[2]);
        bad |= kd_json_lit(p, ",\\"record_count\\":") | kd_json_opt_int(p, v[3]);
        bad |= kd_json_lit(p, ",\\"legacy_wrappers\\":") | kd_json_int(p, v[4]);
        bad |= kd_json_lit(p, ",\\"first_offset\\":") | kd_json_opt_int(p, v[5]);
        bad |= kd_json_lit(p, ",\\"last_offset\\":") | kd_json_opt_int(p, v[6]);
        bad |= kd_json_lit(p, ",\\"first_timestamp\\":") | kd_json_opt_int(p, v[7]);
        bad |= kd_json_lit(p, ",\\"max_timestamp\\":") | kd_json_opt_int(p, v[8]);
        kd_json_lit(p, ",\\"codec\\":");
        kd_json_opt_str(p, v[9]);
        bad |= kd_json_lit(p, ",\\"producer_id\\":") | kd_json_opt_int(p, v[10]);
        bad |= kd_json_lit(p, ",\\"producer_epoch\\":") | kd_json_opt_int(p, v[11]);
        bad |= kd_json_lit(p, ",\\"base_sequence\\":") | kd_json_opt_int(p, v[12]);
        bad |= kd_json_lit(p, ",\\"transactional\\":") | kd_json_bool(p, v[13]);
        bad |= kd_json_lit(p, ",\\"control\\":") | kd_json_bool(p, v[14]);
        bad |= kd_json_lit(p, ",\\"crc_checked\\":") | kd_json_bool(p, v[15]);
        bad |= kd_json_lit(p, ",\\"crc_failures\\":") | kd_json_ints(p, v[16]);
        bad |= kd_json_lit(p, ",\\"first_crc\\":") | kd_json_opt_int(p, v[17]);
        bad |= kd_json_lit(p, ",\\"partial_tail\\":") | kd_json_bool(p, v[18]);
        bad |= kd_json_lit(p, ",\\"tail_bytes\\":") | kd_json_int(p, v[19]);
        kd_json_lit(p, ",\\"error\\":");
        kd_json_opt_str(p, v[20]);
        bad |= kd_json_lit(p, ",\\"error_offset\\":") | kd_json_opt_int(p, v[21]);
        *(*p)++ = '}';
        return bad;
    }

    static inline PyObject *kd_summary_json(PyObject *t) {
        char small[1024], *buf = small, *p;
        PyObject *out;
        Py_ssize_t room = kd_summary_room(t);
        if (room < 0)
            Py_RETURN_NONE;
        if (room > (Py_ssize_t)sizeof(small)) {
            buf = (char *)PyMem_Malloc((size_t)room);
            if (buf == NULL)
                return PyErr_NoMemory();
        }
        p = buf;
        out = kd_summary_write(&p, t) ? (Py_INCREF(Py_None), Py_None) : PyBytes_FromStringAndSize(buf, p - buf);
        if (buf != small)
            PyMem_Free(buf);
        return out;
    }
    """
    object _summary_json "kd_summary_json"(object values)

cdef extern from *:
    """
    /* A decoded body as compact JSON, byte for byte what orjson writes for it (issue #46): every
       exchange writes two small bodies, and orjson's own walk, its output buffer and its round trip
       through a Python default for the records summary cost ~11,000 instructions an exchange.
       Writes exact dicts with str keys, lists, tuples, str, ints within 64 bits, bools and None, and
       an object of exactly summary_type as kd_summary_json writes the values summary_values(object)
       returns, straight into the body; declines (None: the caller has orjson write the body) anything
       else: floats, bytes, subclasses, text needing escapes or not UTF-8, an int past 64 bits, nesting
       deeper than orjson's, a summary kd_summary_json declines. */
    typedef struct {
        char *p, *end, *heap;
        char small[2048];
    } kd_jbuf;

    enum { KD_J_OK = 0, KD_J_DECLINE = 1, KD_J_ERROR = -1 };

    static int kd_jbuf_grow(kd_jbuf *b, Py_ssize_t need) {
        char *base = b->heap != NULL ? b->heap : b->small;
        size_t used = (size_t)(b->p - base), size = (size_t)(b->end - base), want = used + (size_t)need;
        char *grown;
        while (size < want)
            size *= 2;
        if (b->heap != NULL) {
            grown = (char *)PyMem_Realloc(b->heap, size);
        } else {
            grown = (char *)PyMem_Malloc(size);
            if (grown != NULL)
                memcpy(grown, b->small, used);
        }
        if (grown == NULL) {
            PyErr_NoMemory();
            return KD_J_ERROR;
        }
        b->heap = grown;
        b->p = grown + used;
        b->end = grown + size;
        return KD_J_OK;
    }

    #define KD_J_ROOM(b, n) (((b)->end - (b)->p >= (Py_ssize_t)(n)) ? KD_J_OK : kd_jbuf_grow((b), (n)))

    /* Whether any of eight bytes needs an escape in JSON: below 0x20, '"' or backslash, eight at a
       time (a byte at a time was most of a body's writing). Bytes of UTF-8 past ASCII never match. */
    #define KD_J_ONES 0x0101010101010101ULL
    #define KD_J_HIGH 0x8080808080808080ULL
    #define KD_J_ZERO_BYTE(x) (((x) - KD_J_ONES) & ~(x) & KD_J_HIGH)
    #define KD_J_ESCAPES(w) ((((w) - 0x20 * KD_J_ONES) & ~(w) & KD_J_HIGH) \\
                             | KD_J_ZERO_BYTE((w) ^ (0x22 * KD_J_ONES)) | KD_J_ZERO_BYTE((w) ^ (0x5c * KD_J_ONES)))

    /* A str as orjson writes it when it needs no escape: its UTF-8 between quotes. */
    static inline int kd_jstr(kd_jbuf *b, PyObject *s) {
        const char *text;
        Py_ssize_t n, i;
        unsigned long long w;
        unsigned int lo = 0, hi = 0;
        if (PyUnicode_IS_ASCII(s)) {
            text = (const char *)PyUnicode_DATA(s);
            n = PyUnicode_GET_LENGTH(s);
        } else {
            text = PyUnicode_AsUTF8AndSize(s, &n);
            if (text == NULL) {         /* a lone surrogate: orjson refuses it too */
                PyErr_Clear();
                return KD_J_DECLINE;
            }
        }
        /* Eight bytes a step, the last eight overlapping the step before; shorter text in two
           overlapping halves: fixed sizes, copied in registers. */
        if (n >= 8) {
            for (i = 0; i + 8 < n; i += 8) {
                memcpy(&w, text + i, 8);
                if (KD_J_ESCAPES(w))
                    return KD_J_DECLINE;
            }
            memcpy(&w, text + n - 8, 8);
        } else if (n >= 4) {
            memcpy(&lo, text, 4);
            memcpy(&hi, text + n - 4, 4);
            w = (unsigned long long)lo | (unsigned long long)hi << 32;
        } else {
            w = 0x6161616161616161ULL;  /* padded with 'a', which needs no escape */
            for (i = 0; i < n; i++)
                ((unsigned char *)&w)[i] = (unsigned char)text[i];
        }
        if (KD_J_ESCAPES(w))
            return KD_J_DECLINE;
        if (KD_J_ROOM(b, n + 2) < 0)
            return KD_J_ERROR;
        *b->p++ = '"';
        if (n >= 8 && n <= 16) {
            memcpy(b->p, text, 8);
            memcpy(b->p + n - 8, text + n - 8, 8);
        } else if (n >= 4 && n < 8) {
            memcpy(b->p, &lo, 4);
            memcpy(b->p + n - 4, &hi, 4);
        } else {
            memcpy(b->p, text, (size_t)n);
        }
        b->p += n;
        *b->p++ = '"';
        return KD_J_OK;
    }

    static int kd_jvalue(kd_jbuf *b, PyObject *v, PyObject *summary_type, PyObject *summary_values, int depth);

    static int kd_jitems(kd_jbuf *b, PyObject **items, Py_ssize_t n, PyObject *summary_type,
                         PyObject *summary_values, int depth) {
        Py_ssize_t i;
        int r;
        if (KD_J_ROOM(b, 2) < 0)
            return KD_J_ERROR;
        *b->p++ = '[';
        for (i = 0; i < n; i++) {
            if (i) {
                if (KD_J_ROOM(b, 1) < 0)
                    return KD_J_ERROR;
                *b->p++ = ',';
            }
            if ((r = kd_jvalue(b, items[i], summary_type, summary_values, depth)) != KD_J_OK)
                return r;
        }
        if (KD_J_ROOM(b, 1) < 0)
            return KD_J_ERROR;
        *b->p++ = ']';
        return KD_J_OK;
    }

    static int kd_jvalue(kd_jbuf *b, PyObject *v, PyObject *summary_type, PyObject *summary_values, int depth) {
        PyTypeObject *t = Py_TYPE(v);
        PyObject *key, *item, *values;
        Py_ssize_t pos = 0, n;
        int r, first = 1;
        if (t == &PyUnicode_Type)
            return kd_jstr(b, v);
        if (t == &PyLong_Type) {
            if (KD_J_ROOM(b, 21) < 0)
                return KD_J_ERROR;
            return kd_json_int(&b->p, v) < 0 ? KD_J_DECLINE : KD_J_OK;
        }
        if (v == Py_None || v == Py_True || v == Py_False) {
            if (KD_J_ROOM(b, 5) < 0)
                return KD_J_ERROR;
            if (v == Py_None)
                memcpy(b->p, "null", 4), b->p += 4;
            else if (v == Py_True)
                memcpy(b->p, "true", 4), b->p += 4;
            else
                memcpy(b->p, "false", 5), b->p += 5;
            return KD_J_OK;
        }
        if (++depth > 128)              /* orjson refuses past 255 levels; well short of it, orjson decides */
            return KD_J_DECLINE;
        if (t == &PyDict_Type) {
            if (KD_J_ROOM(b, 2) < 0)
                return KD_J_ERROR;
            *b->p++ = '{';
            while (PyDict_Next(v, &pos, &key, &item)) {
                if (Py_TYPE(key) != &PyUnicode_Type)
                    return KD_J_DECLINE;
                if (!first) {
                    if (KD_J_ROOM(b, 1) < 0)
                        return KD_J_ERROR;
                    *b->p++ = ',';
                }
                first = 0;
                if ((r = kd_jstr(b, key)) != KD_J_OK)
                    return r;
                if (KD_J_ROOM(b, 1) < 0)
                    return KD_J_ERROR;
                *b->p++ = ':';
                if ((r = kd_jvalue(b, item, summary_type, summary_values, depth)) != KD_J_OK)
                    return r;
            }
            if (KD_J_ROOM(b, 1) < 0)
                return KD_J_ERROR;
            *b->p++ = '}';
            return KD_J_OK;
        }
        if (t == &PyList_Type)
            return kd_jitems(b, ((PyListObject *)v)->ob_item, PyList_GET_SIZE(v), summary_type, summary_values, depth);
        if (t == &PyTuple_Type)
            return kd_jitems(b, ((PyTupleObject *)v)->ob_item, PyTuple_GET_SIZE(v), summary_type, summary_values,
                             depth);
        if ((PyObject *)t != summary_type)
            return KD_J_DECLINE;
        values = PyObject_CallOneArg(summary_values, v);
        if (values == NULL) {           /* orjson's walk, through the caller's default, says what failed */
            PyErr_Clear();
            return KD_J_DECLINE;
        }
        n = kd_summary_room(values);
        if (n < 0) {
            Py_DECREF(values);
            return KD_J_DECLINE;
        }
        if (KD_J_ROOM(b, n) < 0) {
            Py_DECREF(values);
            return KD_J_ERROR;
        }
        r = kd_summary_write(&b->p, values);
        Py_DECREF(values);
        return r ? KD_J_DECLINE : KD_J_OK;
    }

    static PyObject *kd_plain_json(PyObject *value, PyObject *summary_type, PyObject *summary_values) {
        kd_jbuf b;
        PyObject *out = NULL;
        int r;
        b.heap = NULL;
        b.p = b.small;
        b.end = b.small + sizeof(b.small);
        r = kd_jvalue(&b, value, summary_type, summary_values, 0);
        if (r == KD_J_OK)
            out = PyBytes_FromStringAndSize(b.heap != NULL ? b.heap : b.small,
                                            b.p - (b.heap != NULL ? b.heap : b.small));
        else if (r == KD_J_DECLINE)
            out = (Py_INCREF(Py_None), Py_None);
        if (b.heap != NULL)
            PyMem_Free(b.heap);
        return out;
    }
    """
    object _plain_json "kd_plain_json"(object value, object summary_type, object summary_values)

cdef extern from *:
    """
    /* bytes.find(key, start) on the buffers themselves, for a start within the text. */
    static inline Py_ssize_t kd_memmem_at(const char *text, Py_ssize_t n, const char *key, Py_ssize_t m,
                                          Py_ssize_t start) {
        const char *at;
        if (start < 0 || start > n)
            return -1;
        at = (const char *)memmem(text + start, (size_t)(n - start), key, (size_t)m);
        return at == NULL ? -1 : at - text;
    }
    """
    Py_ssize_t _memmem_at "kd_memmem_at"(const char *text, Py_ssize_t n, const char *key, Py_ssize_t m,
                                         Py_ssize_t start)

cdef extern from *:
    """
    /* A list emptied with its allocation kept. The size goes to 0 before the cells
       are released, so nothing a release runs can see them. */
    static void kd_empty_keeping_capacity(PyObject *list) {
        PyListObject *l = (PyListObject *)list;
        Py_ssize_t n = Py_SIZE(l);
        Py_SET_SIZE(l, 0);
        while (n > 0) {
            n--;
            Py_DECREF(l->ob_item[n]);
        }
    }

    /* Room for n cells, as list_resize would make it, without changing the size. */
    static int kd_reserve_capacity(PyObject *list, Py_ssize_t n) {
        PyListObject *l = (PyListObject *)list;
        PyObject **items;
        if (l->allocated >= n)
            return 0;
        items = (PyObject **)PyMem_Realloc(l->ob_item, (size_t)n * sizeof(PyObject *));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        l->ob_item = items;
        l->allocated = n;
        return 0;
    }
    """
    int _reserve_capacity "kd_reserve_capacity"(list values, Py_ssize_t n) except -1
    void _empty_keeping_capacity "kd_empty_keeping_capacity"(list values)


# Up to this many bytes the table loop beats the crc32c package (see kd_crc32c).
cdef enum:
    SMALL_CRC = 4096


cpdef object crc32c_of(bytes b, Py_ssize_t start, Py_ssize_t end):
    """CRC-32C of ``b[start:end]``."""
    cdef const unsigned char *p = b
    if not 0 <= start <= end <= len(b):
        raise ValueError(f"bytes {start}..{end} of {len(b)}")
    if end - start <= SMALL_CRC:
        return _crc32c_in_place(p + start, end - start)
    return _crc32c_package(memoryview(b)[start:end])


cpdef int frame_share(bytes buf, Py_ssize_t start, Py_ssize_t caplen, Py_ssize_t l3, Py_ssize_t ethertype_at,
                      unsigned int count) except -2:
    """The share (0..count-1) of the TCP/IPv4 connection of the frame ``buf[start:start + caplen]``,
    whose IP header is at ``l3`` and ethertype, if any, at ``ethertype_at``: CRC-32 of the smaller of
    the connection's 4-tuple key and its reverse, modulo ``count``. -1 for any other frame."""
    cdef const unsigned char *p = buf
    if start < 0 or caplen < 0 or start + caplen > len(buf) or count < 1:
        return -1
    return _ipv4_share(p + start, caplen, l3, ethertype_at, count)


cpdef object summary_json(object values):
    """A records summary's dict (``SUMMARY_KEYS`` and these ``values``) as compact JSON, byte for
    byte as orjson writes it; None for a value written otherwise (escaped text, an int past 64 bits,
    a float where an int belongs): then the caller has orjson write the dict."""
    return _summary_json(values)


cpdef object plain_json(object value, object summary_type, object summary_values):
    """``value`` as compact JSON, byte for byte as orjson writes it, an object of exactly
    ``summary_type`` written as ``summary_json(summary_values(object))``; None for anything written
    otherwise or not at all (floats, bytes, subclasses, escaped text, ints past 64 bits, a summary
    ``summary_json`` declines): then the caller has orjson write it."""
    return _plain_json(value, summary_type, summary_values)


cpdef Py_ssize_t find(bytes text, bytes key, Py_ssize_t start) except -2:
    """``text.find(key, start)`` for ``0 <= start <= len(text)``, else -1: memmem on the bytes
    themselves, where the method call cost more than the search in a response's JSON."""
    return _memmem_at(text, len(text), key, len(key), start)


cpdef int reserve_list(list values, Py_ssize_t n) except -1:
    """Make room in ``values`` for ``n`` cells, as the list would grow to hold them, without
    changing its contents."""
    return _reserve_capacity(values, n)


cpdef void clear_keeping_capacity(list values):
    """Empty ``values``, keeping its storage for the cells to come."""
    _empty_keeping_capacity(values)
