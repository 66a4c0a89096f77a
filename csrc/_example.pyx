# cython: freethreading_compatible = False
"""Protobuf wire decoding and encoding of tf.train.Example and SequenceExample.

Decoding is columnar and spec-agnostic: every requested key (or every key, when ``keys`` is
None) becomes a column of rows, one row per Feature, holding the Feature's kind, its value
count and its values appended to flat buffers. Interpreting columns against a feature spec
(dense, sparse, ragged, raw tensors) is the job of tfrecord_lite/example.py; this module only
turns bytes into columns and typed columns back into bytes.

Wire facts implemented here (tensorflow/core/example/{example,feature}.proto)::

    Example         { Features features = 1; }
    SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
    Features        { map<string, Feature> feature = 1; }       entry: key = 1, value = 2
    FeatureLists    { map<string, FeatureList> feature_list = 1; }
    FeatureList     { repeated Feature feature = 1; }
    Feature         { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   Int64List int64_list = 3; } }
    BytesList       { repeated bytes value = 1; }
    FloatList       { repeated float value = 1 [packed = true]; }
    Int64List       { repeated int64 value = 1 [packed = true]; }

Protobuf merge semantics are kept: a repeated map key or FeatureList key keeps the last
entry, a repeated ``features``/``context``/``feature_lists`` field merges, a repeated
``*_list`` field of the same kind concatenates, and switching the oneof clears it. Unknown
fields of every wire type (groups included) are skipped; everything else malformed raises
ExampleDecodeError. The whole parse runs without the GIL; Python objects (bytes values,
arrays) are made afterwards from the recorded spans.

The pure-Python twin is tfrecord_lite/_example_py.py; both expose the same names.
"""
import os
import sys

cimport numpy as cnp
import numpy as np
from cpython.buffer cimport PyBuffer_Release
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

from cursor cimport (Cursor, acquire, cursor_init, cursor_len, cursor_take, cursor_varint, tfl_crc32c, tfl_crc32c_init,
                    tfl_load_le32, tfl_mask_crc, tfl_store_le32, tfl_store_le64)

from tfrecord_lite.errors import ExampleDecodeError, FeatureSpecError, InvalidArgumentError

cnp.import_array()
# This extension carries its own copy of the CRC32C code (for framed encoding): pick its
# backend by the same rule as the framing module.
tfl_crc32c_init(os.environ.get("TFRECORD_LITE_CRC32C_TABLE") == "1")

cdef enum Kind:          # a row's Feature kind; same values in the twin
    ABSENT = 0           # the key is not in this record
    BYTES = 1
    FLOAT = 2
    INT64 = 3
    EMPTY = 4            # the key is present with an empty Feature (no kind set)
    RAW = 5              # encoder only: 2-D uint8 array, one bytes value per row
    ROWS = 6             # encoder only: list of per-row (kind, values)

KIND_ABSENT = ABSENT
KIND_BYTES = BYTES
KIND_FLOAT = FLOAT
KIND_INT64 = INT64
KIND_EMPTY = EMPTY
KIND_RAW = RAW
KIND_ROWS = ROWS

cdef enum Wire:
    VARINT = 0
    I64 = 1
    LEN = 2
    SGROUP = 3
    EGROUP = 4
    I32 = 5

cdef enum Err:           # decode failures; messages in _ERRORS
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

_ERRORS = {
    E_TRUNCATED: "a field runs past the end of its message",
    E_VARINT: "a varint is longer than 10 bytes or cut short",
    E_TAG: "invalid field tag (field number 0 or over 32 bits)",
    E_WIRE: "invalid wire type",
    E_GROUP: "unmatched end-group tag",
    E_DEPTH: "nesting deeper than 100 levels",
    E_PACKED: "packed float data is not a multiple of 4 bytes",
    E_UTF8: "a feature name is not valid UTF-8",
}

cdef enum:
    MAX_DEPTH = 100      # protobuf's default recursion limit
    TAG_KEY = 0x0A       # field 1, LEN
    TAG_VALUE = 0x12     # field 2, LEN
    TAG_FLOAT = 0x0D     # field 1, I32 (unpacked float)

cdef bint LITTLE_ENDIAN = sys.byteorder == "little"


# -- growable buffers and columns ----------------------------------------------------------

cdef struct Buf:
    char *data           # malloc'd storage
    Py_ssize_t len       # bytes in use
    Py_ssize_t cap       # bytes allocated


cdef struct Span:
    const unsigned char *ptr   # a bytes value inside a record
    Py_ssize_t len             # its length


cdef struct Column:
    const unsigned char *key   # UTF-8 name (the caller's bytes object, or inside a record)
    Py_ssize_t key_len         # its length
    bint sequence              # rows come from a FeatureList: any number per record
    Buf steps                  # int64 per record (sequence only): rows in it, -1 when absent
    Buf kinds                  # uint8 Kind per row
    Buf counts                 # int64 value count per row
    Buf floats                 # float32 values of all rows, concatenated
    Buf ints                   # int64 values
    Buf spans                  # Span per bytes value
    Py_ssize_t last            # last record the key appeared in (-1: none yet)
    Py_ssize_t rec_rows        # row count at this record's start (last-wins rollback)
    Py_ssize_t rec_floats      # value counts at this record's start
    Py_ssize_t rec_ints
    Py_ssize_t rec_spans
    Py_ssize_t row_floats      # value counts at the current row's start (oneof switch)
    Py_ssize_t row_ints
    Py_ssize_t row_spans
    bint uniform               # after table_finish: every row has the same kind and count


cdef struct Table:
    Column *cols         # one per key
    Py_ssize_t n         # columns in use
    Py_ssize_t cap       # columns allocated
    Py_ssize_t guess     # next column to try: keys tend to come in the same order
    bint discover        # add a column for every unseen key
    bint sequence        # columns hold FeatureLists


cdef struct Parser:
    Table ctx            # Example features / SequenceExample context
    Table seq            # SequenceExample feature_lists
    Py_ssize_t record    # index of the record being parsed
    int err              # Err of the first failure
    const unsigned char *err_at   # where it happened


cdef inline bint buf_reserve(Buf *b, Py_ssize_t extra) noexcept nogil:
    """Room for extra more bytes; the check is inlined, growing is not."""
    if extra <= b.cap - b.len:
        return True
    return buf_grow(b, extra)


cdef bint buf_grow(Buf *b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap
    cdef char *p
    cap = b.cap * 2 if b.cap else 64
    while cap - b.len < extra:
        cap *= 2
    p = <char *>realloc(b.data, cap)
    if p == NULL:
        return False
    b.data = p
    b.cap = cap
    return True


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
    free(c.steps.data)
    free(c.kinds.data)
    free(c.counts.data)
    free(c.floats.data)
    free(c.ints.data)
    free(c.spans.data)


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
    last entry wins: drop what the earlier one left."""
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
    if record - c.last > 1 and not column_catch_up(c, record):
        return False
    c.last = record
    c.rec_rows = c.kinds.len
    c.rec_floats = c.row_floats = c.floats.len
    c.rec_ints = c.row_ints = c.ints.len
    c.rec_spans = c.row_spans = c.spans.len
    if c.sequence:
        return buf_push64(&c.steps, 0)
    return buf_push8(&c.kinds, EMPTY) and buf_push64(&c.counts, 0)


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


cdef bint table_finish(Table *t, Py_ssize_t records) noexcept nogil:
    """Absent rows for every column up to the end of the batch."""
    cdef Py_ssize_t i, j, nrows
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
        c.uniform = nrows > 0
        for j in range(1, nrows):
            if kinds[j] != kinds[0] or counts[j] != counts[0]:
                c.uniform = False
                break
    return True


cdef inline bint same_key(const unsigned char *a, const unsigned char *b, Py_ssize_t n) noexcept nogil:
    """a[:n] == b[:n]. Feature names are short and often share a prefix ("float_0",
    "float_1"), so compare them as two overlapping words rather than byte by byte."""
    cdef uint64_t x, y, u, v
    cdef uint32_t x4, y4, u4, v4
    if n >= 8:
        if n > 16:
            return memcmp(a, b, n) == 0
        memcpy(&x, a, 8)
        memcpy(&y, b, 8)
        memcpy(&u, a + n - 8, 8)
        memcpy(&v, b + n - 8, 8)
        return x == y and u == v
    if n >= 4:
        memcpy(&x4, a, 4)
        memcpy(&y4, b, 4)
        memcpy(&u4, a + n - 4, 4)
        memcpy(&v4, b + n - 4, 4)
        return x4 == y4 and u4 == v4
    return n == 0 or (a[0] == b[0] and a[n - 1] == b[n - 1] and a[n // 2] == b[n // 2])


cdef inline Column *table_lookup(Table *t, const unsigned char *key, Py_ssize_t key_len) noexcept nogil:
    """The column named key, or NULL. Starts at the column after the last one found: keys
    tend to come in the same order in every record."""
    cdef Py_ssize_t i, j
    cdef Column *c
    i = t.guess
    for j in range(t.n):
        if i >= t.n:
            i = 0
        c = &t.cols[i]
        i += 1
        if c.key_len == key_len and same_key(c.key, key, key_len):
            t.guess = i
            return c
    return NULL


# -- wire primitives -----------------------------------------------------------------------

cdef inline int fail(Parser *p, int err, const unsigned char *at) noexcept nogil:
    if p.err == E_OK:
        p.err = err
        p.err_at = at
    return -1


cdef inline int read_tag(Parser *p, Cursor *c, uint32_t *field, uint32_t *wire,
                         bint in_group=False) noexcept nogil:
    """Tag = varint (field_number << 3 | wire_type); field numbers start at 1 and fit 29 bits.
    Inside a skipped group, field number 0 passes, as protobuf's upb runtime lets it."""
    cdef uint64_t tag
    cdef const unsigned char *at = c.pos
    if not cursor_varint(c, &tag):
        return fail(p, E_VARINT, at)
    if (tag >> 32) != 0 or ((tag >> 3) == 0 and not in_group):
        return fail(p, E_TAG, at)
    field[0] = <uint32_t>(tag >> 3)
    wire[0] = <uint32_t>(tag & 7)
    return 0


cdef inline int read_len(Parser *p, Cursor *c, Cursor *sub) noexcept nogil:
    """LEN field: varint byte count, then that many bytes; sub is clamped to them."""
    cdef uint64_t n
    cdef const unsigned char *at = c.pos
    cdef const unsigned char *data
    if not cursor_varint(c, &n):
        return fail(p, E_VARINT, at)
    if not cursor_take(c, n, &data):
        return fail(p, E_TRUNCATED, at)
    cursor_init(sub, data, <Py_ssize_t>n)
    return 0


cdef int skip_field(Parser *p, Cursor *c, uint32_t field, uint32_t wire, int depth) noexcept nogil:
    """Skip one unknown field of any wire type; a group runs to its matching end-group tag."""
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
    cdef Span span
    while c.pos < c.end:
        at = c.pos
        if read_tag(p, c, &field, &wire) < 0:
            return -1
        if field != 1:
            if skip_field(p, c, field, wire, 0) < 0:
                return -1
            continue
        if kind == BYTES and wire == LEN:
            if read_len(p, c, &sub) < 0:
                return -1
            if col != NULL:
                span.ptr = sub.pos
                span.len = sub.end - sub.pos
                if not buf_reserve(&col.spans, sizeof(Span)):
                    return fail(p, E_MEMORY, at)
                memcpy(col.spans.data + col.spans.len, &span, sizeof(Span))
                col.spans.len += sizeof(Span)
            count[0] += 1
        elif kind == FLOAT and wire == LEN:
            if read_len(p, c, &sub) < 0:
                return -1
            n = sub.end - sub.pos
            if n % 4:
                return fail(p, E_PACKED, at)
            if col != NULL:
                if not buf_reserve(&col.floats, n):
                    return fail(p, E_MEMORY, at)
                copy_floats(col.floats.data + col.floats.len, sub.pos, n)
                col.floats.len += n
            count[0] += n // 4
        elif kind == FLOAT and wire == I32:
            if not cursor_take(c, 4, &data):
                return fail(p, E_TRUNCATED, at)
            if col != NULL:
                if not buf_reserve(&col.floats, 4):
                    return fail(p, E_MEMORY, at)
                copy_floats(col.floats.data + col.floats.len, data, 4)
                col.floats.len += 4
            count[0] += 1
        elif kind == INT64 and wire == LEN:
            if read_len(p, c, &sub) < 0:
                return -1
            # At most one value per byte, so reserving the byte count is enough.
            if col != NULL and not buf_reserve(&col.ints, 8 * (sub.end - sub.pos)):
                return fail(p, E_MEMORY, at)
            while sub.pos < sub.end:
                at = sub.pos
                if not cursor_varint(&sub, &v):
                    return fail(p, E_VARINT, at)
                if col != NULL:
                    (<int64_t *>(col.ints.data + col.ints.len))[0] = <int64_t>v
                    col.ints.len += 8
                count[0] += 1
        elif kind == INT64 and wire == VARINT:
            if not cursor_varint(c, &v):
                return fail(p, E_VARINT, at)
            if col != NULL:
                if not buf_push64(&col.ints, <int64_t>v):
                    return fail(p, E_MEMORY, at)
            count[0] += 1
        elif skip_field(p, c, field, wire, 0) < 0:
            return -1
    return 0


cdef inline void copy_floats(char *dst, const unsigned char *src, Py_ssize_t n) noexcept nogil:
    """Wire floats are little-endian IEEE 754 binary32."""
    cdef Py_ssize_t i
    cdef uint32_t u
    if n == 0:
        return   # an empty packed run: dst may be a column not yet allocated (NULL)
    if LITTLE_ENDIAN:
        if n == 4:
            memcpy(dst, src, 4)   # a scalar: inlined, no call
        else:
            memcpy(dst, src, n)
    else:
        for i in range(0, n, 4):
            u = tfl_load_le32(src + i)
            memcpy(dst + i, &u, 4)


cdef inline int parse_feature_common(Parser *p, Cursor *c, Column *col) noexcept nogil:
    """The Feature shapes every writer produces, into a fresh row of col: one *_list field
    (tag 0x0A bytes, 0x12 float, 0x1A int64) that holds one packed run of floats or int64s
    (tag 0x0A) or only bytes values (tag 0x0A each). Returns 1 when done, 0 when the Feature
    is anything else; then nothing was consumed or kept and the general parser takes over,
    so it also reports every error. -1 on allocation failure."""
    cdef Cursor f = c[0]
    cdef Cursor lst, sub
    cdef int kind
    cdef int64_t count = 0
    cdef uint64_t v
    cdef Py_ssize_t n, i
    cdef int64_t *ints
    cdef Span *span
    cdef unsigned char tag
    if f.pos >= f.end:
        return 0
    tag = f.pos[0]
    if tag == 0x12:
        kind = FLOAT
    elif tag == 0x1A:
        kind = INT64
    elif tag == 0x0A:
        kind = BYTES
    else:
        return 0
    f.pos += 1
    if not cursor_len(&f, &lst) or f.pos != f.end or lst.pos == lst.end:
        return 0
    if kind == BYTES:
        i = col.spans.len
        while lst.pos < lst.end:
            if lst.pos[0] != TAG_KEY:
                col.spans.len = i
                return 0
            lst.pos += 1
            if not cursor_len(&lst, &sub):
                col.spans.len = i
                return 0
            if not buf_reserve(&col.spans, sizeof(Span)):
                return fail(p, E_MEMORY, sub.pos)
            span = <Span *>(col.spans.data + col.spans.len)
            span.ptr = sub.pos
            span.len = sub.end - sub.pos
            col.spans.len += sizeof(Span)
            count += 1
    else:
        if lst.pos[0] != TAG_KEY:
            return 0
        lst.pos += 1
        if not cursor_len(&lst, &sub) or lst.pos != lst.end:
            return 0
        n = sub.end - sub.pos
        if kind == FLOAT:
            if n % 4:
                return 0
            if not buf_reserve(&col.floats, n):
                return fail(p, E_MEMORY, sub.pos)
            copy_floats(col.floats.data + col.floats.len, sub.pos, n)
            col.floats.len += n
            count = n // 4
        else:
            # At most one value per byte, so reserving the byte count is enough.
            if not buf_reserve(&col.ints, 8 * n):
                return fail(p, E_MEMORY, sub.pos)
            ints = <int64_t *>(col.ints.data + col.ints.len)
            while sub.pos < sub.end:
                if not cursor_varint(&sub, &v):
                    return 0   # nothing kept: col.ints.len has not moved
                ints[count] = <int64_t>v
                count += 1
            col.ints.len += 8 * count
    col.kinds.data[col.kinds.len - 1] = <char>kind
    (<int64_t *>(col.counts.data + col.counts.len - 8))[0] = count
    c.pos = f.pos
    return 1


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
            done = parse_feature_common(p, c, col)
            if done != 0:
                return done if done < 0 else 0
        row_count = <int64_t *>(col.counts.data + col.counts.len - 8)
        kind = row_kind[0]
        count = row_count[0]
    while c.pos < c.end:
        if read_tag(p, c, &field, &wire) < 0:
            return -1
        if 1 <= field <= 3 and wire == LEN:
            if read_len(p, c, &sub) < 0:
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
        elif skip_field(p, c, field, wire, 0) < 0:
            return -1
    if col != NULL:
        row_kind[0] = <char>kind
        row_count[0] = count
    return 0


cdef int parse_feature_list(Parser *p, Cursor *c, Column *col) noexcept nogil:
    """A FeatureList body: each field-1 Feature is one more row (step)."""
    cdef uint32_t field, wire
    cdef Cursor sub
    while c.pos < c.end:
        if read_tag(p, c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            if read_len(p, c, &sub) < 0:
                return -1
            if col != NULL and not column_new_row(col):
                return fail(p, E_MEMORY, sub.pos)
            if parse_feature(p, &sub, col) < 0:
                return -1
        elif skip_field(p, c, field, wire, 0) < 0:
            return -1
    return 0


cdef inline int entry_column(Parser *p, Table *t, const unsigned char *key, Py_ssize_t key_len,
                             const unsigned char *key_at, Column **out) noexcept nogil:
    """The column for a map entry's key, opened for this record; NULL when the key is not
    wanted. Only a key that matches no column is checked for UTF-8: a column's name is
    valid already (the caller's names are encoded str, found names were checked)."""
    cdef Column *col = table_lookup(t, key, key_len)
    if col == NULL:
        return entry_new_key(p, t, key, key_len, key_at, out)
    if not column_enter(col, p.record):
        return fail(p, E_MEMORY, key_at)
    out[0] = col
    return 0


cdef int entry_new_key(Parser *p, Table *t, const unsigned char *key, Py_ssize_t key_len,
                       const unsigned char *key_at, Column **out) noexcept nogil:
    """entry_column for a key no column has (yet): check it, then add a column when every
    key is wanted."""
    cdef Column *col
    out[0] = NULL
    if not utf8_valid(key, key_len):
        return fail(p, E_UTF8, key_at)
    if not t.discover:
        return 0
    col = table_add(t, key, key_len)
    if col == NULL:
        return fail(p, E_MEMORY, key_at)
    if not column_enter(col, p.record):
        return fail(p, E_MEMORY, key_at)
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
    if c.end - c.pos >= 4 and c.pos[0] == TAG_KEY:
        start.pos += 1
        if cursor_len(&start, &sub) and start.pos < start.end and start.pos[0] == TAG_VALUE:
            start.pos += 1
            if cursor_len(&start, &value) and start.pos == start.end:
                c.pos = c.end
                if entry_column(p, t, sub.pos, sub.end - sub.pos, key_at + 1, &col) < 0:
                    return -1
                if t.sequence:
                    return parse_feature_list(p, &value, col)
                if col != NULL:   # its row is fresh: try the common shapes without a call
                    done = parse_feature_common(p, &value, col)
                    if done != 0:
                        return done if done < 0 else 0
                return parse_feature(p, &value, col)
        start = c[0]   # any surprise: start over on the general path, which reports it
    while c.pos < c.end:
        if read_tag(p, c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            key_at = c.pos
            if read_len(p, c, &sub) < 0:
                return -1
            key = sub.pos
            key_len = sub.end - sub.pos
            # Every occurrence must be UTF-8 (protobuf checks each), not only the last.
            if not utf8_valid(key, key_len):
                return fail(p, E_UTF8, key_at)
        else:
            unknown = unknown or not (field == 2 and wire == LEN)
            if skip_field(p, c, field, wire, 0) < 0:
                return -1
    if unknown:
        col = NULL   # dropped, but its values must still parse, as in protobuf
    elif entry_column(p, t, key if key != NULL else <const unsigned char *>"", key_len, key_at, &col) < 0:
        return -1
    c[0] = start
    while c.pos < c.end:
        read_tag(p, c, &field, &wire)
        if field == 2 and wire == LEN:
            read_len(p, c, &sub)
            if (parse_feature_list(p, &sub, col) if t.sequence else parse_feature(p, &sub, col)) < 0:
                return -1
        else:
            skip_field(p, c, field, wire, 0)   # validated by the first pass
    return 0


cdef int parse_map(Parser *p, Cursor *c, Table *t) noexcept nogil:
    """Features / FeatureLists: field 1 repeated map entries."""
    cdef uint32_t field, wire
    cdef Cursor sub
    while c.pos < c.end:
        if read_tag(p, c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            if read_len(p, c, &sub) < 0 or parse_entry(p, &sub, t) < 0:
                return -1
        elif skip_field(p, c, field, wire, 0) < 0:
            return -1
    return 0


cdef int parse_record(Parser *p, const unsigned char *data, Py_ssize_t n, bint sequence) noexcept nogil:
    """An Example (features = 1) or SequenceExample (context = 1, feature_lists = 2)."""
    cdef Cursor c, sub
    cdef uint32_t field, wire
    cursor_init(&c, data, n)
    while c.pos < c.end:
        if read_tag(p, &c, &field, &wire) < 0:
            return -1
        if field == 1 and wire == LEN:
            if read_len(p, &c, &sub) < 0 or parse_map(p, &sub, &p.ctx) < 0:
                return -1
        elif sequence and field == 2 and wire == LEN:
            if read_len(p, &c, &sub) < 0 or parse_map(p, &sub, &p.seq) < 0:
                return -1
        elif skip_field(p, &c, field, wire, 0) < 0:
            return -1
    return 0


# -- Python entry points -------------------------------------------------------------------

cdef void _free_capsule(object capsule) noexcept:
    free(PyCapsule_GetPointer(capsule, NULL))


cdef object _array(Buf *b, int typenum, Py_ssize_t itemsize):
    """The buffer as a 1-D array. The array takes over the storage (freed with it) rather
    than copying it; b is left empty."""
    cdef cnp.npy_intp n = b.len // itemsize
    cdef cnp.ndarray out
    cdef char *data
    if b.len == 0:
        return cnp.PyArray_SimpleNew(1, &n, typenum)
    data = <char *>realloc(b.data, b.len)   # give back the unused tail
    if data == NULL:
        data = b.data
    b.data = NULL
    b.len = b.cap = 0
    try:
        capsule = PyCapsule_New(data, NULL, _free_capsule)
    except BaseException:
        free(data)
        raise
    out = cnp.PyArray_SimpleNewFromData(1, &n, typenum, data)
    cnp.set_array_base(out, capsule)
    return out


cdef object _uniform(Column *c):
    """(kind, count) when every row has the same kind and value count, else None: lets the
    spec layer skip its per-row checks for the common all-present column."""
    if not c.uniform:
        return None
    return ((<const uint8_t *>c.kinds.data)[0], (<const int64_t *>c.counts.data)[0])


cdef enum:
    NOGIL_MIN_BYTES = 65536  # below this, releasing the GIL costs more than it saves
    SHARE_SLOTS = 64     # recent short values remembered per column
    SHARE_MAX = 16       # longest value shared


cdef inline Py_ssize_t share_slot(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """A hash of a short value (n <= SHARE_MAX) from two overlapping words."""
    cdef uint64_t x = 0, y = 0
    if n >= 8:
        memcpy(&x, p, 8)
        memcpy(&y, p + n - 8, 8)
    else:
        memcpy(&x, p, n)
    x = x * <uint64_t>0x9E3779B97F4A7C15 ^ y * <uint64_t>0xC2B2AE3D27D4EB4F ^ <uint64_t>n
    return <Py_ssize_t>(x >> 58)


cdef void fill_values(char **fill, const Span *spans, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if fill[i] != NULL:
            memcpy(fill[i], spans[i].ptr, spans[i].len)


cdef object _bytes_array(Column *c):
    """The bytes values as a 1-D object array of bytes. Making the objects is the part of
    decoding that needs the GIL, so it does as little as it can: repeated short values
    (categories, labels) share one bytes object (bytes are immutable), and long values are
    allocated first and filled afterwards without the GIL (an image is mostly memcpy)."""
    cdef cnp.npy_intp i, n = c.spans.len // sizeof(Span), pending = 0
    cdef Span *spans = <Span *>c.spans.data
    cdef cnp.ndarray out = np.empty(n, dtype=object)
    cdef PyObject **slots = <PyObject **>cnp.PyArray_DATA(out)
    cdef PyObject *recent[SHARE_SLOTS]   # borrowed: out holds a reference to each
    cdef PyObject *hit
    cdef char **fill = NULL              # where each long value goes, filled without the GIL
    cdef Py_ssize_t h, length
    cdef object value
    memset(recent, 0, sizeof(recent))
    try:
        for i in range(n):
            length = spans[i].len
            hit = NULL
            if length <= SHARE_MAX:
                h = share_slot(spans[i].ptr, length)
                hit = recent[h]
                if hit != NULL and not (PyBytes_GET_SIZE(<object>hit) == length and
                                        memcmp(PyBytes_AS_STRING(<object>hit), spans[i].ptr, length) == 0):
                    hit = NULL
            if hit != NULL:
                value = <object>hit
            elif length <= SHARE_MAX:
                value = PyBytes_FromStringAndSize(<const char *>spans[i].ptr, length)
                recent[h] = <PyObject *>value
            else:
                value = PyBytes_FromStringAndSize(NULL, length)
                if fill == NULL:
                    fill = <char **>calloc(n, sizeof(char *))
                    if fill == NULL:
                        raise MemoryError()
                fill[i] = PyBytes_AS_STRING(value)
                pending += length
            Py_INCREF(value)        # the slot's reference; the None it held loses one
            Py_XDECREF(slots[i])
            slots[i] = <PyObject *>value
        if pending >= NOGIL_MIN_BYTES:
            with nogil:
                fill_values(fill, spans, n)
        elif fill != NULL:
            fill_values(fill, spans, n)
        return out
    finally:
        free(fill)


# -- bytes values as one buffer plus offsets -----------------------------------------------
#
# The opt-in bytes output (``bytes_column=True``): every bytes value of a column copied back
# to back into one uint8 array, with int64 offsets (n + 1, starting at 0) marking where each
# begins and ends. No Python object is made per value, and the buffers can be handed to Arrow
# (large_binary) as they are.

cdef Py_ssize_t fill_column(unsigned char *dst, int64_t *offsets, const Span *spans,
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
    """The bytes values as (values, offsets): one uint8 array and int64 offsets."""
    cdef Py_ssize_t n = c.spans.len // sizeof(Span), total
    cdef const Span *spans = <const Span *>c.spans.data
    cdef cnp.ndarray values, offsets
    cdef unsigned char *dst
    cdef int64_t *op
    total = fill_column(NULL, NULL, spans, n)
    values = np.empty(total, dtype=np.uint8)
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

cdef object _column_output(Column *c, Py_ssize_t raw, bint bytes_column):
    """(steps or None, kinds, counts, floats, ints, bytes values, uniform) for one column:
    bytes values as an object array, as (values, offsets) when bytes_column, or for a raw
    column (uint8 array (records, raw), byte length per row or -1); uniform as _uniform
    gives it."""
    cdef Py_ssize_t i, nrows = c.kinds.len, s = 0
    cdef Span *spans = <Span *>c.spans.data
    cdef const uint8_t *kinds = <const uint8_t *>c.kinds.data
    cdef const int64_t *counts = <const int64_t *>c.counts.data
    cdef cnp.ndarray raw_out, lengths
    cdef int64_t *lp
    cdef unsigned char *dst
    if raw >= 0:
        raw_out = np.zeros((nrows, raw), dtype=np.uint8)
        lengths = np.full(nrows, -1, dtype=np.int64)
        dst = <unsigned char *>cnp.PyArray_DATA(raw_out)
        lp = <int64_t *>cnp.PyArray_DATA(lengths)
        with nogil:
            for i in range(nrows):
                if kinds[i] == BYTES:
                    if counts[i] == 1:
                        lp[i] = spans[s].len
                        if spans[s].len == raw:
                            memcpy(dst + i * raw, spans[s].ptr, raw)
                    s += counts[i]
        byte_values = (raw_out, lengths)
    elif bytes_column:
        byte_values = _bytes_column(c)
    else:
        byte_values = _bytes_array(c)
    uniform = _uniform(c)
    return (
        _array(&c.steps, cnp.NPY_INT64, 8) if c.sequence else None,
        _array(&c.kinds, cnp.NPY_UINT8, 1),
        _array(&c.counts, cnp.NPY_INT64, 8),
        _array(&c.floats, cnp.NPY_FLOAT32, 4),
        _array(&c.ints, cnp.NPY_INT64, 8),
        byte_values,
        uniform,
    )


cdef int _set_keys(Table *t, list encoded) except -1:
    for key in encoded:
        if table_add(t, <const unsigned char *>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) == NULL:
            raise MemoryError()
    return 0


cdef list _table_keys(Table *t):
    return [PyUnicode_DecodeUTF8(<const char *>t.cols[i].key, t.cols[i].key_len, NULL) for i in range(t.n)]


cdef class _Records:
    """Pointers to a batch's records, with the buffers behind them held until release:
    either one buffer per record (a list of bytes-likes) or one per block (a RecordBatch's
    segments of (frames, starts, lengths))."""
    cdef const unsigned char **ptrs
    cdef Py_ssize_t *lens
    cdef Py_buffer *views     # views[:got] are live
    cdef Py_ssize_t n, got, total_bytes

    def __cinit__(self, records):
        cdef Py_ssize_t j, k = 0, m
        cdef Py_buffer *v
        cdef const int64_t[:] starts, lengths   # strided: slices with a step
        segments = None if type(records) is list else getattr(records, "segments", None)
        if segments is None and type(records) is not list:
            records = list(records)
        items = records if segments is None else segments
        self.n = len(records) if segments is None else sum(len(seg[1]) for seg in segments)
        self.ptrs = <const unsigned char **>malloc((self.n if self.n else 1) * sizeof(char *))
        self.lens = <Py_ssize_t *>malloc((self.n if self.n else 1) * sizeof(Py_ssize_t))
        self.views = <Py_buffer *>malloc((len(items) if len(items) else 1) * sizeof(Py_buffer))
        if self.ptrs == NULL or self.lens == NULL or self.views == NULL:
            raise MemoryError()
        for item in items:
            v = &self.views[self.got]
            acquire(item if segments is None else item[0], v)
            self.got += 1
            if segments is None:
                self.ptrs[k] = <const unsigned char *>v.buf
                self.lens[k] = v.len
                self.total_bytes += v.len
                k += 1
                continue
            starts, lengths = item[1], item[2]
            m = starts.shape[0]
            if lengths.shape[0] != m or k + m > self.n:
                raise InvalidArgumentError("a RecordBatch segment has mismatched starts and lengths")
            for j in range(m):   # a few us: not worth a GIL handoff
                if starts[j] < 0 or lengths[j] < 0 or starts[j] > v.len - lengths[j]:
                    raise InvalidArgumentError(f"a RecordBatch record ({starts[j]}, {lengths[j]}) lies outside "
                                     f"its {v.len}-byte block")
                self.ptrs[k + j] = <const unsigned char *>v.buf + starts[j]
                self.lens[k + j] = lengths[j]
                self.total_bytes += lengths[j]
            k += m

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.got):
            PyBuffer_Release(&self.views[i])
        free(self.views)
        free(self.ptrs)
        free(self.lens)


def _decode(records, keys, raw_sizes, sequence_keys, bint sequence, bint bytes_column):
    cdef Parser p
    cdef Py_ssize_t n, i
    cdef _Records recs = _Records(records)
    cdef list key_bytes = [k.encode() for k in keys] if keys is not None else None
    cdef list seq_bytes = [k.encode() for k in sequence_keys] if sequence_keys is not None else None
    cdef int status = 0
    memset(&p, 0, sizeof(Parser))
    p.ctx.discover = keys is None
    p.seq.discover = sequence and sequence_keys is None
    p.seq.sequence = True
    n = recs.n
    try:
        if key_bytes is not None:
            _set_keys(&p.ctx, key_bytes)
        if seq_bytes is not None:
            _set_keys(&p.seq, seq_bytes)
        for i in range(p.ctx.n):   # one row per record: size the row arrays once
            if not (buf_reserve(&p.ctx.cols[i].kinds, n) and buf_reserve(&p.ctx.cols[i].counts, 8 * n)):
                raise MemoryError()
        with nogil:
            for i in range(n):
                p.record = i
                status = parse_record(&p, recs.ptrs[i], recs.lens[i], sequence)
                if status < 0:
                    break
                if i == 0 and n > 1 and not (table_expect(&p.ctx, n, recs.total_bytes)
                                             and table_expect(&p.seq, n, recs.total_bytes)):
                    status = fail(&p, E_MEMORY, NULL)
                    break
            if status == 0 and not (table_finish(&p.ctx, n) and table_finish(&p.seq, n)):
                status = fail(&p, E_MEMORY, NULL)
        if status < 0:
            if p.err == E_MEMORY:
                raise MemoryError()
            raise ExampleDecodeError(
                f"malformed {'SequenceExample' if sequence else 'Example'}: {_ERRORS[p.err]} "
                f"(at byte {p.err_at - recs.ptrs[p.record]} of the record)",
                index=p.record,
            )
        raw = raw_sizes or {}
        ctx_keys = _table_keys(&p.ctx)
        ctx = [_column_output(&p.ctx.cols[i], raw.get(ctx_keys[i], -1), bytes_column) for i in range(p.ctx.n)]
        if not sequence:
            return ctx_keys, ctx
        seq_keys = _table_keys(&p.seq)
        return ctx_keys, ctx, seq_keys, [_column_output(&p.seq.cols[i], -1, bytes_column)
                                             for i in range(p.seq.n)]
    finally:
        table_free(&p.ctx)
        table_free(&p.seq)


def decode_examples(records, keys=None, raw_sizes=None, bytes_column=False):
    """Columns of a batch of serialized Examples: a list of bytes-likes, or a RecordBatch
    (anything with ``segments``), read in place.

    keys: names to extract (None: every name found, in order of first appearance).
    raw_sizes: {name: nbytes} for names whose single bytes value is copied straight into a
    (records, nbytes) uint8 array. Returns (keys, columns); each column is
    (None, kinds, counts, floats, ints, bytes_values, uniform) with one row per record:
    bytes_values an object array of bytes, or with bytes_column (values, offsets): a uint8
    array of all values back to back and n + 1 int64 offsets; uniform (kind, count) when
    every row agrees."""
    return _decode(records, keys, raw_sizes, None, False, bytes_column)


def decode_sequence_examples(records, context_keys=None, sequence_keys=None, raw_sizes=None,
                             bytes_column=False):
    """Columns of a batch of serialized SequenceExamples: (context_keys, context_columns,
    sequence_keys, sequence_columns). A sequence column's rows are FeatureList steps and its
    first item gives the steps per record (-1 where the key is absent)."""
    return _decode(records, context_keys, raw_sizes, sequence_keys, True, bytes_column)


# -- encoding ------------------------------------------------------------------------------

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


cdef struct Col:
    const char *base           # FLOAT / INT64 / RAW: row i's data at base + i * width
    Py_ssize_t width
    const char **bytes_at      # BYTES: every value of the column, row after row
    Py_ssize_t *bytes_len
    Py_ssize_t *rows           # BYTES: row i holds values rows[i]:rows[i + 1]


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
        p = put_varint(p + 1, f.n)
        if f.n:
            memcpy(p, f.data, f.n)
        return p + f.n
    if f.kind == BYTES:
        for i in range(f.n):
            p[0] = TAG_KEY
            p = put_varint(p + 1, f.bytes_len[i])
            if f.bytes_len[i]:
                memcpy(p, f.bytes_at[i], f.bytes_len[i])
            p += f.bytes_len[i]
        return p
    if f.n == 0:
        return p
    p[0] = TAG_KEY
    if f.kind == FLOAT:
        p = put_varint(p + 1, 4 * f.n)
        if LITTLE_ENDIAN:
            memcpy(p, f.data, 4 * f.n)
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
    p = put_varint(p + 1, f.key_len)
    memcpy(p, f.key, f.key_len)
    p += f.key_len
    p[0] = TAG_VALUE
    p = put_varint(p + 1, f.feat_size)
    return put_feature(p, f)


cdef Py_ssize_t features_body(Feat *feats, Py_ssize_t nf, Py_ssize_t *entry) noexcept nogil:
    """Size of the map entries of a Features message (an Example's field 1, a
    SequenceExample's context); entry receives each entry's size. The field is framed(body)
    bytes."""
    cdef Py_ssize_t i, body = 0
    for i in range(nf):
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
            raise ValueError("too many buffers")
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
    put_features(<unsigned char *>PyBytes_AS_STRING(out), feats, nf, entry, body)
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
                  _Views views) except -1:
    """Column sources for encode_examples: keys and kinds into feats, each column's data
    into cols. BYTES columns are gathered into value arrays once, with the GIL, so that
    rows can then be encoded without it."""
    cdef Py_ssize_t i, j, v, nf = len(keys), nbytes, total
    cdef list column
    cdef object value
    cdef int kind
    for j in range(nf):
        kind = kinds[j]
        feats[j].key = <const unsigned char *>PyBytes_AS_STRING(keys[j])
        feats[j].key_len = PyBytes_GET_SIZE(keys[j])
        feats[j].kind = kind
        if kind in (FLOAT, INT64, RAW):
            cols[j].base = views.get(columns[j], &nbytes)
            cols[j].width = nbytes // n if n else 0
            feats[j].n = cols[j].width // (4 if kind == FLOAT else 8 if kind == INT64 else 1)
            continue
        if len(columns[j]) != n:
            raise FeatureSpecError(f"feature {keys[j].decode()!r}: {len(columns[j])} rows, expected {n}")
        if kind != BYTES:
            continue
        column = <list?>columns[j]
        total = 0
        for i in range(n):  # a row is one bytes value, or a list of them
            total += 1 if PyBytes_Check(column[i]) else len(<list?>column[i])
        cols[j].rows = <Py_ssize_t *>views.alloc((n + 1) * sizeof(Py_ssize_t))
        cols[j].bytes_at = <const char **>views.alloc(total * sizeof(char *))
        cols[j].bytes_len = <Py_ssize_t *>views.alloc(total * sizeof(Py_ssize_t))
        v = 0
        for i in range(n):
            cols[j].rows[i] = v
            value = column[i]
            if PyBytes_Check(value):
                cols[j].bytes_at[v] = PyBytes_AS_STRING(value)
                cols[j].bytes_len[v] = PyBytes_GET_SIZE(value)
                v += 1
            else:
                _gather(&feats[j], <list>value, cols[j].bytes_at + v, cols[j].bytes_len + v)
                v += len(<list>value)
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
    KIND_ROWS (list of n
    (kind, values) pairs as encode_example takes)."""
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
    _columns(keys, kinds, columns, n, feats, cols, views)
    for i in range(n):
        _row(feats, cols, kind, nf, i)
        row_views = None
        for j in range(nf):
            if kind[j] == ROWS:
                if row_views is None:
                    row_views = _Views(nf)
                pair = (<list>columns[j])[i]
                _fill(&feats[j], keys[j], pair[0], pair[1], row_views)
        out[i] = _write_features(feats, nf, entry)
    return out


def encode_examples_framed(list keys, list kinds, list columns, Py_ssize_t n):
    """encode_examples' n Examples as TFRecord frames in one buffer: returns (frames
    bytearray, starts, lengths), the int64 arrays locating each record's data. Made without
    the GIL, unless a KIND_ROWS column needs Python objects per row: then the records are
    encoded one by one and framed."""
    cdef Py_ssize_t i, j, nf = len(keys), total = 0, at
    cdef _Views views = _Views(nf)
    cdef Feat *feats = <Feat *>views.alloc(nf * sizeof(Feat))
    cdef Col *cols = <Col *>views.alloc(nf * sizeof(Col))
    cdef int *kind = <int *>views.alloc(nf * sizeof(int))
    cdef Py_ssize_t *entry = <Py_ssize_t *>views.alloc(nf * sizeof(Py_ssize_t))
    cdef cnp.ndarray starts = np.empty(n, np.int64)
    cdef cnp.ndarray lengths = np.empty(n, np.int64)
    cdef int64_t *start = <int64_t *>cnp.PyArray_DATA(starts)
    cdef int64_t *length = <int64_t *>cnp.PyArray_DATA(lengths)
    cdef bytearray frames
    cdef unsigned char *base
    cdef unsigned char *p
    memset(feats, 0, nf * sizeof(Feat))
    memset(cols, 0, nf * sizeof(Col))
    if ROWS in kinds:
        return _frame_records(encode_examples(keys, kinds, columns, n), starts, lengths)
    for j in range(nf):
        kind[j] = kinds[j]
    _columns(keys, kinds, columns, n, feats, cols, views)
    with nogil:
        for i in range(n):
            _row(feats, cols, kind, nf, i)
            length[i] = framed(features_body(feats, nf, entry))
            start[i] = total + 12
            total += length[i] + 16
    frames = PyByteArray_FromStringAndSize(NULL, total)
    base = <unsigned char *>PyByteArray_AS_STRING(frames)
    with nogil:
        for i in range(n):
            _row(feats, cols, kind, nf, i)
            p = base + start[i]
            put_features(p, feats, nf, entry, features_body(feats, nf, entry))
            _frame_around(p, length[i])
    return frames, starts, lengths


cdef inline void _frame_around(unsigned char *data, int64_t n) noexcept nogil:
    """The TFRecord header (length, its masked CRC) before n bytes of data, the data's
    masked CRC after them."""
    tfl_store_le64(data - 12, <uint64_t>n)
    tfl_store_le32(data - 4, tfl_mask_crc(tfl_crc32c(0, data - 12, 8)))
    tfl_store_le32(data + n, tfl_mask_crc(tfl_crc32c(0, data, n)))


cdef tuple _frame_records(list records, cnp.ndarray starts, cnp.ndarray lengths):
    """Frame bytes records into one buffer, filling starts and lengths."""
    cdef Py_ssize_t i, total = 0
    cdef int64_t *start = <int64_t *>cnp.PyArray_DATA(starts)
    cdef int64_t *length = <int64_t *>cnp.PyArray_DATA(lengths)
    for i in range(len(records)):
        length[i] = PyBytes_GET_SIZE(records[i])
        start[i] = total + 12
        total += length[i] + 16
    cdef bytearray frames = PyByteArray_FromStringAndSize(NULL, total)
    cdef unsigned char *base = <unsigned char *>PyByteArray_AS_STRING(frames)
    for i in range(len(records)):
        memcpy(base + start[i], PyBytes_AS_STRING(records[i]), length[i])
        _frame_around(base + start[i], length[i])
    return frames, starts, lengths


def encode_sequence_example(list context_keys, list context_kinds, list context_values,
                            list list_keys, list list_steps):
    """One serialized SequenceExample {context = 1; feature_lists = 2}: context as
    encode_example takes it; list_steps holds, per FeatureList key, a list of (kind, values)
    pairs, one Feature per step. FeatureLists entries are {key = 1; value = 2 FeatureList}
    and a FeatureList is {repeated Feature feature = 1}."""
    cdef Py_ssize_t i, j, s, nc = len(context_keys), nl = len(list_keys)
    cdef Py_ssize_t nsteps = sum(len(steps) for steps in list_steps)
    cdef Py_ssize_t ctx_body = 0, lists_body = 0
    cdef _Views views = _Views(nc + nsteps)
    cdef Feat *ctx = <Feat *>calloc(nc if nc else 1, sizeof(Feat))
    cdef Feat *steps = <Feat *>calloc(nsteps if nsteps else 1, sizeof(Feat))
    cdef Py_ssize_t *sizes = <Py_ssize_t *>calloc(nc + 2 * nl + 1, sizeof(Py_ssize_t))
    cdef Py_ssize_t *ctx_entry
    cdef Py_ssize_t *list_body
    cdef Py_ssize_t *list_entry
    cdef unsigned char *p
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
            for kind, values in list_steps[i]:
                _fill(&steps[s], key, kind, values, views)
                feat_sizes(&steps[s])
                list_body[i] += framed(steps[s].feat_size)
                s += 1
            list_entry[i] = framed(PyBytes_GET_SIZE(key)) + framed(list_body[i])
            lists_body += framed(list_entry[i])
        out = PyBytes_FromStringAndSize(NULL, framed(ctx_body) + framed(lists_body))
        p = put_features(<unsigned char *>PyBytes_AS_STRING(out), ctx, nc, ctx_entry, ctx_body)
        p[0] = TAG_VALUE
        p = put_varint(p + 1, lists_body)
        s = 0
        for i in range(nl):
            key = list_keys[i]
            p[0] = TAG_KEY
            p = put_varint(p + 1, list_entry[i])
            p[0] = TAG_KEY
            p = put_varint(p + 1, PyBytes_GET_SIZE(key))
            memcpy(p, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
            p += PyBytes_GET_SIZE(key)
            p[0] = TAG_VALUE
            p = put_varint(p + 1, list_body[i])
            for j in range(len(list_steps[i])):
                p[0] = TAG_KEY
                p = put_varint(p + 1, steps[s].feat_size)
                p = put_feature(p, &steps[s])
                s += 1
        return out
    finally:
        free(ctx)
        free(steps)
        free(sizes)
