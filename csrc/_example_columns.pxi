# Included by _example.pyx: the decoder's growable column buffers. A Table holds one Column
# per feature name; a Column holds one row per record (Example) or per step (FeatureList
# step), each row's kind and value count, and the values of every row back to back. The
# first part grows them without the GIL; the second hands them to numpy (taking over the
# storage) or makes the bytes objects.

# -- growable buffers and columns ----------------------------------------------------------

cdef extern from "blocks.h":
    size_t TFL_BLOCK_MIN
    enum: TFL_BLOCK_SLOTS
    void *tfl_block_take(size_t n, size_t *size) nogil
    void tfl_block_give(void *p, size_t size) nogil
    int tfl_blocks_list(void **data, size_t *size, int most) nogil
    void tfl_blocks_free() nogil


cdef struct Buf:
    char *data           # storage: malloc'd below TFL_BLOCK_MIN bytes, else a recycled block
    Py_ssize_t len       # bytes in use
    Py_ssize_t cap       # bytes allocated (a block's whole size)


cdef struct Column:
    const unsigned char *key   # UTF-8 name (the caller's bytes object, or inside a record)
    Py_ssize_t key_len         # its length
    bint sequence              # rows come from a FeatureList: any number per record
    Buf steps                  # int64 per record (sequence only): rows in it, -1 when absent
    Buf kinds                  # uint8 Kind per row
    Buf counts                 # int64 value count per row
    Buf floats                 # float32 values of all rows, concatenated
    Buf ints                   # int64 values
    Buf spans                  # ByteSpan per bytes value (inside its record)
    Buf first                  # Py_ssize_t per bytes value: share_scan's, for the object output
    Py_ssize_t last            # last record the key appeared in (-1: none yet)
    Py_ssize_t rec_rows        # row count at this record's start (last-wins rollback)
    Py_ssize_t rec_floats      # value counts at this record's start
    Py_ssize_t rec_ints
    Py_ssize_t rec_spans
    Py_ssize_t row_floats      # value counts at the current row's start (oneof switch)
    Py_ssize_t row_ints
    Py_ssize_t row_spans
    bint uniform               # after table_finish: every row has the same kind and count
    Py_ssize_t value_bytes     # after table_finish without share: the bytes values' total length
    const unsigned char *tpl   # the last entry of one packed float/int64 run, as a template:
    Py_ssize_t tpl_len         # its bytes before the values (tag, sizes, key), NULL / 0 for none
    Py_ssize_t tpl_data        # and its value bytes
    int tpl_kind               # FLOAT or INT64
    Py_ssize_t next            # the column whose key came after this one's, last time it had one


cdef struct Table:
    Column *cols         # one per key
    Py_ssize_t n         # columns in use
    Py_ssize_t cap       # columns allocated
    Py_ssize_t guess     # next column to try: keys tend to come in the same order
    Py_ssize_t head      # the column of the last record's first key
    Py_ssize_t prev      # the column of this record's key found last (-1: none yet)
    bint discover        # add a column for every unseen key
    bint sequence        # columns hold FeatureLists




cdef inline bint buf_reserve(Buf *b, Py_ssize_t extra) noexcept nogil:
    """Room for extra more bytes; the check is inlined, growing is not."""
    if extra <= b.cap - b.len:
        return True
    return buf_grow(b, extra)


cdef bint buf_grow(Buf *b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap, used
    cdef size_t size
    cdef char *p
    cap = b.cap * 2 if b.cap else 64
    while cap - b.len < extra:
        cap *= 2
    if <size_t>cap < TFL_BLOCK_MIN:
        p = <char *>realloc(b.data, cap)
        if p == NULL:
            return False
        b.data = p
        b.cap = cap
        return True
    # A large column (embeddings; the row tables of a very large batch): a recycled block,
    # whose pages an earlier batch already faulted in (see "large outputs in recycled blocks").
    p = <char *>tfl_block_take(cap, &size)
    if p == NULL:
        return False
    used = b.len
    if used:
        memcpy(p, b.data, used)
    buf_release(b)
    b.data, b.len, b.cap = p, used, size
    return True


cdef void buf_release(Buf *b) noexcept nogil:
    """Free the storage (a block goes back to be recycled); b is left empty."""
    tfl_block_give(b.data, b.cap)
    b.data = NULL
    b.len = b.cap = 0


cdef inline bint buf_push8(Buf *b, uint8_t v) noexcept nogil:
    if not buf_reserve(b, 1):
        return False
    b.data[b.len] = <char>v
    b.len += 1
    return True


cdef inline bint buf_push64(Buf *b, int64_t v) noexcept nogil:
    if not buf_reserve(b, 8):
        return False
    memcpy(b.data + b.len, &v, 8)
    b.len += 8
    return True


cdef void column_free(Column *c) noexcept nogil:
    buf_release(&c.steps)
    buf_release(&c.kinds)
    buf_release(&c.counts)
    buf_release(&c.floats)
    buf_release(&c.ints)
    buf_release(&c.spans)
    buf_release(&c.first)


cdef void table_free(Table *t) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(t.n):
        column_free(&t.cols[i])
    free(t.cols)
    t.cols = NULL
    t.n = t.cap = 0


cdef Column *table_add(Table *t, const unsigned char *key, Py_ssize_t key_len) noexcept nogil:
    cdef Column *cols
    cdef Py_ssize_t cap
    if t.n == t.cap:
        cap = t.cap * 2 if t.cap else 8
        cols = <Column *>realloc(t.cols, cap * sizeof(Column))
        if cols == NULL:
            return NULL
        t.cols = cols
        t.cap = cap
    memset(&t.cols[t.n], 0, sizeof(Column))
    t.cols[t.n].key = key
    t.cols[t.n].key_len = key_len
    t.cols[t.n].sequence = t.sequence
    t.cols[t.n].last = -1
    t.cols[t.n].next = t.n + 1   # until records say otherwise: the columns in their order
    t.n += 1
    return &t.cols[t.n - 1]


# -- per-record bookkeeping ----------------------------------------------------------------
#
# A column's rows are opened lazily: nothing happens for a column until its key shows up in
# a record, and then the records it missed since it last appeared get their absent rows in
# one go. A record therefore costs work only for the keys it holds.

cdef inline bint column_catch_up(Column *c, Py_ssize_t record) noexcept nogil:
    """Absent rows (Example) or -1 steps (SequenceExample) for the records after c.last and
    before record."""
    cdef Py_ssize_t i
    for i in range(c.last + 1, record):
        if c.sequence:
            if not buf_push64(&c.steps, -1):
                return False
        elif not (buf_push8(&c.kinds, ABSENT) and buf_push64(&c.counts, 0)):
            return False
    return True


cdef inline bint column_enter(Column *c, Py_ssize_t record) noexcept nogil:
    """The key appears in this record. The first time, open the record's row (an empty
    Feature until its value is parsed; for a FeatureList, no steps yet). A repeat means the
    last entry wins: drop what the earlier one left. Small enough to inline everywhere: the
    key was in the record before, as it mostly is; column_enter_else does the rest."""
    if c.last != record - 1:
        return column_enter_else(c, record)
    c.last = record
    c.rec_rows = c.kinds.len
    c.rec_floats = c.row_floats = c.floats.len
    c.rec_ints = c.row_ints = c.ints.len
    c.rec_spans = c.row_spans = c.spans.len
    if c.sequence:
        return buf_push64(&c.steps, 0)
    return buf_push8(&c.kinds, EMPTY) and buf_push64(&c.counts, 0)


cdef bint column_enter_else(Column *c, Py_ssize_t record) noexcept nogil:
    """column_enter for a repeated key, or one absent from the record before."""
    if c.last == record:
        c.floats.len = c.row_floats = c.rec_floats
        c.ints.len = c.row_ints = c.rec_ints
        c.spans.len = c.row_spans = c.rec_spans
        if c.sequence:
            c.kinds.len = c.rec_rows
            c.counts.len = c.rec_rows * 8
            (<int64_t *>c.steps.data)[c.steps.len // 8 - 1] = 0
        else:
            c.kinds.data[c.kinds.len - 1] = EMPTY
            (<int64_t *>c.counts.data)[c.counts.len // 8 - 1] = 0
        return True
    if not column_catch_up(c, record):
        return False
    c.last = record - 1
    return column_enter(c, record)


cdef inline bint column_new_row(Column *c) noexcept nogil:
    """A FeatureList step: one more (empty) row for this record."""
    c.row_floats = c.floats.len
    c.row_ints = c.ints.len
    c.row_spans = c.spans.len
    (<int64_t *>c.steps.data)[c.steps.len // 8 - 1] += 1
    return buf_push8(&c.kinds, EMPTY) and buf_push64(&c.counts, 0)


cdef inline bint buf_expect(Buf *b, Py_ssize_t per_record, Py_ssize_t records, Py_ssize_t most) noexcept nogil:
    """Room for the batch at the rate of its first record, at most `most` bytes."""
    cdef Py_ssize_t want = per_record * records
    return buf_reserve(b, (want if want < most else most) - b.len)


cdef bint table_expect(Table *t, Py_ssize_t records, Py_ssize_t input_bytes) noexcept nogil:
    """After the first record: size every column for the whole batch, so buffers are not
    regrown (and copied) a dozen times each. Capped by what the input could ever produce:
    a float takes its own size on the wire, an int64 or a bytes value at least 1/8 of it."""
    cdef Py_ssize_t i
    cdef Column *c
    for i in range(t.n):
        c = &t.cols[i]
        if not (buf_expect(&c.floats, c.floats.len, records, input_bytes)
                and buf_expect(&c.ints, c.ints.len, records, 8 * input_bytes)
                and buf_expect(&c.spans, c.spans.len, records, 8 * input_bytes)
                and (not c.sequence or (buf_expect(&c.kinds, c.kinds.len, records, input_bytes)
                                        and buf_expect(&c.counts, c.counts.len, records, 8 * input_bytes)))):
            return False
    return True


cdef bint table_finish(Table *t, Py_ssize_t records, bint share) noexcept nogil:
    """Absent rows for every column up to the end of the batch; with share, the values each
    bytes value can share an object with (share_scan), while the GIL is still released."""
    cdef Py_ssize_t i, nrows, nspans
    cdef Column *c
    cdef const uint8_t *kinds
    cdef const int64_t *counts
    for i in range(t.n):
        c = &t.cols[i]
        if not column_catch_up(c, records):
            return False
        c.last = records - 1
        kinds = <const uint8_t *>c.kinds.data
        counts = <const int64_t *>c.counts.data
        nrows = c.kinds.len
        # Every row alike when each equals the next: one memcmp of the array against itself
        # one row on (SIMD in libc), rather than a loop of compares that cannot vectorize.
        c.uniform = nrows > 0 and (nrows == 1 or (
            memcmp(kinds, kinds + 1, nrows - 1) == 0
            and memcmp(counts, counts + 1, (nrows - 1) * sizeof(int64_t)) == 0))
        nspans = c.spans.len // sizeof(ByteSpan)
        if share and nspans:
            if not buf_reserve(&c.first, nspans * sizeof(Py_ssize_t)):
                return False
            share_scan(<const ByteSpan *>c.spans.data, nspans, <Py_ssize_t *>c.first.data)
            c.first.len = nspans * sizeof(Py_ssize_t)
        elif not share:  # the bytes column's size, counted here rather than under the GIL
            c.value_bytes = fill_column(NULL, NULL, <const ByteSpan *>c.spans.data, nspans)
    return True


cdef inline void table_start(Table *t) noexcept nogil:
    """A record's map begins: guess that its first key is the last record's."""
    t.prev = -1
    t.guess = t.head


cdef inline void table_found(Table *t, Py_ssize_t k) noexcept nogil:
    """Column k's key is the next one in this record: keys tend to come in the same order in
    every record (not always the columns' order), so remember which came after which, and
    guess the one that followed column k's key last time."""
    if t.prev < 0:
        t.head = k
    else:
        t.cols[t.prev].next = k
    t.prev = k
    t.guess = t.cols[k].next


cdef inline Column *table_lookup(Table *t, const unsigned char *key, Py_ssize_t key_len) noexcept nogil:
    """The column named key, or NULL. Starts at the guessed column (table_found)."""
    cdef Py_ssize_t i, j
    cdef Column *c
    i = t.guess
    for j in range(t.n):
        if i >= t.n:
            i = 0
        c = &t.cols[i]
        if c.key_len == key_len and same_bytes(c.key, key, key_len):
            table_found(t, i)
            return c
        i += 1
    return NULL


# -- columns as numpy arrays (with the GIL) ------------------------------------------------

cdef extern from "Python.h":
    # Unchecked: a capsule without a context gives NULL, which Cython's declaration would
    # take for an error, and a capsule is often freed while an exception is on its way.
    void *capsule_context "PyCapsule_GetContext" (object capsule) noexcept


cdef void _free_capsule(object capsule) noexcept:
    """Free a capsule's memory; its context, when set, is the size (a block goes back to be
    recycled, see blocks.h)."""
    tfl_block_give(PyCapsule_GetPointer(capsule, NULL), <size_t>capsule_context(capsule))


cdef object _array(Buf *b, int typenum, Py_ssize_t itemsize):
    """The buffer as a 1-D array. The array takes over the storage (freed, or a block
    recycled, with it) rather than copying it; b is left empty."""
    cdef cnp.npy_intp n = b.len // itemsize
    cdef char *data = b.data
    cdef size_t size = b.cap
    if b.len == 0:
        return cnp.PyArray_SimpleNew(1, &n, typenum)
    if size < TFL_BLOCK_MIN:
        data = <char *>realloc(b.data, b.len)   # give back the unused tail
        if data == NULL:
            data = b.data
        else:
            size = b.len
    b.data = NULL
    b.len = b.cap = 0
    return _owning(1, &n, typenum, data, size)


cdef cnp.ndarray _owning(int nd, cnp.npy_intp *dims, int typenum, void *data, size_t size):
    """An array over data (size bytes) that frees it when it goes, or recycles it when it is
    a block (blocks.h)."""
    cdef cnp.ndarray out
    try:
        capsule = PyCapsule_New(data, NULL, _free_capsule)
        PyCapsule_SetContext(capsule, <void *>size)
    except BaseException:
        tfl_block_give(data, size)
        raise
    out = cnp.PyArray_SimpleNewFromData(nd, dims, typenum, data)
    cnp.set_array_base(out, capsule)
    return out


# -- large outputs in recycled blocks -------------------------------------------------------
#
# A batch's large buffers (a bytes column's values, a raw column, a column of embeddings:
# 32 MiB for 1,024 images) were fresh allocations that glibc serves with mmap and unmaps when
# freed, so every batch faulted each page in again: W1 with bytes_output="column" took
# 0.03-0.10 s a pass where bytes objects (from the heap, reused) took 0.03 s. Buffers of
# TFL_BLOCK_MIN bytes and more are blocks that blocks.h keeps when their array goes and hands
# to the next batch that fits.

cdef cnp.ndarray _output(int nd, cnp.npy_intp *dims, int typenum, Py_ssize_t nbytes):
    """An uninitialised C-contiguous array of nbytes for a batch's output: in a recycled
    block when it is large."""
    cdef size_t size
    cdef void *p
    if <size_t>nbytes < TFL_BLOCK_MIN:
        return cnp.PyArray_EMPTY(nd, dims, typenum, 0)
    p = tfl_block_take(nbytes, &size)
    if p == NULL:
        raise MemoryError()
    return _owning(nd, dims, typenum, p, size)


def _blocks_kept():
    """(address, size) of each kept block: for tests."""
    cdef void *data[TFL_BLOCK_SLOTS]
    cdef size_t size[TFL_BLOCK_SLOTS]
    cdef int n = tfl_blocks_list(data, size, TFL_BLOCK_SLOTS)
    return [(<size_t>data[i], size[i]) for i in range(n)]


def _blocks_free():
    """Free every kept block, the encoder's scratch too (tfrecord_lite.release_memory)."""
    tfl_blocks_free()


cdef object _uniform(Column *c):
    """(kind, count) when every row has the same kind and value count, else None: lets the
    spec layer skip its per-row checks for the common all-present column."""
    if not c.uniform:
        return None
    return ((<const uint8_t *>c.kinds.data)[0], (<const int64_t *>c.counts.data)[0])


# -- bytes values as one buffer plus offsets -----------------------------------------------
#
# The opt-in bytes output (``bytes_column=True``): every bytes value of a column copied back
# to back into one uint8 array, with int64 offsets (n + 1, starting at 0) marking where each
# begins and ends. No Python object is made per value, and the buffers can be handed to Arrow
# (large_binary) as they are.

cdef Py_ssize_t fill_column(unsigned char *dst, int64_t *offsets, const ByteSpan *spans,
                            Py_ssize_t n) noexcept nogil:
    """Copy n spans back to back into dst and write their n + 1 offsets; returns the bytes
    copied (dst is NULL to only count them)."""
    cdef Py_ssize_t i, at = 0
    for i in range(n):
        if dst != NULL:
            offsets[i] = at
            memcpy(dst + at, spans[i].ptr, spans[i].len)
        at += spans[i].len
    if dst != NULL:
        offsets[n] = at
    return at


cdef object _bytes_column(Column *c):
    """The bytes values as (values, offsets): one uint8 array and int64 offsets. Their total
    length was counted by table_finish without the GIL (here it was a pass over every value
    under it)."""
    cdef Py_ssize_t n = c.spans.len // sizeof(ByteSpan), total = c.value_bytes
    cdef const ByteSpan *spans = <const ByteSpan *>c.spans.data
    cdef cnp.ndarray values, offsets
    cdef unsigned char *dst
    cdef int64_t *op
    cdef cnp.npy_intp size
    size = total
    values = _output(1, &size, cnp.NPY_UINT8, total)
    offsets = np.empty(n + 1, dtype=np.int64)
    dst = <unsigned char *>cnp.PyArray_DATA(values)
    op = <int64_t *>cnp.PyArray_DATA(offsets)
    if total >= NOGIL_MIN_BYTES:
        with nogil:
            fill_column(dst, op, spans, n)
    else:
        fill_column(dst, op, spans, n)
    return values, offsets


# -- column output -------------------------------------------------------------------------

cdef object _byte_values(Column *c, bint bytes_column):
    """The bytes values: (values, offsets) when bytes_column, else an object array."""
    if bytes_column:
        return _bytes_column(c)
    return bytes_objects(<const ByteSpan *>c.spans.data, c.spans.len // sizeof(ByteSpan),
                         <const Py_ssize_t *>c.first.data)


cdef extern from *:
    """
    /* An instance of the tuple subtype type holding its 7 fields, made as tuple.__new__ makes
       one, without that call's argument tuples. */
    static PyObject *tfl_tuple7(PyObject *type, PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                                PyObject *e, PyObject *f, PyObject *g) {
        PyObject *items[7] = {a, b, c, d, e, f, g};
        PyTypeObject *t = (PyTypeObject *)type;
        PyObject *obj = t->tp_alloc(t, 7);
        int i;
        if (!obj)
            return NULL;
        for (i = 0; i < 7; i++) {
            Py_INCREF(items[i]);
            PyTuple_SET_ITEM(obj, i, items[i]);
        }
        return obj;
    }
    """
    object tuple7 "tfl_tuple7" (object, object, object, object, object, object, object, object)


cdef inline object _decoded(steps, kinds, counts, floats, ints, values, uniform):
    """A DecodedColumn: the namedtuple's __new__ is Python code, a few hundred ns for each of
    a batch's columns under the GIL, and tuple.__new__ still makes two argument tuples."""
    return tuple7(DecodedColumn, steps, kinds, counts, floats, ints, values, uniform)


cdef object _column_output(Column *c, Py_ssize_t raw, bint bytes_column, object lean):
    """One column as a DecodedColumn (steps or None, kinds, counts, floats, ints, bytes values, uniform):
    bytes values as an object array, as (values, offsets) when bytes_column, or for a raw
    column (uint8 array (records, raw), byte length per row or -1); uniform as _uniform
    gives it. When uniform equals lean, only that kind's values (the rest None)."""
    cdef Py_ssize_t i, nrows = c.kinds.len, s = 0
    cdef ByteSpan *spans = <ByteSpan *>c.spans.data
    cdef const uint8_t *kinds = <const uint8_t *>c.kinds.data
    cdef const int64_t *counts = <const int64_t *>c.counts.data
    cdef cnp.ndarray raw_out, lengths
    cdef int64_t *lp
    cdef unsigned char *dst
    cdef cnp.npy_intp dims[2]
    if raw >= 0:
        dims[0], dims[1] = nrows, raw
        raw_out = _output(2, dims, cnp.NPY_UINT8, nrows * raw)
        lengths = np.full(nrows, -1, dtype=np.int64)
        dst = <unsigned char *>cnp.PyArray_DATA(raw_out)
        lp = <int64_t *>cnp.PyArray_DATA(lengths)
        with nogil:
            for i in range(nrows):
                if kinds[i] == BYTES and counts[i] == 1 and spans[s].len == raw:
                    memcpy(dst + i * raw, spans[s].ptr, raw)
                else:
                    memset(dst + i * raw, 0, raw)   # the block may be a recycled one
                if kinds[i] == BYTES:
                    if counts[i] == 1:
                        lp[i] = spans[s].len
                    s += counts[i]
        byte_values = (raw_out, lengths)
    uniform = _uniform(c)
    if lean is not None and raw < 0 and not c.sequence and uniform == lean:
        # Every row has the kind and count the spec asks for: its values are all the spec
        # layer reads, and each array left out is an allocation the GIL is held for.
        return _decoded(
            None, None, None,
            _array(&c.floats, cnp.NPY_FLOAT32, 4) if lean[0] == FLOAT else None,
            _array(&c.ints, cnp.NPY_INT64, 8) if lean[0] == INT64 else None,
            _byte_values(c, bytes_column) if lean[0] == BYTES else None,
            uniform,
        )
    if raw < 0:
        byte_values = _byte_values(c, bytes_column)
    return _decoded(
        _array(&c.steps, cnp.NPY_INT64, 8) if c.sequence else None,
        _array(&c.kinds, cnp.NPY_UINT8, 1),
        _array(&c.counts, cnp.NPY_INT64, 8),
        _array(&c.floats, cnp.NPY_FLOAT32, 4),
        _array(&c.ints, cnp.NPY_INT64, 8),
        byte_values,
        uniform,
    )


cdef int _set_keys(Table *t, tuple keys) except -1:
    """The columns of the given keys, in their order. A column points at its key's UTF-8,
    which CPython keeps in the str (for ASCII, its own characters): keys holds them for the
    call, and no bytes object is made per key and call."""
    cdef Py_ssize_t n
    cdef const char *utf8
    for key in keys:
        utf8 = PyUnicode_AsUTF8AndSize(key, &n)  # raises as str.encode() does
        if table_add(t, <const unsigned char *>utf8, n) == NULL:
            raise MemoryError()
    return 0


cdef list _table_keys(Table *t):
    return [PyUnicode_DecodeUTF8(<const char *>t.cols[i].key, t.cols[i].key_len, NULL) for i in range(t.n)]

