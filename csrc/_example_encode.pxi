# Included by _example.pyx: Example and SequenceExample encoding. Each record is measured
# (every length prefix), then written right after; the column encoders write a whole batch
# into one buffer that grows if a record does not fit, without the GIL.

cdef struct Feat:
    const unsigned char *key   # UTF-8 name
    Py_ssize_t key_len
    int kind                   # Kind; RAW here means one bytes value of n bytes at data
    const char *data           # float32/int64 values, or raw bytes
    Py_ssize_t n               # value count (raw: byte count)
    const char **bytes_at      # BYTES: the n values' data and sizes, borrowed from bytes
    const Py_ssize_t *bytes_len  # objects that the caller keeps alive
    float scalar_f             # storage for a single Python float value
    int64_t scalar_i           # storage for a single Python int value
    Py_ssize_t packed          # packed varint bytes (INT64)
    Py_ssize_t list_size       # body of the *List message
    Py_ssize_t feat_size       # body of the Feature message
    Py_ssize_t fixed_entry     # a column's map entry size when every row's is the same
                               # (float32, raw: the sizes above hold for every row), else 0


cdef enum:
    ROOM_MAX = 1 << 26  # a column encoder's first buffer, at most (it grows past it)


cdef struct Col:
    const char *base           # FLOAT / INT64 / RAW: row i's data at base + i * width
    Py_ssize_t width
    const char **bytes_at      # BYTES: every value of the column, row after row
    Py_ssize_t *bytes_len
    Py_ssize_t *rows           # BYTES: row i holds values rows[i]:rows[i + 1]


cdef Py_ssize_t feat_sizes(Feat *f) noexcept nogil:
    """Fill f.list_size and f.feat_size; returns the map entry's body size."""
    cdef Py_ssize_t i, s = 0
    cdef const int64_t *iv
    if f.kind == FLOAT:
        s = framed(4 * f.n) if f.n else 0   # an empty packed field is not written
    elif f.kind == INT64:
        iv = <const int64_t *>f.data
        for i in range(f.n):
            s += vsize(<uint64_t>iv[i])
        f.packed = s
        s = framed(s) if f.n else 0
    elif f.kind == RAW:
        s = framed(f.n)
    elif f.kind == BYTES:
        for i in range(f.n):
            s += framed(f.bytes_len[i])
    f.list_size = s
    f.feat_size = 0 if f.kind == EMPTY else framed(s)
    return framed(f.key_len) + framed(f.feat_size)


cdef unsigned char *put_feature(unsigned char *p, Feat *f) noexcept nogil:
    """Feature { oneof: bytes_list = 1 | float_list = 2 | int64_list = 3 }, lists packed."""
    cdef Py_ssize_t i
    cdef const int64_t *iv
    if f.kind == EMPTY:
        return p
    p[0] = 0x0A if f.kind in (BYTES, RAW) else (0x12 if f.kind == FLOAT else 0x1A)
    p = put_varint(p + 1, f.list_size)
    if f.kind == RAW:
        p[0] = TAG_KEY
        return tfl_put_bytes(put_varint(p + 1, f.n), f.data, f.n)
    if f.kind == BYTES:
        for i in range(f.n):
            p[0] = TAG_KEY
            p = tfl_put_bytes(put_varint(p + 1, f.bytes_len[i]), f.bytes_at[i], f.bytes_len[i])
        return p
    if f.n == 0:
        return p
    p[0] = TAG_KEY
    if f.kind == FLOAT:
        p = put_varint(p + 1, 4 * f.n)
        if TFL_LITTLE_ENDIAN:
            return tfl_put_bytes(p, f.data, 4 * f.n)
        else:
            for i in range(f.n):
                p[4 * i] = f.data[4 * i + 3]
                p[4 * i + 1] = f.data[4 * i + 2]
                p[4 * i + 2] = f.data[4 * i + 1]
                p[4 * i + 3] = f.data[4 * i]
        return p + 4 * f.n
    p = put_varint(p + 1, f.packed)
    iv = <const int64_t *>f.data
    for i in range(f.n):
        p = put_varint(p, <uint64_t>iv[i])
    return p


cdef unsigned char *put_entry(unsigned char *p, Feat *f, Py_ssize_t entry_size) noexcept nogil:
    """Map entry {key = 1; value = 2}, both always written, as protobuf does."""
    p[0] = TAG_KEY
    p = put_varint(p + 1, entry_size)
    p[0] = TAG_KEY
    p = tfl_put_bytes(put_varint(p + 1, f.key_len), f.key, f.key_len)
    p[0] = TAG_VALUE
    p = put_varint(p + 1, f.feat_size)
    return put_feature(p, f)


cdef Py_ssize_t features_body(Feat *feats, Py_ssize_t nf, Py_ssize_t *entry) noexcept nogil:
    """Size of the map entries of a Features message (an Example's field 1, a
    SequenceExample's context); entry receives each entry's size. The field is framed(body)
    bytes."""
    cdef Py_ssize_t i, body = 0
    for i in range(nf):
        if not feats[i].fixed_entry:   # else entry[i] holds it already (_columns put it there)
            entry[i] = feat_sizes(&feats[i])
        body += framed(entry[i])
    return body


cdef unsigned char *put_features(unsigned char *p, Feat *feats, Py_ssize_t nf,
                                 const Py_ssize_t *entry, Py_ssize_t body) noexcept nogil:
    """The Features field features_body() measured (tag 1, then the entries), written at p;
    returns its end."""
    cdef Py_ssize_t i
    p[0] = TAG_KEY
    p = put_varint(p + 1, body)
    for i in range(nf):
        p = put_entry(p, &feats[i], entry[i])
    return p


cdef class _Views:
    """Buffers and scratch memory borrowed for one encode call, released together."""
    cdef Py_buffer *views
    cdef Py_ssize_t n, cap
    cdef list blocks   # capsules of malloc'd scratch, freed with this object

    def __cinit__(self, Py_ssize_t cap):
        self.views = <Py_buffer *>calloc(cap if cap else 1, sizeof(Py_buffer))
        self.cap = cap
        self.blocks = []
        if self.views == NULL:
            raise MemoryError()

    cdef const char *get(self, object obj, Py_ssize_t *nbytes) except? NULL:
        if self.n == self.cap:
            raise InvalidArgumentError("the values changed while they were encoded")
        acquire(obj, &self.views[self.n])
        self.n += 1
        nbytes[0] = self.views[self.n - 1].len
        return <const char *>self.views[self.n - 1].buf

    cdef void *alloc(self, Py_ssize_t nbytes) except NULL:
        cdef void *p = malloc(nbytes if nbytes > 0 else 1)
        if p == NULL:
            raise MemoryError()
        self.blocks.append(PyCapsule_New(p, NULL, _free_capsule))
        return p

    cdef int bytes_values(self, Feat *f, list values) except -1:
        """Point f at the bytes objects of values (kept alive by the caller)."""
        cdef Py_ssize_t n = len(values)
        cdef const char **at = <const char **>self.alloc(n * sizeof(char *))
        cdef Py_ssize_t *size = <Py_ssize_t *>self.alloc(n * sizeof(Py_ssize_t))
        _gather(f, values, at, size)
        f.bytes_at, f.bytes_len, f.n = at, size, n
        return 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            PyBuffer_Release(&self.views[i])
        free(self.views)


cdef object _key(Feat *f):
    return PyUnicode_DecodeUTF8(<const char *>f.key, f.key_len, "replace")


cdef int _fill(Feat *f, bytes key, int kind, object values, _Views views) except -1:
    """One feature from a normalized value: float32/int64 1-D array or a single Python
    float/int, list of bytes, None."""
    cdef Py_ssize_t nbytes
    f.key = <const unsigned char *>PyBytes_AS_STRING(key)
    f.key_len = PyBytes_GET_SIZE(key)
    f.kind = kind
    f.n = 0
    if kind == FLOAT and type(values) is float:
        f.scalar_f = <float>(<double>values)
        f.data = <const char *>&f.scalar_f
        f.n = 1
    elif kind == INT64 and type(values) is int:
        f.scalar_i = <int64_t>values
        f.data = <const char *>&f.scalar_i
        f.n = 1
    elif kind == FLOAT or kind == INT64:
        f.data = views.get(values, &nbytes)
        f.n = nbytes // (4 if kind == FLOAT else 8)
    elif kind == RAW:
        f.data = views.get(values, &nbytes)
        f.n = nbytes
    elif kind == BYTES:
        views.bytes_values(f, <list?>values)
    return 0


cdef bytes _write_features(Feat *feats, Py_ssize_t nf, Py_ssize_t *entry):
    """Example {features = 1 {entries}} from nf filled Feats; entry: nf sizes of scratch."""
    cdef Py_ssize_t body = features_body(feats, nf, entry)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, framed(body))
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(out)
    tfl_check_end(put_features(p, feats, nf, entry, body), p + framed(body))
    return out


def encode_example(list keys, list kinds, list values):
    """One serialized Example. keys: UTF-8 bytes, in the order to write; kinds: KIND_FLOAT
    (values a C-contiguous float32 array), KIND_INT64 (int64 array), KIND_BYTES (list of
    bytes), KIND_RAW (one bytes value: any buffer) or KIND_EMPTY (None)."""
    cdef Py_ssize_t i, nf = len(keys)
    cdef _Views views = _Views(nf)
    cdef Feat *feats = <Feat *>views.alloc(nf * sizeof(Feat))
    cdef Py_ssize_t *entry = <Py_ssize_t *>views.alloc(nf * sizeof(Py_ssize_t))
    memset(feats, 0, nf * sizeof(Feat))
    for i in range(nf):
        _fill(&feats[i], keys[i], kinds[i], values[i], views)
    return _write_features(feats, nf, entry)


cdef int _columns(list keys, list kinds, list columns, Py_ssize_t n, Feat *feats, Col *cols,
                  Py_ssize_t *entry, _Views views) except -1:
    """Column sources for encode_examples: keys and kinds into feats, each column's data
    into cols, and the map entry size of each column whose rows all have the same one (float32,
    raw) into entry, measured once. BYTES columns are gathered into value arrays once, with
    the GIL, so that rows can then be encoded without it."""
    cdef Py_ssize_t i, j, v, nf = len(keys), nbytes, total
    cdef list column
    cdef PyObject *item
    cdef bytes key
    cdef int kind
    for j in range(nf):
        kind = kinds[j]
        key = keys[j]   # checked: the pointer below must be a bytes object's
        feats[j].key = <const unsigned char *>PyBytes_AS_STRING(key)
        feats[j].key_len = PyBytes_GET_SIZE(key)
        feats[j].kind = kind
        if kind in (FLOAT, INT64, RAW):
            cols[j].base = views.get(columns[j], &nbytes)
            cols[j].width = nbytes // n if n else 0
            feats[j].n = cols[j].width // (4 if kind == FLOAT else 8 if kind == INT64 else 1)
            if kind != INT64:   # a varint's size follows its value; these sizes never change
                feats[j].fixed_entry = entry[j] = feat_sizes(&feats[j])
            continue
        if len(columns[j]) != n:
            raise FeatureSpecError(f"feature {keys[j].decode()!r}: {len(columns[j])} rows, expected {n}")
        if kind != BYTES:
            continue
        column = <list?>columns[j]
        total = 0
        # Borrowed references, no count kept per row: the list holds every row, and this
        # holds the GIL that parallel encoders share.
        for i in range(n):  # a row is one bytes value, or a list of them
            item = PyList_GET_ITEM(column, i)
            total += 1 if PyBytes_Check(<object>item) else len(<list?><object>item)
        cols[j].rows = <Py_ssize_t *>views.alloc((n + 1) * sizeof(Py_ssize_t))
        cols[j].bytes_at = <const char **>views.alloc(total * sizeof(char *))
        cols[j].bytes_len = <Py_ssize_t *>views.alloc(total * sizeof(Py_ssize_t))
        v = 0
        for i in range(n):
            cols[j].rows[i] = v
            item = PyList_GET_ITEM(column, i)
            if PyBytes_Check(<object>item):
                cols[j].bytes_at[v] = PyBytes_AS_STRING(<object>item)
                cols[j].bytes_len[v] = PyBytes_GET_SIZE(<object>item)
                v += 1
            else:
                _gather(&feats[j], <list><object>item, cols[j].bytes_at + v, cols[j].bytes_len + v)
                v += len(<list><object>item)
        cols[j].rows[n] = v
    return 0


cdef int _gather(Feat *f, list row, const char **at, Py_ssize_t *size) except -1:
    cdef Py_ssize_t i
    cdef object v
    for i in range(len(row)):
        v = row[i]
        if not PyBytes_Check(v):
            raise FeatureSpecError(f"feature {_key(f)!r}: bytes values must be bytes, not {type(v).__name__}")
        at[i] = PyBytes_AS_STRING(v)
        size[i] = PyBytes_GET_SIZE(v)
    return 0


cdef inline void _row(Feat *feats, const Col *cols, const int *kinds, Py_ssize_t nf, Py_ssize_t i) noexcept nogil:
    """Point the column features at row i."""
    cdef Py_ssize_t j
    for j in range(nf):
        if kinds[j] == BYTES:
            feats[j].bytes_at = cols[j].bytes_at + cols[j].rows[i]
            feats[j].bytes_len = cols[j].bytes_len + cols[j].rows[i]
            feats[j].n = cols[j].rows[i + 1] - cols[j].rows[i]
        elif kinds[j] != ROWS:
            feats[j].data = cols[j].base + i * cols[j].width


def encode_examples(list keys, list kinds, list columns, Py_ssize_t n):
    """n serialized Examples from columns. kinds per column: KIND_FLOAT / KIND_INT64 (a
    C-contiguous (n, k) array), KIND_RAW (C-contiguous (n, nbytes) uint8 array: each row is
    one bytes value), KIND_BYTES (list of n rows, each a bytes value or a list of bytes),
    KIND_ROWS (list of n (kind, values) pairs as encode_example takes). Encoded without the
    GIL into one buffer, then cut into bytes objects, unless a KIND_ROWS column needs Python
    objects per row: then the records are encoded one by one."""
    if ROWS in kinds:
        return _encode_by_row(keys, kinds, columns, n)
    return _encode_rows(keys, kinds, columns, n, False)


cdef list _encode_by_row(list keys, list kinds, list columns, Py_ssize_t n):
    """encode_examples' records one at a time, with the GIL (KIND_ROWS values are objects)."""
    cdef Py_ssize_t i, j, nf = len(keys)
    cdef _Views views = _Views(nf)
    cdef Feat *feats = <Feat *>views.alloc(nf * sizeof(Feat))
    cdef Col *cols = <Col *>views.alloc(nf * sizeof(Col))
    cdef int *kind = <int *>views.alloc(nf * sizeof(int))
    cdef Py_ssize_t *entry = <Py_ssize_t *>views.alloc(nf * sizeof(Py_ssize_t))
    cdef _Views row_views
    cdef list out = [None] * n
    memset(feats, 0, nf * sizeof(Feat))
    memset(cols, 0, nf * sizeof(Col))
    for j in range(nf):
        kind[j] = kinds[j]
    _columns(keys, kinds, columns, n, feats, cols, entry, views)
    for i in range(n):
        _row(feats, cols, kind, nf, i)
        row_views = None
        for j in range(nf):
            if kind[j] == ROWS:
                if row_views is None:
                    row_views = _Views(nf)
                pair = (<list?>columns[j])[i]
                _fill(&feats[j], keys[j], pair[0], pair[1], row_views)
        out[i] = _write_features(feats, nf, entry)
    return out


def encode_examples_framed(list keys, list kinds, list columns, Py_ssize_t n):
    """encode_examples' n Examples as TFRecord frames in one buffer: returns (frames
    bytearray, starts, lengths), the int64 arrays locating each record's data. Made without
    the GIL, unless a KIND_ROWS column needs Python objects per row: then the records are
    encoded one by one and framed."""
    if ROWS in kinds:
        return _frame_records(_encode_by_row(keys, kinds, columns, n))
    return _encode_rows(keys, kinds, columns, n, True)


cdef object _encode_rows(list keys, list kinds, list columns, Py_ssize_t n, bint frame):
    """The n records of columns (no KIND_ROWS), written one after the other without the GIL:
    when frame, as TFRecord frames in one bytearray, returned with the int64 starts and
    lengths of their data; else bare, in a recycled block (blocks.h: a fresh one each call
    faulted its pages in), then returned as a list of bytes."""
    cdef Py_ssize_t i = 0, j, nf = len(keys), total = 0, room = 0, need = 0
    cdef size_t size, held = 0   # the block's size
    cdef unsigned char *block = NULL
    cdef unsigned char *grown
    cdef Py_ssize_t overhead = FRAME_OVERHEAD if frame else 0
    cdef _Views views = _Views(nf)
    cdef Feat *feats = <Feat *>views.alloc(nf * sizeof(Feat))
    cdef Col *cols = <Col *>views.alloc(nf * sizeof(Col))
    cdef int *kind = <int *>views.alloc(nf * sizeof(int))
    cdef Py_ssize_t *entry = <Py_ssize_t *>views.alloc(nf * sizeof(Py_ssize_t))
    cdef cnp.ndarray starts = np.empty(n, np.int64)
    cdef cnp.ndarray lengths = np.empty(n, np.int64)
    cdef int64_t *start = <int64_t *>cnp.PyArray_DATA(starts)
    cdef int64_t *length = <int64_t *>cnp.PyArray_DATA(lengths)
    cdef bytearray buf
    cdef unsigned char *base
    cdef list records
    memset(feats, 0, nf * sizeof(Feat))
    memset(cols, 0, nf * sizeof(Col))
    for j in range(nf):
        kind[j] = kinds[j]
    _columns(keys, kinds, columns, n, feats, cols, entry, views)
    # One pass measures and writes each record: measuring them all first, then writing,
    # measured each twice (0.78x the time for W2 blocks). The buffer starts at n times the
    # first record (rows of one schema are alike), with a margin, at most ROOM_MAX unless
    # one record is larger, and grows when a record would not fit.
    if n:
        _row(feats, cols, kind, nf, 0)
        room = framed(features_body(feats, nf, entry)) + overhead
        room = max(room, ROOM_MAX if room > ROOM_MAX // n else n * room + (n * room >> 4))
    if frame:
        buf = PyByteArray_FromStringAndSize(NULL, room)
        base = <unsigned char *>PyByteArray_AS_STRING(buf)
    else:
        base = block = <unsigned char *>_take(room if room else 1, &held)
        room = held
    try:
        while True:
            with nogil:
                i = _rows_into(base, room, i, n, frame, &total, &need, feats, cols, kind, nf, entry, start, length)
            if i == n:
                break
            room = max(need, room + room // 2)
            if frame:
                PyByteArray_Resize(buf, room)
                base = <unsigned char *>PyByteArray_AS_STRING(buf)
            else:
                grown = <unsigned char *>_take(room, &size)
                memcpy(grown, block, total)
                tfl_block_give(block, held)
                base = block = grown
                room = held = size
        if frame:
            PyByteArray_Resize(buf, total)
            return buf, starts, lengths
        records = [None] * n
        for i in range(n):
            records[i] = PyBytes_FromStringAndSize(<const char *>base + start[i], length[i])
        return records
    finally:
        if block != NULL:
            tfl_block_give(block, held)


cdef void *_take(Py_ssize_t n, size_t *size) except NULL:
    cdef void *p = tfl_block_take(n, size)
    if p == NULL:
        raise MemoryError()
    return p


cdef Py_ssize_t _rows_into(unsigned char *base, Py_ssize_t room, Py_ssize_t i, Py_ssize_t n, bint frame,
                           Py_ssize_t *total, Py_ssize_t *need, Feat *feats, const Col *cols,
                           const int *kind, Py_ssize_t nf, Py_ssize_t *entry, int64_t *start,
                           int64_t *length) noexcept nogil:
    """Write rows i, i + 1, ... one after the other (each in a TFRecord frame when frame)
    from base + total[0] while they fit in room bytes (advancing total[0], filling start and
    length); returns the first row left, need[0] then the room it takes."""
    cdef Py_ssize_t body, size
    cdef Py_ssize_t header = FRAME_HEADER if frame else 0, overhead = FRAME_OVERHEAD if frame else 0
    cdef unsigned char *p
    while i < n:
        _row(feats, cols, kind, nf, i)
        body = features_body(feats, nf, entry)
        size = framed(body)
        if total[0] + size + overhead > room:
            need[0] = total[0] + size + overhead
            break
        start[i] = total[0] + header
        length[i] = size
        p = base + start[i]
        tfl_check_end(put_features(p, feats, nf, entry, body), p + size)
        if frame:
            _frame_around(p, size)
        total[0] += size + overhead
        i += 1
    return i


cdef inline void _frame_around(unsigned char *data, int64_t n) noexcept nogil:
    """The TFRecord header (length, its masked CRC) before n bytes of data, the data's
    masked CRC after them."""
    tfl_store_le64(data - FRAME_HEADER, <uint64_t>n)
    tfl_store_le32(data - FRAME_HEADER + 8, tfl_mask_crc(framing_crc32c(0, data - FRAME_HEADER, 8)))
    tfl_store_le32(data + n, tfl_mask_crc(framing_crc32c(0, data, n)))


cdef tuple _frame_records(list records):
    """Bytes records framed into one buffer (by _framing.encode_frames), with the int64
    starts and lengths of their data."""
    cdef Py_ssize_t i, n = len(records), total = 0
    cdef cnp.ndarray starts = np.empty(n, np.int64)
    cdef cnp.ndarray lengths = np.empty(n, np.int64)
    cdef int64_t *start = <int64_t *>cnp.PyArray_DATA(starts)
    cdef int64_t *length = <int64_t *>cnp.PyArray_DATA(lengths)
    for i in range(n):
        length[i] = PyBytes_GET_SIZE(records[i])
        start[i] = total + FRAME_HEADER
        total += length[i] + FRAME_OVERHEAD
    return _framing.encode_frames(records), starts, lengths


def encode_sequence_example(list context_keys, list context_kinds, list context_values,
                            list list_keys, list list_steps):
    """One serialized SequenceExample {context = 1; feature_lists = 2}: context as
    encode_example takes it; list_steps holds, per FeatureList key, a list of (kind, values)
    pairs, one Feature per step. FeatureLists entries are {key = 1; value = 2 FeatureList}
    and a FeatureList is {repeated Feature feature = 1}."""
    cdef Py_ssize_t i, j, s, nc = len(context_keys), nl = len(list_keys)
    cdef Py_ssize_t nsteps = sum([len(<list?>per_key) for per_key in list_steps])   # lists: len holds
    cdef Py_ssize_t ctx_body = 0, lists_body = 0
    cdef _Views views = _Views(nc + nsteps)
    cdef Feat *ctx = <Feat *>calloc(nc if nc else 1, sizeof(Feat))
    cdef Feat *steps = <Feat *>calloc(nsteps if nsteps else 1, sizeof(Feat))
    cdef Py_ssize_t *sizes = <Py_ssize_t *>calloc(nc + 2 * nl + 1, sizeof(Py_ssize_t))
    cdef Py_ssize_t *ctx_entry
    cdef Py_ssize_t *list_body
    cdef Py_ssize_t *list_entry
    cdef unsigned char *p
    cdef unsigned char *end
    cdef bytes out, key
    try:
        if ctx == NULL or steps == NULL or sizes == NULL:
            raise MemoryError()
        ctx_entry, list_body, list_entry = sizes, sizes + nc, sizes + nc + nl
        for i in range(nc):
            _fill(&ctx[i], context_keys[i], context_kinds[i], context_values[i], views)
        ctx_body = features_body(ctx, nc, ctx_entry)
        s = 0
        for i in range(nl):
            key = list_keys[i]
            for kind, values in <list>list_steps[i]:
                _fill(&steps[s], key, kind, values, views)
                feat_sizes(&steps[s])
                list_body[i] += framed(steps[s].feat_size)
                s += 1
            list_entry[i] = framed(PyBytes_GET_SIZE(key)) + framed(list_body[i])
            lists_body += framed(list_entry[i])
        out = PyBytes_FromStringAndSize(NULL, framed(ctx_body) + framed(lists_body))
        p = <unsigned char *>PyBytes_AS_STRING(out)
        end = p + PyBytes_GET_SIZE(out)
        p = put_features(p, ctx, nc, ctx_entry, ctx_body)
        p[0] = TAG_VALUE
        p = put_varint(p + 1, lists_body)
        s = 0
        for i in range(nl):
            key = list_keys[i]
            p[0] = TAG_KEY
            p = put_varint(p + 1, list_entry[i])
            p[0] = TAG_KEY
            p = tfl_put_bytes(put_varint(p + 1, PyBytes_GET_SIZE(key)), PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
            p[0] = TAG_VALUE
            p = put_varint(p + 1, list_body[i])
            for j in range(len(<list>list_steps[i])):
                p[0] = TAG_KEY
                p = put_varint(p + 1, steps[s].feat_size)
                p = put_feature(p, &steps[s])
                s += 1
        tfl_check_end(p, end)
        return out
    finally:
        free(ctx)
        free(steps)
        free(sizes)

