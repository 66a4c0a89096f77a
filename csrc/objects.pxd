# Object arrays of bytes: the one place the compiled modules make bytes objects in bulk
# (the decoder's bytes features, a batch's records, values crossing from a DataLoader
# worker). Making the objects is the part that needs the GIL, so it does as little as it
# can: equal short values (categories, labels) share one bytes object (bytes are
# immutable), found beforehand by share_scan, which needs no GIL; long values are allocated
# under the GIL and filled without it (an image is mostly memcpy). same_bytes, the table's
# comparison of values, also serves the decoder's lookup of feature names.
cimport numpy as cnp
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.ref cimport Py_INCREF, Py_XINCREF, PyObject
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset


cdef extern from "Python.h":
    char *bytes_data "PyBytes_AS_STRING" (PyObject *) nogil   # a macro: no GIL needed


cdef extern from *:
    """
    #include <stdlib.h>
    /* glibc serves blocks under its mmap threshold (128 KiB at first) from its heap, and gives
       the heap's top back to the kernel once more than its trim threshold (twice that) lies
       free there: a batch of 1,024 values of 32 KiB went back as it was freed, and the next
       batch faulted every page in again. glibc raises both thresholds itself when the program
       frees a mapped block larger than the mmap threshold (that one to the block's size, up
       to 32 MiB): one block of a batch's size, allocated and freed, shows it the size this
       program works in. No setting changes, and glibc's own tuning stays on. In-memory W1
       batches parsed in the main thread: 0.043 s a pass against 0.239, no page faults
       against 79,000. Called with the GIL held, which guards tfl_heap_shown. */
    static size_t tfl_heap_shown;
    static void tfl_heap_hint(size_t n) {
    #if defined(__GLIBC__)
        void *volatile p;   /* volatile: the compiler may not drop the pair */
        if (n > ((size_t)32 << 20) - 8192)
            n = ((size_t)32 << 20) - 8192;   /* mapped, with its header: the largest glibc learns from */
        if (n <= tfl_heap_shown)
            return;
        tfl_heap_shown = n;
        p = malloc(n);
        free(p);
    #else
        (void)n;
    #endif
    }
    """
    void heap_hint "tfl_heap_hint" (size_t n)


cdef enum:
    HEAP_HINT_MIN = 1 << 20   # long values a batch holds from which glibc is shown its size
    NOGIL_MIN_BYTES = 65536  # below this, releasing the GIL costs more than it saves
    SHARE_SLOTS = 256        # recent distinct short values remembered (a power of 2)
    SHARE_SHIFT = 56         # 64 - log2(SHARE_SLOTS): a hash's top bits pick the slot
    SHARE_MAX = 16           # longest value shared


cdef struct ByteSpan:
    const unsigned char *ptr   # a value's bytes, wherever they lie
    Py_ssize_t len             # its length


cdef inline void short_words(const unsigned char *p, Py_ssize_t n, uint64_t *x, uint64_t *y) noexcept nogil:
    """p[:n] (n <= 16) as two words that hold every one of its bytes: two overlapping 8-byte
    loads from 8 bytes on, two overlapping 4-byte ones from 4, the first, middle and last
    byte below. Fixed-size loads only: a copy of n bytes into a word, then reading the word,
    stalled the CPU (the load waits for the partial stores) for most of share_scan's time."""
    cdef uint32_t lo, hi
    x[0] = y[0] = 0
    if n >= 8:
        memcpy(x, p, 8)
        memcpy(y, p + n - 8, 8)
    elif n >= 4:
        memcpy(&lo, p, 4)
        memcpy(&hi, p + n - 4, 4)
        x[0] = lo | <uint64_t>hi << 32
    elif n:
        x[0] = p[0] | <uint64_t>p[n // 2] << 8 | <uint64_t>p[n - 1] << 16


cdef inline bint same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n) noexcept nogil:
    """a[:n] == b[:n]. Short values (feature names, categories) are compared as their
    short_words, rather than through a call to memcmp."""
    cdef uint64_t ax, ay, bx, by
    if n > 16:
        return memcmp(a, b, n) == 0
    short_words(a, n, &ax, &ay)
    short_words(b, n, &bx, &by)
    return ax == bx and ay == by


cdef inline Py_ssize_t share_slot(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """A hash of a short value (n <= SHARE_MAX) from its short_words."""
    cdef uint64_t x, y
    short_words(p, n, &x, &y)
    x = x * <uint64_t>0x9E3779B97F4A7C15 ^ y * <uint64_t>0xC2B2AE3D27D4EB4F ^ <uint64_t>n
    return <Py_ssize_t>(x >> SHARE_SHIFT)


cdef inline void share_scan(const ByteSpan *spans, Py_ssize_t n, Py_ssize_t *first) noexcept nogil:
    """first[i]: an earlier value equal to value i whose object i can share, else i. Only
    short values are looked for, among the SHARE_SLOTS most recent distinct ones."""
    cdef Py_ssize_t recent[SHARE_SLOTS]
    cdef Py_ssize_t i, j, h, length
    for h in range(SHARE_SLOTS):
        recent[h] = -1
    for i in range(n):
        first[i] = i
        length = spans[i].len
        if length > SHARE_MAX:
            continue
        h = share_slot(spans[i].ptr, length)
        j = recent[h]
        if j >= 0 and spans[j].len == length and same_bytes(spans[j].ptr, spans[i].ptr, length):
            first[i] = j
        else:
            recent[h] = i


cdef inline void fill_long(PyObject **slots, const ByteSpan *spans, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if spans[i].len > SHARE_MAX:
            memcpy(bytes_data(slots[i]), spans[i].ptr, spans[i].len)


cdef inline object bytes_objects(const ByteSpan *spans, Py_ssize_t n, const Py_ssize_t *first):
    """Value i as bytes, in a 1-D object array; value i shares the object of value first[i]
    (share_scan's; NULL shares none)."""
    cdef cnp.npy_intp size = n
    cdef cnp.ndarray out = cnp.PyArray_SimpleNew(1, &size, cnp.NPY_OBJECT)
    cdef PyObject **slots = <PyObject **>cnp.PyArray_DATA(out)
    cdef Py_ssize_t i, j, pending = 0
    cdef object value
    memset(slots, 0, n * sizeof(PyObject *))  # an empty slot is None to numpy: safe if we fail midway
    for i in range(n):
        j = i if first == NULL else first[i]
        if j != i:
            Py_XINCREF(slots[j])
            slots[i] = slots[j]
            continue
        if spans[i].len <= SHARE_MAX:
            value = PyBytes_FromStringAndSize(<const char *>spans[i].ptr, spans[i].len)
        else:
            value = PyBytes_FromStringAndSize(NULL, spans[i].len)  # filled below
            pending += spans[i].len
        Py_INCREF(value)  # the slot's reference
        slots[i] = <PyObject *>value
    if pending >= HEAP_HINT_MIN:
        heap_hint(pending)
    if pending >= NOGIL_MIN_BYTES:
        with nogil:
            fill_long(slots, spans, n)
    elif pending:
        fill_long(slots, spans, n)
    return out


cdef inline object bytes_array(const ByteSpan *spans, Py_ssize_t n):
    """bytes_objects with equal short values shared."""
    cdef Py_ssize_t *first = <Py_ssize_t *>malloc((n if n else 1) * sizeof(Py_ssize_t))
    if first == NULL:
        raise MemoryError()
    try:
        share_scan(spans, n, first)
        return bytes_objects(spans, n, first)
    finally:
        free(first)
