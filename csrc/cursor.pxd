# The one bounds-checked read cursor every compiled read of input goes through.
# Checks are written as `n <= end - pos`, a form that cannot overflow.
from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer, PyBUF_FORMAT, PyBUF_ND, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_CheckExact
from libc.stdint cimport uint64_t


cdef struct Cursor:
    const unsigned char *pos   # next unread byte
    const unsigned char *end   # one past the last readable byte


cdef inline int acquire(object obj, Py_buffer *view) except -1:
    """Borrow obj's bytes once per call, read-only and C-contiguous (bytes, bytearray,
    memoryview, mmap, numpy). The caller releases with PyBuffer_Release. A buffer of PyObject
    pointers (a numpy object array) is refused with a TypeError: its bytes are addresses,
    not the objects' data."""
    if PyBytes_CheckExact(obj):  # the common case has no format to look at
        return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    # ND, not SIMPLE: a memoryview refuses SIMPLE with FORMAT. Without STRIDES, still only a
    # C-contiguous buffer is given.
    PyObject_GetBuffer(obj, view, PyBUF_ND | PyBUF_FORMAT)
    if format_holds_objects(view.format):
        fmt = (<bytes>view.format).decode("ascii", "replace")
        PyBuffer_Release(view)
        raise TypeError(f"its buffer holds pointers to Python objects (format {fmt!r}), not their bytes; "
                        "encode the values to bytes first")
    return 0


cdef inline bint format_holds_objects(const char *fmt) noexcept nogil:
    """Whether a struct-syntax buffer format has an 'O' (object pointer) among its types:
    'O', '<O', or a field of 'T{i:a:O:b:}'. Text between colons is a field name."""
    cdef bint in_name = False
    if fmt == NULL:
        return False
    while fmt[0] != 0:
        if fmt[0] == c':':
            in_name = not in_name
        elif fmt[0] == c'O' and not in_name:
            return True
        fmt += 1
    return False


cdef inline void cursor_init(Cursor *c, const unsigned char *data, Py_ssize_t n) noexcept nogil:
    c.pos = data
    c.end = data + n


cdef inline Py_ssize_t cursor_left(const Cursor *c) noexcept nogil:
    return c.end - c.pos


cdef inline bint cursor_take(Cursor *c, uint64_t n, const unsigned char **out) noexcept nogil:
    """Hand out the next n bytes, or fail without moving if fewer remain."""
    if n > <uint64_t>(c.end - c.pos):
        return False
    out[0] = c.pos
    c.pos += n
    return True


cdef inline bint cursor_varint(Cursor *c, uint64_t *out) noexcept nogil:
    """Protobuf base-128 varint: 7 bits per byte, least significant group first, high bit
    set on every byte but the last; at most 10 bytes for 64 bits."""
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char b
    if c.pos < c.end and c.pos[0] < 0x80:  # tags and short lengths: one byte
        out[0] = c.pos[0]
        c.pos += 1
        return True
    while c.pos < c.end and shift < 70:
        b = c.pos[0]
        c.pos += 1
        result |= (<uint64_t>(b & 0x7F)) << shift if shift < 64 else 0
        if b < 0x80:
            out[0] = result
            return True
        shift += 7
    return False


cdef inline bint cursor_short_varint(Cursor *c, uint64_t *out) noexcept nogil:
    """A varint read as a tag or a byte count: protobuf (its upb runtime) reads those in at
    most 5 bytes, so a longer encoding fails whatever its value."""
    cdef const unsigned char *start = c.pos
    return cursor_varint(c, out) and c.pos - start <= 5


cdef inline bint cursor_size(Cursor *c, uint64_t *out) noexcept nogil:
    """A byte count: a short varint below 2**31 - 1, protobuf's bound."""
    return cursor_short_varint(c, out) and out[0] < 0x7FFFFFFF


cdef inline bint cursor_len(Cursor *c, Cursor *sub) noexcept nogil:
    """Protobuf LEN payload: a varint byte count, then that many bytes; sub is clamped to
    them. Fails when the count is malformed or runs past the end (c may then have moved)."""
    cdef uint64_t n
    if not cursor_size(c, &n) or n > <uint64_t>(c.end - c.pos):
        return False
    sub.pos = c.pos
    sub.end = c.pos + n
    c.pos = sub.end
    return True


cdef inline bint cursor_expect(Cursor *c, unsigned char b) noexcept nogil:
    """Consume the next byte if it is b (a one-byte tag the fast paths look for); otherwise
    leave c where it is."""
    if c.pos < c.end and c.pos[0] == b:
        c.pos += 1
        return True
    return False
