# Object arrays of bytes: the one place the compiled modules make bytes objects in bulk
# (the decoder's bytes features, a batch's records, values crossing from a DataLoader
# worker). Making the objects is the part that needs the GIL, so it does as little as it
# can: equal short values (categories, labels) share one bytes object (bytes are
# immutable), found beforehand by share_scan, which needs no GIL; distinct short values
# (ids, tokens) are written into objects an earlier batch left (the ring below); long values
# are allocated under the GIL and filled without it (an image is mostly memcpy), from 4 KiB
# in objects an earlier batch left (the pool below). same_bytes, the table's comparison of
# values, also serves the decoder's lookup of feature names.
cimport numpy as cnp
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.ref cimport Py_INCREF, Py_XINCREF, PyObject
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset


cdef extern from *:
    void prefetch "__builtin_prefetch" (const void *) noexcept nogil


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
       against 79,000. Values of TFL_POOL_MIN bytes and more now stay in the pool below,
       so this is for shorter ones. Called with the GIL held, which guards tfl_heap_shown. */
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


cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    /* The bytes objects of long values, kept for reuse. A batch of 1,024 images freed by the
       consumer went back to glibc, which gave the heap's top back to the kernel whenever more
       than its trim threshold lay free there (a DataLoader's main process holds several
       batches at once), and the next batch faulted every page in again. The pool keeps a
       reference to each object it made; one whose only reference is the pool's (the batch
       that held it is gone, and nothing else took it) is free, and a later value of about its
       size is written into it: an object nobody else can see, as CPython resizes a bytes
       object in place when it holds the only reference. Objects are made a little larger than
       their value (8 sizes per power of two), so values of nearby sizes share them. The pool
       holds at most TFL_POOL_BATCHES times the largest call's long values, up to
       TFL_POOL_MOST bytes; the least recently used go first. Each module that includes this
       has its own. Only with the GIL (which guards it and every reference count): off in
       free-threaded builds. On 2 cores, a DataLoader's main process took 0.072-0.078 s of CPU
       a W1 pass against 0.136-0.145 s (2 workers), and W1 parsed with 2 threads 0.126-0.140 s
       a pass against 0.139-0.162 s, without its 6,500-19,200 page faults. */
    #define TFL_POOL_MIN 4096
    #define TFL_POOL_BATCHES 8
    #define TFL_POOL_MOST ((size_t)128 << 20)
    #define TFL_POOL_CLASSES 512
    typedef struct { PyObject *obj; Py_ssize_t room; } tfl_kept;
    typedef struct { Py_ssize_t len, at; } tfl_want;
    static tfl_kept *tfl_pool;
    static Py_ssize_t tfl_pool_n;
    static size_t tfl_pool_bytes, tfl_pool_most;

    /* The position of n's highest set bit (n > 0). */
    static int tfl_top_bit(Py_ssize_t n) {
    #if defined(__GNUC__) || defined(__clang__)
        return 63 - __builtin_clzll((unsigned long long)n);
    #else
        int b = 0;
        while (n >>= 1)
            b++;
        return b;
    #endif
    }

    /* The room an object for n bytes gets: n rounded up to one of 8 sizes per power of two. */
    static Py_ssize_t tfl_room(Py_ssize_t n) {
        Py_ssize_t step = (Py_ssize_t)1 << (tfl_top_bit(n) - 3);
        return (n + step - 1) & ~(step - 1);
    }

    /* A room's size class: its power of two and which of the 8 sizes in it. */
    static int tfl_class(Py_ssize_t room) {
        int b = tfl_top_bit(room);
        return b * 8 + (int)(room >> (b - 3)) - 8;
    }

    static void tfl_set_length(PyObject *obj, Py_ssize_t n) {
        Py_SET_SIZE(obj, n);
        PyBytes_AS_STRING(obj)[n] = 0;
    #if defined(__GNUC__)
    #pragma GCC diagnostic push
    #pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    #endif
        ((PyBytesObject *)obj)->ob_shash = -1;   /* the hash of what it held */
    #if defined(__GNUC__)
    #pragma GCC diagnostic pop
    #endif
    }

    /* slots[want[j].at] = a bytes object of length want[j].len, its contents to be copied in,
       for each j < m: a free one of the pool of its size class, the least recently used first,
       else a new one. 0, or -1 with an exception set (the slots filled so far stay). */
    static inline int tfl_pool_fill(PyObject **slots, const tfl_want *want, Py_ssize_t m) {
        Py_ssize_t head[TFL_POOL_CLASSES], end[TFL_POOL_CLASSES];
        Py_ssize_t i, j, c, p, start = 0, need = m, made_n = 0, kept_n = 0, cut = 0;
        Py_ssize_t *byclass = NULL;
        tfl_kept *made = NULL, *kept = NULL;
        char *used = NULL;
        size_t asked = 0, total = 0, most;
        int rc = -1;
    #ifdef Py_GIL_DISABLED
        /* No reference count to trust without the GIL: every object new, none kept. */
        for (j = 0; j < m; j++)
            if (!(slots[want[j].at] = PyBytes_FromStringAndSize(NULL, want[j].len)))
                return -1;
        return 0;
    #endif
        byclass = (Py_ssize_t *)PyMem_Malloc((m + 1) * sizeof(Py_ssize_t));
        made = (tfl_kept *)PyMem_Malloc((m + 1) * sizeof(tfl_kept));
        used = (char *)PyMem_Calloc(tfl_pool_n + 1, 1);
        if (!byclass || !made || !used) {
            PyErr_NoMemory();
            goto out;
        }
        /* The wants by size class (a counting sort): class c's are byclass[head[c]:end[c]]. */
        memset(end, 0, sizeof(end));
        for (j = 0; j < m; j++) {
            Py_ssize_t room = tfl_room(want[j].len);
            asked += room;
            end[tfl_class(room)]++;
        }
        for (c = 0; c < TFL_POOL_CLASSES; c++) {
            head[c] = start;
            start += end[c];
            end[c] = head[c];
        }
        for (j = 0; j < m; j++)
            byclass[end[tfl_class(tfl_room(want[j].len))]++] = j;
        /* Free objects (the pool's reference the only one) to the wants of their class, else
           of the class below (an eighth to a quarter of their room unused). */
        for (i = 0; i < tfl_pool_n && need; i++) {
            PyObject *obj = tfl_pool[i].obj;
            if (Py_REFCNT(obj) != 1)
                continue;
            c = tfl_class(tfl_pool[i].room);
            if (head[c] == end[c] && c > 0)
                c--;
            if (head[c] == end[c])
                continue;
            j = byclass[head[c]++];
            used[i] = 1;
            need--;
            Py_INCREF(obj);
            tfl_set_length(obj, want[j].len);
            slots[want[j].at] = obj;
        }
        for (c = 0; c < TFL_POOL_CLASSES; c++)
            for (p = head[c]; p < end[c]; p++) {
                PyObject *obj;
                Py_ssize_t room;
                j = byclass[p];
                room = tfl_room(want[j].len);
                obj = PyBytes_FromStringAndSize(NULL, room);
                if (!obj)
                    goto keep;
                tfl_set_length(obj, want[j].len);
                slots[want[j].at] = obj;
                Py_INCREF(obj);   /* the pool's reference */
                made[made_n].obj = obj;
                made[made_n++].room = room;
            }
        rc = 0;
    keep:
        /* The pool again, least recently used first: those left, then those taken, then those
           made. Past its size the first go (the batches holding them keep them). */
        most = (size_t)TFL_POOL_BATCHES * asked;
        if (most > TFL_POOL_MOST)
            most = TFL_POOL_MOST;
        if (most > tfl_pool_most)
            tfl_pool_most = most;
        kept = (tfl_kept *)PyMem_Malloc((tfl_pool_n + made_n + 1) * sizeof(tfl_kept));
        if (!kept) {   /* the old pool stays; the new objects are their batch's alone */
            for (j = 0; j < made_n; j++)
                Py_DECREF(made[j].obj);
            goto out;
        }
        for (i = 0; i < tfl_pool_n; i++)
            if (!used[i])
                kept[kept_n++] = tfl_pool[i];
        for (i = 0; i < tfl_pool_n; i++)
            if (used[i])
                kept[kept_n++] = tfl_pool[i];
        for (j = 0; j < made_n; j++)
            kept[kept_n++] = made[j];
        for (i = 0; i < kept_n; i++)
            total += kept[i].room;
        while (total > tfl_pool_most) {
            total -= kept[cut].room;
            Py_DECREF(kept[cut++].obj);
        }
        memmove(kept, kept + cut, (kept_n - cut) * sizeof(tfl_kept));
        PyMem_Free(tfl_pool);
        tfl_pool = kept;
        tfl_pool_n = kept_n - cut;
        tfl_pool_bytes = total;
    out:
        PyMem_Free(byclass);
        PyMem_Free(made);
        PyMem_Free(used);
        return rc;
    }

    /* Drop the pool's references (the objects a batch still holds stay with it). */
    static inline void tfl_pool_clear(void) {
        Py_ssize_t i;
        tfl_kept *pool = tfl_pool;
        Py_ssize_t n = tfl_pool_n;
        tfl_pool = NULL;
        tfl_pool_n = 0;
        tfl_pool_bytes = tfl_pool_most = 0;
        for (i = 0; i < n; i++)
            Py_DECREF(pool[i].obj);
        PyMem_Free(pool);
    }
    """
    ctypedef struct PoolWant "tfl_want":
        Py_ssize_t len
        Py_ssize_t at
    int pool_fill "tfl_pool_fill" (PyObject **slots, const PoolWant *want, Py_ssize_t m) except -1
    void pool_clear "tfl_pool_clear" ()
    Py_ssize_t pool_count "tfl_pool_n"
    size_t pool_bytes "tfl_pool_bytes"
    enum: POOL_MIN "TFL_POOL_MIN"


cdef extern from *:
    """
    /* The bytes objects of short values (2-16 bytes: ids, tokens), kept for reuse in a ring.
       Making and freeing one object per distinct value held the GIL for most of a W2 batch's
       output stage and of its freeing. The ring hands its objects out in turn; an object whose
       only reference is the ring's again (its batch is gone) is rewritten in place for the next
       value, as the pool above does for long values, and freeing a batch then only drops a
       reference. An object still held when its turn comes is left to its holder: the ring
       takes a new one there (at full size) or grows by the new one, so it grows to what the
       consumer holds at once. Only with the GIL: off in free-threaded builds. */
    #define TFL_SHORT_ROOM 16   /* SHARE_MAX: the longest value shared */
    #define TFL_SHORT_MOST ((Py_ssize_t)1 << 18)   /* 16 MiB of objects at most */
    static PyObject **tfl_short;
    static Py_ssize_t tfl_short_n, tfl_short_cap, tfl_short_at;
    static PyObject **tfl_short_grown;
    static Py_ssize_t tfl_short_grown_n, tfl_short_grown_cap, tfl_short_walk;

    /* Ready the ring for up to m values: 0, or -1 with MemoryError. */
    static inline int tfl_short_begin(Py_ssize_t m) {
        tfl_short_walk = tfl_short_n;
        tfl_short_grown_n = 0;
        if (m > TFL_SHORT_MOST)
            m = TFL_SHORT_MOST;
        if (m > tfl_short_grown_cap) {
            PyObject **g = (PyObject **)PyMem_Realloc(tfl_short_grown, m * sizeof(PyObject *));
            if (!g) { PyErr_NoMemory(); return -1; }
            tfl_short_grown = g;
            tfl_short_grown_cap = m;
        }
        return 0;
    }

    /* A new object of the ring's room, of length n: the caller's reference and the ring's. */
    static inline PyObject *tfl_short_new(Py_ssize_t n) {
        PyObject *obj = PyBytes_FromStringAndSize(NULL, TFL_SHORT_ROOM);
        if (obj) {
            Py_INCREF(obj);
            tfl_set_length(obj, n);
        }
        return obj;
    }

    /* A bytes object of length n (2-16), its contents to be written: a new reference. */
    static inline PyObject *tfl_short_take(Py_ssize_t n) {
        PyObject *obj;
    #ifndef Py_GIL_DISABLED
        if (tfl_short_walk > 0) {
            Py_ssize_t at = tfl_short_at;
            tfl_short_walk--;
            tfl_short_at = at + 1 == tfl_short_n ? 0 : at + 1;
            obj = tfl_short[at];
    #if defined(__GNUC__) || defined(__clang__)
            /* Objects come back from the core that freed their batch: fetch them ahead. */
            __builtin_prefetch(tfl_short[at + 16 < tfl_short_n ? at + 16 : (at + 16) % tfl_short_n], 1);
    #endif
            if (Py_REFCNT(obj) == 1) {
                Py_INCREF(obj);
                tfl_set_length(obj, n);
                return obj;
            }
            if (tfl_short_n + tfl_short_grown_n >= TFL_SHORT_MOST) {   /* full: its slot takes a new one */
                PyObject *fresh = tfl_short_new(n);
                if (!fresh) return NULL;
                tfl_short[at] = fresh;
                Py_DECREF(obj);
                return fresh;
            }
        }
        if (tfl_short_n + tfl_short_grown_n < TFL_SHORT_MOST && tfl_short_grown_n < tfl_short_grown_cap) {
            obj = tfl_short_new(n);
            if (!obj) return NULL;
            tfl_short_grown[tfl_short_grown_n++] = obj;
            return obj;
        }
    #endif
        return PyBytes_FromStringAndSize(NULL, n);
    }

    /* The objects made since tfl_short_begin join the ring, behind those handed out last. */
    static inline void tfl_short_end(void) {
        Py_ssize_t k = tfl_short_grown_n, n = tfl_short_n, at = tfl_short_at;
        tfl_short_grown_n = 0;
        if (!k) return;
        if (n + k > tfl_short_cap) {
            Py_ssize_t cap = 2 * (n + k);
            PyObject **r = (PyObject **)PyMem_Realloc(tfl_short, cap * sizeof(PyObject *));
            if (!r) {   /* the ring stays; the new objects are their batch's alone */
                Py_ssize_t j;
                for (j = 0; j < k; j++) Py_DECREF(tfl_short_grown[j]);
                return;
            }
            tfl_short = r;
            tfl_short_cap = cap;
        }
        memmove(tfl_short + at + k, tfl_short + at, (n - at) * sizeof(PyObject *));
        memcpy(tfl_short + at, tfl_short_grown, k * sizeof(PyObject *));
        tfl_short_n = n + k;
        tfl_short_at = (at + k) % tfl_short_n;
    }

    static inline void tfl_short_clear(void) {
        PyObject **ring = tfl_short;
        Py_ssize_t i, n = tfl_short_n;
        tfl_short = NULL;
        tfl_short_n = tfl_short_cap = tfl_short_at = 0;
        for (i = 0; i < n; i++) Py_DECREF(ring[i]);
        PyMem_Free(ring);
    }
    """
    int short_begin "tfl_short_begin" (Py_ssize_t m) except -1
    PyObject *short_take "tfl_short_take" (Py_ssize_t n) except NULL
    void short_end "tfl_short_end" ()
    void short_clear "tfl_short_clear" ()
    Py_ssize_t short_count "tfl_short_n"


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


cdef inline void copy_short(unsigned char *d, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """d[:n] = p[:n] for n <= 16 with fixed-size moves, as short_words loads: a call to
    memcpy per value was most of the time spent copying a batch's short values."""
    cdef uint64_t a, b
    cdef uint32_t lo, hi
    if n >= 8:
        memcpy(&a, p, 8)
        memcpy(&b, p + n - 8, 8)
        memcpy(d, &a, 8)
        memcpy(d + n - 8, &b, 8)
    elif n >= 4:
        memcpy(&lo, p, 4)
        memcpy(&hi, p + n - 4, 4)
        memcpy(d, &lo, 4)
        memcpy(d + n - 4, &hi, 4)
    elif n:
        d[0] = p[0]
        d[n // 2] = p[n // 2]
        d[n - 1] = p[n - 1]


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
        if i + 16 < n:  # a batch's values lie a record apart, mostly out of cache by now
            prefetch(spans[i + 16].ptr)
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
    (share_scan's; NULL shares none). Only short values share, so none shares the slot of a
    pooled value, which is filled after this loop."""
    cdef cnp.npy_intp size = n
    cdef cnp.ndarray out = cnp.PyArray_SimpleNew(1, &size, cnp.NPY_OBJECT)
    cdef PyObject **slots = <PyObject **>cnp.PyArray_DATA(out)
    cdef Py_ssize_t i, j, pending = 0, pooled = 0
    cdef object value
    cdef PoolWant *want = NULL
    memset(slots, 0, n * sizeof(PyObject *))  # an empty slot is None to numpy: safe if we fail midway
    short_begin(n)
    try:
        for i in range(n):
            j = i if first == NULL else first[i]
            if j != i:
                Py_XINCREF(slots[j])
                slots[i] = slots[j]
                continue
            if spans[i].len <= 1:  # CPython's own objects for b"" and single bytes
                value = PyBytes_FromStringAndSize(<const char *>spans[i].ptr, spans[i].len)
            elif spans[i].len <= SHARE_MAX:
                slots[i] = short_take(spans[i].len)
                copy_short(<unsigned char *>bytes_data(slots[i]), spans[i].ptr, spans[i].len)
                continue
            elif spans[i].len >= POOL_MIN:
                pooled += 1  # made or taken from the pool below, filled after
                pending += spans[i].len
                continue
            else:
                value = PyBytes_FromStringAndSize(NULL, spans[i].len)  # filled below
                pending += spans[i].len
            Py_INCREF(value)  # the slot's reference
            slots[i] = <PyObject *>value
    finally:
        short_end()
    if pooled:
        want = <PoolWant *>malloc(pooled * sizeof(PoolWant))
        if want == NULL:
            raise MemoryError()
        try:
            j = 0
            for i in range(n):
                if (first == NULL or first[i] == i) and spans[i].len >= POOL_MIN:
                    want[j].len, want[j].at = spans[i].len, i
                    j += 1
            pool_fill(slots, want, pooled)
        finally:
            free(want)
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
