# Included by _example.pyx: Example and SequenceExample decoding into the Tables of
# _example_columns.pxi, of the records _example_records.pxi points at, and the Python entry
# points decode_examples and decode_sequence_examples.

cdef struct Parser:
    Table ctx            # Example features / SequenceExample context
    Table seq            # SequenceExample feature_lists
    Py_ssize_t record    # index of the record being parsed
    const unsigned char *entry_at  # where the map entry being parsed starts (at its tag)
    int in_steps         # 1 inside a FeatureList: its Features and lists lie one level deeper
    Fault fault          # the first failure, if any


cdef enum:   # each message's nesting depth: protobuf counts it with groups toward MAX_DEPTH
    AT_RECORD = 0        # Example, SequenceExample
    AT_MAP = 1           # Features, FeatureLists
    AT_ENTRY = 2         # a map entry
    AT_FEATURE = 3       # Feature (+ Parser.in_steps), FeatureList
    AT_LIST = 4          # BytesList, FloatList, Int64List (+ Parser.in_steps)


# -- the decoder's cold wire readers -------------------------------------------------------
#
# Beside the inline readers of wire.pxd, but plain functions: unknown fields and new names
# are rare, and inlining these at every call site made the hot loops measurably slower.

cdef int skip_field(Fault *p, Cursor *c, uint32_t field, uint32_t wire, int depth) noexcept nogil:
    """Skip one unknown field of any wire type; a group runs to its matching end-group tag.
    depth: the field's message's (AT_*), plus the groups it lies in."""
    cdef uint64_t v
    cdef const unsigned char *data
    cdef const unsigned char *at = c.pos
    cdef Cursor sub
    cdef uint32_t f2, w2
    if wire == VARINT:
        if not cursor_varint(c, &v):
            return fail(p, E_VARINT, at)
    elif wire == I64:
        if not cursor_take(c, 8, &data):
            return fail(p, E_TRUNCATED, at)
    elif wire == I32:
        if not cursor_take(c, 4, &data):
            return fail(p, E_TRUNCATED, at)
    elif wire == LEN:
        return read_len(p, c, &sub)
    elif wire == SGROUP:
        if depth >= MAX_DEPTH:
            return fail(p, E_DEPTH, at)
        while True:
            if c.pos >= c.end:
                return fail(p, E_TRUNCATED, at)
            if read_tag(p, c, &f2, &w2, True) < 0:
                return -1
            if w2 == EGROUP:
                if f2 != field:
                    return fail(p, E_GROUP, at)
                return 0
            if skip_field(p, c, f2, w2, depth + 1) < 0:
                return -1
    elif wire == EGROUP:
        return fail(p, E_GROUP, at)
    else:
        return fail(p, E_WIRE, at)
    return 0


cdef int utf8_valid(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """Proto3 string fields must hold UTF-8 (no surrogates, no overlong forms)."""
    cdef Py_ssize_t i = 0
    cdef unsigned char b, b1
    cdef int need, j
    while i < n:
        b = s[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need = 1
        elif 0xE0 <= b <= 0xEF:
            need = 2
        elif 0xF0 <= b <= 0xF4:
            need = 3
        else:
            return False
        if n - i <= need:
            return False
        b1 = s[i + 1]
        if (b == 0xE0 and b1 < 0xA0) or (b == 0xED and b1 > 0x9F) or \
           (b == 0xF0 and b1 < 0x90) or (b == 0xF4 and b1 > 0x8F):
            return False
        for j in range(1, need + 1):
            if (s[i + j] & 0xC0) != 0x80:
                return False
        i += need + 1
    return True


# -- Feature and list parsing --------------------------------------------------------------

cdef int parse_list(Parser *p, Cursor *c, Column *col, int kind, int64_t *count) noexcept nogil:
    """A BytesList/FloatList/Int64List body: field 1 repeated, packed (LEN) or one value per
    tag; other fields skipped. col NULL validates without storing."""
    cdef uint32_t field, wire
    cdef Cursor sub
    cdef uint64_t v
    cdef Py_ssize_t n
    cdef const unsigned char *data
    cdef const unsigned char *at
    cdef ByteSpan span
    while c.pos < c.end:
        at = c.pos
        if read_tag(&p.fault, c, &field, &wire) < 0:
            return -1
        if field != 1:
            if skip_field(&p.fault, c, field, wire, AT_LIST + p.in_steps) < 0:
                return -1
            continue
        if kind == BYTES and wire == LEN:
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            if col != NULL:
                span.ptr = sub.pos
                span.len = sub.end - sub.pos
                if not buf_reserve(&col.spans, sizeof(ByteSpan)):
                    return fail(&p.fault, E_MEMORY, at)
                memcpy(col.spans.data + col.spans.len, &span, sizeof(ByteSpan))
                col.spans.len += sizeof(ByteSpan)
            count[0] += 1
        elif kind == FLOAT and wire == LEN:
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            n = sub.end - sub.pos
            if n % 4:
                return fail(&p.fault, E_PACKED, at)
            if col != NULL:
                if not buf_reserve(&col.floats, n):
                    return fail(&p.fault, E_MEMORY, at)
                copy_floats(col.floats.data + col.floats.len, sub.pos, n)
                col.floats.len += n
            count[0] += n // 4
        elif kind == FLOAT and wire == I32:
            if not cursor_take(c, 4, &data):
                return fail(&p.fault, E_TRUNCATED, at)
            if col != NULL:
                if not buf_reserve(&col.floats, 4):
                    return fail(&p.fault, E_MEMORY, at)
                copy_floats(col.floats.data + col.floats.len, data, 4)
                col.floats.len += 4
            count[0] += 1
        elif kind == INT64 and wire == LEN:
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            # At most one value per byte, so reserving the byte count is enough.
            if col != NULL and not buf_reserve(&col.ints, 8 * (sub.end - sub.pos)):
                return fail(&p.fault, E_MEMORY, at)
            while sub.pos < sub.end:
                at = sub.pos
                if not cursor_varint(&sub, &v):
                    return fail(&p.fault, E_VARINT, at)
                if col != NULL:
                    (<int64_t *>(col.ints.data + col.ints.len))[0] = <int64_t>v
                    col.ints.len += 8
                count[0] += 1
        elif kind == INT64 and wire == VARINT:
            if not cursor_varint(c, &v):
                return fail(&p.fault, E_VARINT, at)
            if col != NULL:
                if not buf_push64(&col.ints, <int64_t>v):
                    return fail(&p.fault, E_MEMORY, at)
            count[0] += 1
        elif skip_field(&p.fault, c, field, wire, AT_LIST + p.in_steps) < 0:
            return -1
    return 0


cdef inline int parse_feature_common(Parser *p, Cursor *c, Column *col, const unsigned char *entry_at) noexcept nogil:
    """The Feature shapes every writer produces, into a fresh row of col: one *_list field
    (tag 0x0A bytes, 0x12 float, 0x1A int64) that holds one packed run of floats or int64s
    (tag 0x0A) or only bytes values (tag 0x0A each). Returns 1 when done, 0 when the Feature
    is anything else; then nothing was consumed or kept and the general parser takes over,
    so it also reports every error. -1 on allocation failure. entry_at: where the map entry
    starts when it is the Feature's alone and ends with it (key, then this value), else
    NULL; its packed run then becomes the column's template (entry_as_before)."""
    cdef Cursor f = c[0]
    cdef Cursor lst, sub
    cdef int kind, done
    cdef int64_t count = 0
    cdef Py_ssize_t i
    cdef ByteSpan *span
    if cursor_expect(&f, 0x12):
        kind = FLOAT
    elif cursor_expect(&f, 0x1A):
        kind = INT64
    elif cursor_expect(&f, 0x0A):
        kind = BYTES
    else:
        return 0
    if not cursor_len(&f, &lst) or f.pos != f.end or lst.pos == lst.end:
        return 0
    if kind == BYTES:
        i = col.spans.len
        while lst.pos < lst.end:
            if not (cursor_expect(&lst, TAG_KEY) and cursor_len(&lst, &sub)):
                col.spans.len = i
                return 0
            if not buf_reserve(&col.spans, sizeof(ByteSpan)):
                return fail(&p.fault, E_MEMORY, sub.pos)
            span = <ByteSpan *>(col.spans.data + col.spans.len)
            span.ptr = sub.pos
            span.len = sub.end - sub.pos
            col.spans.len += sizeof(ByteSpan)
            count += 1
    else:
        if not cursor_expect(&lst, TAG_KEY) or not cursor_len(&lst, &sub) or lst.pos != lst.end:
            return 0
        done = put_packed(p, col, kind, sub.pos, sub.end - sub.pos)
        if done != 1:
            return done
        # The entry ends with one packed run: its bytes before the values are a template that
        # the next records' entries for this key often repeat (a fixed-length float's always).
        if entry_at != NULL:
            col.tpl, col.tpl_len, col.tpl_data, col.tpl_kind = entry_at, sub.pos - entry_at, sub.end - sub.pos, kind
        c[0] = f
        return 1
    col.kinds.data[col.kinds.len - 1] = <char>kind
    (<int64_t *>(col.counts.data + col.counts.len - 8))[0] = count
    c[0] = f
    return 1


cdef inline int put_packed(Parser *p, Column *col, int kind, const unsigned char *data, Py_ssize_t n) noexcept nogil:
    """n bytes of packed float32 or int64 values as the fresh row of col: 1 when done, 0
    when they do not parse (nothing kept), -1 on allocation failure."""
    cdef Py_ssize_t count = 0
    cdef Cursor sub
    cdef uint64_t v
    cdef int64_t *ints
    if kind == FLOAT:
        if n % 4:
            return 0
        if not buf_reserve(&col.floats, n):
            return fail(&p.fault, E_MEMORY, data)
        copy_floats(col.floats.data + col.floats.len, data, n)
        col.floats.len += n
        count = n // 4
    else:
        # At most one value per byte, so reserving the byte count is enough.
        if not buf_reserve(&col.ints, 8 * n):
            return fail(&p.fault, E_MEMORY, data)
        ints = <int64_t *>(col.ints.data + col.ints.len)
        cursor_init(&sub, data, n)
        while sub.pos < sub.end:
            if not cursor_varint(&sub, &v):
                return 0   # nothing kept: col.ints.len has not moved
            ints[count] = <int64_t>v
            count += 1
        col.ints.len += 8 * count
    col.kinds.data[col.kinds.len - 1] = <char>kind
    (<int64_t *>(col.counts.data + col.counts.len - 8))[0] = count
    return 1


cdef inline int entry_as_before(Parser *p, Cursor *c, Table *t) noexcept nogil:
    """The next map entry, when it repeats the template of the column expected next (the
    same key, sizes and shape as that column's last entry, byte for byte): its values go
    straight into the column (a repeated key's last entry still wins), without parsing the
    entry's tags and sizes again. 1 when done; 0 leaves c for the general path, as it was;
    -1 on allocation failure."""
    cdef Column *col
    cdef Py_ssize_t k = t.guess if t.guess < t.n else 0
    cdef int done
    if t.n == 0:
        return 0
    col = &t.cols[k]
    if (col.tpl_len == 0 or c.end - c.pos < col.tpl_len + col.tpl_data
            or not tfl_same_bytes(c.pos, col.tpl, col.tpl_len)):
        return 0
    if not column_enter(col, p.record):
        return fail(&p.fault, E_MEMORY, c.pos)
    # Values that do not parse leave the row empty; the general path opens it again (as a
    # repeated key: nothing to drop) and reports them.
    done = put_packed(p, col, col.tpl_kind, c.pos + col.tpl_len, col.tpl_data)
    if done == 1:
        c.pos += col.tpl_len + col.tpl_data
        table_found(t, k)
    return done


cdef int parse_feature(Parser *p, Cursor *c, Column *col) noexcept nogil:
    """A Feature body into col's last row (which may already hold an earlier part of it)."""
    cdef uint32_t field, wire
    cdef Cursor sub
    cdef int kind = EMPTY
    cdef int64_t count = 0
    cdef int64_t *row_count = NULL
    cdef char *row_kind = NULL
    cdef int done
    if col != NULL:
        row_kind = col.kinds.data + col.kinds.len - 1
        if row_kind[0] == EMPTY:   # a fresh row: no kind, no values yet
            done = parse_feature_common(p, c, col, NULL)
            if done != 0:
                return done if done < 0 else 0
        row_count = <int64_t *>(col.counts.data + col.counts.len - 8)
        kind = row_kind[0]
        count = row_count[0]
    while c.pos < c.end:
        if read_tag(&p.fault, c, &field, &wire) < 0:
            return -1
        if 1 <= field <= 3 and wire == LEN:
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            if <int>field != kind:
                # Setting another member of the oneof clears the previous one.
                kind = field
                count = 0
                if col != NULL:
                    col.floats.len = col.row_floats
                    col.ints.len = col.row_ints
                    col.spans.len = col.row_spans
            if parse_list(p, &sub, col, kind, &count) < 0:
                return -1
        elif skip_field(&p.fault, c, field, wire, AT_FEATURE + p.in_steps) < 0:
            return -1
    if col != NULL:
        row_kind[0] = <char>kind
        row_count[0] = count
    return 0


ctypedef Column *StepsOf    # parse_repeated into a column: a FeatureList's steps
ctypedef Table *EntriesOf   # parse_repeated into a table: a Features / FeatureLists map


ctypedef fused Repeated:
    StepsOf
    EntriesOf


cdef int parse_repeated(Parser *p, Cursor *c, Repeated into) noexcept nogil:
    """The loop Features, FeatureLists and FeatureList share: field 1 (LEN) repeated, each a
    map entry of a table or one more step (row) of a column; other fields skipped. A fused
    type rather than a flag: each kind gets its own C function, so the compiler inlines
    parse_entry into the map loop as it would into a loop written for it."""
    cdef uint32_t field, wire
    cdef Cursor sub
    cdef int done
    cdef int depth = AT_FEATURE   # a FeatureList's
    if Repeated is EntriesOf:
        depth = AT_MAP
    while c.pos < c.end:
        if Repeated is EntriesOf:
            done = entry_as_before(p, c, into)
            if done != 0:
                if done < 0:
                    return -1
                continue
            p.entry_at = c.pos
        if read_tag(&p.fault, c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            if Repeated is EntriesOf:
                if parse_entry(p, &sub, into) < 0:
                    return -1
            else:
                if into != NULL and not column_new_row(into):
                    return fail(&p.fault, E_MEMORY, sub.pos)
                if parse_feature(p, &sub, into) < 0:
                    return -1
        elif skip_field(&p.fault, c, field, wire, depth) < 0:
            return -1
    return 0


cdef int parse_feature_list(Parser *p, Cursor *c, Column *col) noexcept nogil:
    """A FeatureList body: each field-1 Feature is one more row (step)."""
    cdef int done
    p.in_steps = 1
    done = parse_repeated[StepsOf](p, c, col)
    p.in_steps = 0
    return done


cdef inline int entry_column(Parser *p, Table *t, const unsigned char *key, Py_ssize_t key_len,
                             const unsigned char *key_at, Column **out) noexcept nogil:
    """The column for a map entry's key, opened for this record; NULL when the key is not
    wanted. Only a key that matches no column is checked for UTF-8: a column's name is
    valid already (the caller's names are encoded str, found names were checked)."""
    cdef Column *col = table_lookup(t, key, key_len)
    if col == NULL:
        return entry_new_key(p, t, key, key_len, key_at, out)
    if not column_enter(col, p.record):
        return fail(&p.fault, E_MEMORY, key_at)
    out[0] = col
    return 0


cdef int entry_new_key(Parser *p, Table *t, const unsigned char *key, Py_ssize_t key_len,
                       const unsigned char *key_at, Column **out) noexcept nogil:
    """entry_column for a key no column has (yet): check it, then add a column when every
    key is wanted."""
    cdef Column *col
    out[0] = NULL
    if not utf8_valid(key, key_len):
        return fail(&p.fault, E_UTF8, key_at)
    if not t.discover:
        return 0
    col = table_add(t, key, key_len)
    if col == NULL:
        return fail(&p.fault, E_MEMORY, key_at)
    table_found(t, t.n - 1)
    if not column_enter(col, p.record):
        return fail(&p.fault, E_MEMORY, key_at)
    out[0] = col
    return 0


cdef int parse_entry(Parser *p, Cursor *c, Table *t) noexcept nogil:
    """A map entry {key = 1; value = 2}. The key may come after the value and either may
    repeat (last key wins, values merge), so find the key first, then parse the values.
    An entry holding any other field is checked but dropped, as protobuf does (it keeps
    such an entry among the parent's unknown fields, not in the map)."""
    cdef uint32_t field, wire
    cdef Cursor sub
    cdef Cursor start = c[0]
    cdef bint unknown = False
    cdef const unsigned char *key = NULL
    cdef const unsigned char *key_at = c.pos
    cdef Py_ssize_t key_len = 0
    cdef Column *col
    cdef Cursor value
    cdef int done
    # Fast path for what every writer produces: key, then value, then nothing.
    if (cursor_expect(&start, TAG_KEY) and cursor_len(&start, &sub) and cursor_expect(&start, TAG_VALUE)
            and cursor_len(&start, &value) and start.pos == start.end):
        c[0] = start   # all of it
        if entry_column(p, t, sub.pos, sub.end - sub.pos, key_at + 1, &col) < 0:
            return -1
        if t.sequence:
            return parse_feature_list(p, &value, col)
        if col != NULL:   # its row is fresh: try the common shapes without a call
            done = parse_feature_common(p, &value, col, p.entry_at)
            if done != 0:
                return done if done < 0 else 0
        return parse_feature(p, &value, col)
    start = c[0]   # any surprise: start over on the general path, which reports it
    while c.pos < c.end:
        if read_tag(&p.fault, c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            key_at = c.pos
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            key = sub.pos
            key_len = sub.end - sub.pos
            # Every occurrence must be UTF-8 (protobuf checks each), not only the last.
            if not utf8_valid(key, key_len):
                return fail(&p.fault, E_UTF8, key_at)
        else:
            unknown = unknown or not (field == 2 and wire == LEN)
            if skip_field(&p.fault, c, field, wire, AT_ENTRY) < 0:
                return -1
    if unknown:
        col = NULL   # dropped, but its values must still parse, as in protobuf
    elif entry_column(p, t, key if key != NULL else <const unsigned char *>"", key_len, key_at, &col) < 0:
        return -1
    c[0] = start
    while c.pos < c.end:   # the first pass checked the framing; this one still checks its codes
        if read_tag(&p.fault, c, &field, &wire) < 0:
            return -1
        if field == 2 and wire == LEN:
            if read_len(&p.fault, c, &sub) < 0:
                return -1
            if (parse_feature_list(p, &sub, col) if t.sequence else parse_feature(p, &sub, col)) < 0:
                return -1
        elif skip_field(&p.fault, c, field, wire, AT_ENTRY) < 0:
            return -1
    return 0


cdef int parse_map(Parser *p, Cursor *c, Table *t) noexcept nogil:
    """Features / FeatureLists: field 1 repeated map entries."""
    table_start(t)
    return parse_repeated[EntriesOf](p, c, t)


cdef int parse_record(Parser *p, const unsigned char *data, Py_ssize_t n, bint sequence) noexcept nogil:
    """An Example (features = 1) or SequenceExample (context = 1, feature_lists = 2)."""
    cdef Cursor c, sub
    cdef uint32_t field, wire
    cursor_init(&c, data, n)
    while c.pos < c.end:
        if read_tag(&p.fault, &c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            if read_len(&p.fault, &c, &sub) < 0 or parse_map(p, &sub, &p.ctx) < 0:
                return -1
        elif sequence and field == 2 and wire == LEN:
            if read_len(&p.fault, &c, &sub) < 0 or parse_map(p, &sub, &p.seq) < 0:
                return -1
        elif skip_field(&p.fault, &c, field, wire, AT_RECORD) < 0:
            return -1
    return 0


cdef extern from *:
    """
    /* Asks for a record's first bytes (up to 2 KiB) ahead of its parse. The records of an
       interleave's batch take turns between many blocks, and the hardware prefetcher, which
       follows runs within one stream, missed them: 16 files' W2 records decoded 30% slower
       than the same records back to back. */
    static inline void tfl_prefetch_record(const unsigned char *p, Py_ssize_t n) {
    #if defined(__GNUC__) || defined(__clang__)
        Py_ssize_t i, m = n < 2048 ? n : 2048;
        for (i = 0; i < m; i += 64) __builtin_prefetch(p + i, 0, 3);
    #else
        (void)p; (void)n;
    #endif
    }
    """
    void tfl_prefetch_record(const unsigned char *p, Py_ssize_t n) noexcept nogil

cdef enum:
    PREFETCH_AHEAD = 2   # records: a W2 record parses in about 250 ns, a memory miss ~100 ns


def _decode(records, keys, raw_sizes, sequence_keys, bint sequence, bint bytes_column, lean=None):
    cdef Parser p
    cdef Py_ssize_t n, i, lost
    cdef _Records recs = _Records(records)
    cdef tuple key_list = tuple(keys) if keys is not None else None
    cdef tuple seq_list = tuple(sequence_keys) if sequence_keys is not None else None
    cdef int status = 0, pointed = 0
    memset(&p, 0, sizeof(Parser))
    p.ctx.discover = keys is None
    p.seq.discover = sequence and sequence_keys is None
    p.seq.sequence = True
    cdef uintptr_t fault = 0
    n = recs.n
    guard.enter()
    try:
        if key_list is not None:
            _set_keys(&p.ctx, key_list)
        if seq_list is not None:
            _set_keys(&p.seq, seq_list)
        for i in range(p.ctx.n):   # one row per record: size the row arrays once
            if not (buf_reserve(&p.ctx.cols[i].kinds, n) and buf_reserve(&p.ctx.cols[i].counts, 8 * n)):
                raise MemoryError()
        with nogil:
            pointed = recs.point()
            for i in range(n if pointed == 0 else 0):
                p.record = i
                if i + PREFETCH_AHEAD < n:
                    tfl_prefetch_record(recs.ptrs[i + PREFETCH_AHEAD], recs.lens[i + PREFETCH_AHEAD])
                status = parse_record(&p, recs.ptrs[i], recs.lens[i], sequence)
                if status < 0:
                    break
                if i == 0 and n > 1 and not (table_expect(&p.ctx, n, recs.total_bytes)
                                             and table_expect(&p.seq, n, recs.total_bytes)):
                    status = fail(&p.fault, E_MEMORY, NULL)
                    break
            # Objects are made only without bytes_column: find which values can share one here.
            if status == 0 and pointed == 0 and not (table_finish(&p.ctx, n, not bytes_column)
                                                     and table_finish(&p.seq, n, not bytes_column)):
                status = fail(&p.fault, E_MEMORY, NULL)
        # The row tables and values of a batch take about as many bytes as its records, and
        # are freed by the next batch: show glibc that size (objects.pxd, tfl_heap_hint), or
        # it gives them back to the kernel after each batch and the next faults them in again
        # (in-memory batches of 4,096 W2 records in the main thread: 319 page faults each).
        heap_hint(recs.total_bytes)
        if pointed < 0:
            raise recs.bad_record()
        if status < 0:
            if p.fault.err == E_MEMORY:
                raise MemoryError()
            lost = recs.first_lost(0, True)
            if lost >= 0:
                raise recs.lost_record(lost)
            raise ExampleDecodeError(malformed(sequence, p.fault.err, p.fault.at - recs.ptrs[p.record]),
                                     index=p.record)
        raw = raw_sizes or {}
        ctx_keys = list(key_list) if key_list is not None else _table_keys(&p.ctx)
        ctx = [_column_output(&p.ctx.cols[i], raw.get(ctx_keys[i], -1) if raw else -1, bytes_column,
                              None if lean is None else lean[i])
               for i in range(p.ctx.n)]
        if not sequence:
            return ctx_keys, ctx
        seq_keys = list(seq_list) if seq_list is not None else _table_keys(&p.seq)
        return ctx_keys, ctx, seq_keys, [_column_output(&p.seq.cols[i], -1, bytes_column, None)
                                             for i in range(p.seq.n)]
    finally:
        table_free(&p.ctx)
        table_free(&p.seq)
        fault = guard.leave()
        # Whatever the decode made or raised, it read zeros for lost bytes.
        if fault:
            raise recs.lost_record(max(0, recs.first_lost(fault, True)))
        if recs.any_cut():
            lost = recs.first_lost(0, False)
            if lost >= 0:
                raise recs.lost_record(lost)


def decode_examples(records, keys=None, raw_sizes=None, bytes_column=False, lean=None):
    """Columns of a batch of serialized Examples: a list of bytes-likes, or a RecordBatch
    (anything with ``segments``), read in place.

    keys: names to extract (None: every name found, in order of first appearance).
    raw_sizes: {name: nbytes} for names whose single bytes value is copied straight into a
    (records, nbytes) uint8 array. Returns (keys, columns); each column is
    (None, kinds, counts, floats, ints, bytes_values, uniform) with one row per record:
    bytes_values an object array of bytes, or with bytes_column (values, offsets): a uint8
    array of all values back to back and n + 1 int64 offsets; uniform (kind, count) when
    every row agrees.

    lean: with keys, a (kind, count) or None per key; a column whose uniform equals it
    comes with only that kind's values (steps, kinds, counts and the other kinds' values
    None): parse_example's all-present FixedLenFeature, which reads nothing else."""
    if lean is not None and (keys is None or len(lean) != len(keys)):
        raise InvalidArgumentError("lean needs keys and one entry per key")
    return _decode(records, keys, raw_sizes, None, False, bytes_column, lean)


def decode_sequence_examples(records, context_keys=None, sequence_keys=None, raw_sizes=None,
                             bytes_column=False):
    """Columns of a batch of serialized SequenceExamples: (context_keys, context_columns,
    sequence_keys, sequence_columns). A sequence column's rows are FeatureList steps and its
    first item gives the steps per record (-1 where the key is absent)."""
    return _decode(records, context_keys, raw_sizes, sequence_keys, True, bytes_column)
