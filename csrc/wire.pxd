# Protobuf wire primitives shared by the decoder and the encoder of tfrecord_lite._example:
# inline readers over the bounds-checked Cursor (tags, lengths, little-endian float runs)
# and the varint writers. Everything here is `cdef inline` in a .pxd, so the hot per-value
# readers cost no call across files. The cold readers (skip_field, utf8_valid) are plain
# functions in _example_decode.pxi: inlined everywhere, they slowed the hot loops down.
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

from cursor cimport Cursor, cursor_init, cursor_short_varint, cursor_size, cursor_take
from le cimport TFL_LITTLE_ENDIAN, tfl_load_le32


cdef enum Wire:
    VARINT = 0
    I64 = 1
    LEN = 2
    SGROUP = 3
    EGROUP = 4
    I32 = 5

cdef enum Err:           # decode failures; messages in tfrecord_lite/_contract.py's FAULTS
    E_OK = 0
    E_TRUNCATED = 1
    E_VARINT = 2
    E_TAG = 3
    E_WIRE = 4
    E_GROUP = 5
    E_DEPTH = 6
    E_PACKED = 7
    E_UTF8 = 8
    E_MEMORY = 9

cdef enum:
    MAX_DEPTH = 100      # protobuf's default recursion limit
    TAG_KEY = 0x0A       # field 1, LEN
    TAG_VALUE = 0x12     # field 2, LEN
    TAG_FLOAT = 0x0D     # field 1, I32 (unpacked float)


cdef struct Fault:
    int err                        # Err of the first failure (E_OK: none yet)
    const unsigned char *at        # where it happened


cdef inline int fail(Fault *p, int err, const unsigned char *at) noexcept nogil:
    """Record the first failure; returns -1 for the caller to pass up."""
    if p.err == E_OK:
        p.err = err
        p.at = at
    return -1


cdef inline int read_tag(Fault *p, Cursor *c, uint32_t *field, uint32_t *wire,
                         bint in_group=False) noexcept nogil:
    """Tag = varint (field_number << 3 | wire_type); field numbers start at 1 and fit 29 bits.
    Inside a skipped group, field number 0 passes, as protobuf's upb runtime lets it."""
    cdef uint64_t tag
    cdef const unsigned char *at = c.pos
    if not cursor_short_varint(c, &tag):
        return fail(p, E_VARINT, at)
    if (tag >> 32) != 0 or ((tag >> 3) == 0 and not in_group):
        return fail(p, E_TAG, at)
    field[0] = <uint32_t>(tag >> 3)
    wire[0] = <uint32_t>(tag & 7)
    return 0


cdef inline int read_len(Fault *p, Cursor *c, Cursor *sub) noexcept nogil:
    """LEN field: varint byte count, then that many bytes; sub is clamped to them."""
    cdef uint64_t n
    cdef const unsigned char *at = c.pos
    cdef const unsigned char *data
    if not cursor_size(c, &n):
        return fail(p, E_VARINT, at)
    if not cursor_take(c, n, &data):
        return fail(p, E_TRUNCATED, at)
    cursor_init(sub, data, <Py_ssize_t>n)
    return 0


cdef inline void copy_floats(char *dst, const unsigned char *src, Py_ssize_t n) noexcept nogil:
    """Wire floats are little-endian IEEE 754 binary32."""
    cdef Py_ssize_t i
    cdef uint32_t u
    if n == 0:
        return   # an empty packed run: dst may be a column not yet allocated (NULL)
    if TFL_LITTLE_ENDIAN:
        if n == 4:
            memcpy(dst, src, 4)   # a scalar: inlined, no call
        else:
            memcpy(dst, src, n)
    else:
        for i in range(0, n, 4):
            u = tfl_load_le32(src + i)
            memcpy(dst + i, &u, 4)


# -- writing -----------------------------------------------------------------------------

cdef inline Py_ssize_t vsize(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char *put_varint(unsigned char *p, uint64_t v) noexcept nogil:
    """Base-128 varint, low group first; negative int64 take all 10 bytes."""
    while v >= 0x80:
        p[0] = <unsigned char>(v | 0x80)
        v >>= 7
        p += 1
    p[0] = <unsigned char>v
    return p + 1


cdef inline Py_ssize_t framed(Py_ssize_t body) noexcept nogil:
    """Size of a one-byte-tag LEN field holding body bytes."""
    return 1 + vsize(body) + body



cdef extern from *:
    """
    /* Debug builds (TFRECORD_LITE_DEBUG=1 defines TFL_DEBUG) check that every encoder ends
     * exactly where its size pass said; a mismatch is a bug in the core, so it aborts. */
    #if defined(TFL_DEBUG) && TFL_DEBUG
    #include <stdio.h>
    #include <stdlib.h>
    static void tfl_check_end(const unsigned char *p, const unsigned char *end) {
        if (p != end) {
            fprintf(stderr, "tfrecord_lite: an encoder ended %ld bytes away from its size pass\\n",
                    (long)(p - end));
            abort();
        }
    }
    #else
    static inline void tfl_check_end(const unsigned char *p, const unsigned char *end) {
        (void)p; (void)end;   /* the arguments are still evaluated: they may be the write itself */
    }
    #endif
    """
    void tfl_check_end(const unsigned char *p, const unsigned char *end) nogil


cdef extern from *:
    """
    #include <string.h>
    /* n bytes from src to p; returns p + n. The encoder copies a key and often a value or
     * two per feature, mostly under 16 bytes: fixed-size copies compile to a few moves,
     * where a call to memcpy for each cost more than the copying. */
    static inline unsigned char *tfl_put_bytes(unsigned char *p, const void *src, size_t n) {
        const unsigned char *s = (const unsigned char *)src;
        uint64_t a, b;
        uint32_t c, d;
        if (n > 16) {
            memcpy(p, s, n);
        } else if (n >= 8) {   /* two 8-byte moves that overlap in the middle */
            memcpy(&a, s, 8); memcpy(&b, s + n - 8, 8);
            memcpy(p, &a, 8); memcpy(p + n - 8, &b, 8);
        } else if (n >= 4) {
            memcpy(&c, s, 4); memcpy(&d, s + n - 4, 4);
            memcpy(p, &c, 4); memcpy(p + n - 4, &d, 4);
        } else if (n) {
            p[0] = s[0]; p[n / 2] = s[n / 2]; p[n - 1] = s[n - 1];
        }
        return p + n;
    }
    /* Whether n bytes at a and b are equal; 8 to 32 bytes (the decoder's entry templates)
     * compared by 8-byte words, the last one overlapping, without a call. */
    static inline int tfl_same_bytes(const unsigned char *a, const unsigned char *b, size_t n) {
        uint64_t x, y, d = 0;
        size_t i;
        if (n < 8 || n > 32) return memcmp(a, b, n) == 0;
        for (i = 0; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8); memcpy(&y, b + i, 8);
            d |= x ^ y;
        }
        memcpy(&x, a + n - 8, 8); memcpy(&y, b + n - 8, 8);
        return (d | (x ^ y)) == 0;
    }
    """
    unsigned char *tfl_put_bytes(unsigned char *p, const void *src, size_t n) nogil
    bint tfl_same_bytes(const unsigned char *a, const unsigned char *b, size_t n) nogil
