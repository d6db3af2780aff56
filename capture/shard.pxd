# Compiled build only (setup.py); shard.py stays the only source, pure Python ignores this file.
cimport cython
cdef class Share:
    cdef readonly object index, count

cdef class Dropping:
    cdef public unsigned int index, count
    cdef public long long seen, last_ts

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

@cython.locals(p="const unsigned char*")
cpdef int frame_share(bytes buf, Py_ssize_t start, Py_ssize_t caplen, Py_ssize_t l3, Py_ssize_t ethertype_at,
                      unsigned int count) except -2
