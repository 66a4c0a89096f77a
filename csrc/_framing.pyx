# cython: freethreading_compatible = False
"""TFRecord frames: CRC32C, scanning a buffer into verified records, writing frames, mapping
files to scan in place.

A frame is::

    uint64 length           little-endian
    uint32 masked_crc32c(length's 8 bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

The pure-Python twin is tfrecord_lite/_framing_py.py; both expose the same names.
_framing_files.pxi, included at the end, holds what reads files: read_spans, read buffers,
file mappings, and the words two processes share.
"""
import os

cimport numpy as cnp
import numpy as np

from tfrecord_lite.errors import InvalidArgumentError, not_a_record, writer_closed, writer_in_use

from cpython.buffer cimport PyBuffer_FillInfo, PyBuffer_Release
from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE, PyByteArray_Resize,
)
from cpython.buffer cimport PyBUF_WRITABLE, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.pythread cimport (
    NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock, PyThread_free_lock,
    PyThread_get_thread_ident, PyThread_release_lock, PyThread_type_lock,
)
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc, realloc
from libc.errno cimport EINTR, errno
from libc.string cimport memcpy

from frame cimport FRAME_FOOTER, FRAME_HEADER, FRAME_OVERHEAD
from guard cimport TFL_GUARD_CAPSULE, tfl_guard_enter, tfl_guard_functions, tfl_guard_install, tfl_guard_leave
from cpython.pycapsule cimport PyCapsule_New
from crc32c cimport (
    TFL_CRC32C_CAPSULE, TFL_CRC_PATH_BEST, TFL_CRC_PATH_NO_CLMUL, TFL_CRC_PATH_NO_FOLD, TFL_CRC_PATH_TABLE,
    tfl_crc32c, tfl_crc32c_backend, tfl_crc32c_clmul, tfl_crc32c_hw_available, tfl_crc32c_init, tfl_mask_crc,
)
from cursor cimport Cursor, acquire, cursor_init, cursor_take
from objects cimport NOGIL_MIN_BYTES, ByteSpan
from le cimport tfl_load_le32, tfl_load_le64, tfl_store_le32, tfl_store_le64

# This module is the only one that links crc32c.c, so the CRC backend state lives here once;
# tfrecord_lite._example reaches tfl_crc32c through this capsule.
_crc32c_capsule = PyCapsule_New(<void *>tfl_crc32c, TFL_CRC32C_CAPSULE, NULL)
# Likewise the guard of mapped reads (csrc/guard.h): one SIGBUS handler, installed from here.
_guard_capsule = PyCapsule_New(<void *>&tfl_guard_functions, TFL_GUARD_CAPSULE, NULL)

cdef enum:
    SPAN_BATCH = 1024     # records verified per GIL release before bytes objects are made

cdef enum Outcome:       # scan outcomes, exported below with the same values as the twin
    OK = 0               # stopped at the end of the buffer or after max_records
    BAD_LENGTH_CRC = 1
    BAD_DATA_CRC = 2
    TOO_LARGE = 3
    SHRUNK = 4           # a mapped buffer's pages faulted: its file was truncated while mapped

HEADER_BYTES = FRAME_HEADER      # frame sizes (csrc/frame.pxd), the same values as the twin's
FOOTER_BYTES = FRAME_FOOTER
OVERHEAD_BYTES = FRAME_OVERHEAD

FRAME_OK = OK
FRAME_BAD_LENGTH_CRC = BAD_LENGTH_CRC
FRAME_BAD_DATA_CRC = BAD_DATA_CRC
FRAME_TOO_LARGE = TOO_LARGE
FRAME_SHRUNK = SHRUNK

cnp.import_array()

_BACKEND_NAMES = {0: "table", 1: "sse4.2", 2: "armv8"}
_CLMUL_SUFFIXES = ("", "+pclmul", "+vpclmulqdq")  # by tfl_crc32c_clmul()
_NARROWER_PATHS = {"sse4.2": TFL_CRC_PATH_NO_CLMUL, "sse4.2+pclmul": TFL_CRC_PATH_NO_FOLD}
tfl_crc32c_init(TFL_CRC_PATH_TABLE if os.environ.get("TFRECORD_LITE_CRC32C_TABLE") == "1" else TFL_CRC_PATH_BEST)


def crc32c_backend():
    """Name of the CRC32C path in use: "sse4.2+vpclmulqdq" (SSE4.2 with 512-bit carry-less
    folds, on CPUs with AVX-512), "sse4.2+pclmul" (SSE4.2 with carry-less multiply),
    "sse4.2", "armv8" or "table"."""
    return _BACKEND_NAMES[tfl_crc32c_backend()] + _CLMUL_SUFFIXES[tfl_crc32c_clmul()]


def set_crc32c_backend(str name):
    """Select "hardware" (the CPU's instruction, if any) or "table"; returns the active name."""
    if name not in ("hardware", "table"):
        raise InvalidArgumentError(f"CRC32C backend must be 'hardware' or 'table', not {name!r}")
    if name == "hardware" and not tfl_crc32c_hw_available():
        raise InvalidArgumentError("this CPU has no CRC32C instruction; only the 'table' backend is available")
    tfl_crc32c_init(TFL_CRC_PATH_TABLE if name == "table" else TFL_CRC_PATH_BEST)
    return crc32c_backend()


def _select_crc32c_path(str name):
    """Select one of the x86 paths that CPUs with fewer instructions run, "sse4.2" or
    "sse4.2+pclmul", where this CPU has a faster one (for tests; set_crc32c_backend("hardware")
    selects the best path again). Returns the active name: name, where that path exists here."""
    if tfl_crc32c_hw_available():
        tfl_crc32c_init(_NARROWER_PATHS[name])
    return crc32c_backend()


def crc32c(data, unsigned int value=0):
    """CRC32C (Castagnoli, reflected 0x82F63B78) of data, continuing from value."""
    cdef Py_buffer view
    cdef uint32_t crc = value
    acquire(data, &view)
    try:
        if view.len >= NOGIL_MIN_BYTES:
            with nogil:
                crc = tfl_crc32c(crc, view.buf, view.len)
        else:
            crc = tfl_crc32c(crc, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


def masked_crc32c(data):
    """TFRecord's masked CRC: ((c >> 15) | (c << 17)) + 0xa282ead8, mod 2**32."""
    return tfl_mask_crc(crc32c(data))


def append_frame(bytearray out, record):
    """Append one frame for record (bytes-like) to out; return out's new length."""
    return _append_frame(out, record)


def check_buffer(obj):
    """Raise the error the core raises when it borrows obj's bytes, if any (not bytes-like,
    not contiguous, or a buffer of object pointers), without copying it."""
    cdef Py_buffer view
    acquire(obj, &view)
    PyBuffer_Release(&view)


cdef Py_ssize_t _append_frame(bytearray out, record) except -1:
    """out's new length; a record that is not bytes-like raises with nothing appended."""
    cdef Py_buffer view
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    acquire(record, &view)
    try:
        _reserve(out, at + view.len + FRAME_OVERHEAD)
        _frame_into(<unsigned char *>PyByteArray_AS_STRING(out) + at, &view)
    finally:
        PyBuffer_Release(&view)
    return at + view.len + FRAME_OVERHEAD


cdef class FrameBuffer:
    """A writer's core. Frames records onto ``buf`` under the lock this object is (``with
    fb:``), counts them in ``records`` and, when ``index_sink`` is given, formats each frame's
    sidecar line ``"<frame offset> <frame length>\n"`` as it appends the frame (offsets count
    stream bytes from the first one written). Once ``buf`` holds ``flush_bytes`` it drains:
    ``sink(buf)`` takes the frames, all of them (``drained`` counts the bytes handed over) and
    ``index_sink(lines)`` the pending lines. Ready frames of half ``flush_bytes`` or more go
    to ``sink`` as they are, after the buffer. Errors name ``path`` and the record.

    ``write`` takes the lock itself: the per-record path is this one call. ``write_many``,
    ``write_frames``, ``drain`` and ``check_open`` expect the caller to hold it."""
    cdef PyThread_type_lock _lock
    cdef unsigned long _owner   # the thread holding _lock, 0 when none
    cdef public bytearray buf
    cdef public Py_ssize_t records
    cdef public int64_t drained
    cdef public bint closed
    cdef public object path
    cdef readonly Py_ssize_t flush_bytes
    cdef readonly object sink, index_sink
    cdef bytearray _lines   # index lines not yet drained; None without an index

    def __cinit__(self, sink, Py_ssize_t flush_bytes, path="<stream>", index_sink=None):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        self.buf = bytearray()
        self.sink = sink
        self.flush_bytes = flush_bytes
        self.path = path
        self.index_sink = index_sink
        self._lines = None if index_sink is None else bytearray()

    def __dealloc__(self):
        if self._lock != NULL:
            PyThread_free_lock(self._lock)

    def __enter__(self):
        self._take()
        return True

    def __exit__(self, *exc):
        self._give()

    def write(self, record):
        """Append one record (bytes, bytearray, memoryview or any contiguous buffer)."""
        self._take()
        try:
            self._append(record)
            if PyByteArray_GET_SIZE(self.buf) >= self.flush_bytes:
                self._drain()
        finally:
            self._give()

    cdef int _take(self) except -1:
        """Take the lock; the thread that holds it (a write_many iterable or a signal handler
        calling back) gets an error, not a deadlock."""
        cdef unsigned long me = <unsigned long>PyThread_get_thread_ident()
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            if self._owner == me:
                raise writer_in_use(self.path)
            with nogil:  # the holder may need the GIL to let go
                PyThread_acquire_lock(self._lock, WAIT_LOCK)
        self._owner = me
        return 0

    cdef inline void _give(self):
        self._owner = 0
        PyThread_release_lock(self._lock)

    def write_many(self, records):
        """Append each record of an iterable; one that is not bytes-like raises, naming its
        index, with the records before it appended."""
        self._check_open()
        for record in records:
            self._append(record)
            if PyByteArray_GET_SIZE(self.buf) >= self.flush_bytes:
                self._drain()

    def write_frames(self, frames, lengths=None, Py_ssize_t count=-1):
        """Append whole, verified frames (bytes-like) verbatim. lengths (int64) are their
        records' data lengths, which give the count and the index lines; without them,
        count says how many there are, and the headers are read only where that or the
        index lines are missing."""
        cdef Py_ssize_t at = PyByteArray_GET_SIZE(self.buf)
        self._check_open()
        if lengths is None and (count < 0 or self._lines is not None):
            lengths = scan_spans(frames, 0, -1, False)[1]
        if lengths is not None:
            lengths = np.ascontiguousarray(lengths, dtype=np.int64)
            count = len(lengths)
        nbytes = memoryview(frames).nbytes
        if self._lines is not None:
            _check_tiling(nbytes, lengths)
        # Enough for a write of its own: to the sink as it is, after what the buffer holds, not
        # copied into the buffer first (io's write contract: the sink keeps no reference to
        # what it is given). The copy held the GIL: a 2,048-record W2 block's 965 KB, about
        # 25 µs of the 180 that 16 cores' write_parallel held it a block.
        direct = nbytes >= self.flush_bytes // 2
        if direct and at:
            self._drain()
            at = 0
        if not direct:
            self.buf += frames
        if self._lines is not None:
            _index_lines(self._lines, self.drained + at, lengths)
        self.records += count
        if direct:
            self.sink(frames)
            self.drained += nbytes
            self._drain()  # the index lines
        elif PyByteArray_GET_SIZE(self.buf) >= self.flush_bytes:
            self._drain()

    def drain(self):
        """Hand the buffered frames to sink and the pending index lines to index_sink."""
        self._drain()

    def check_open(self):
        """Raise the error for a write after close when closed."""
        self._check_open()

    cdef int _check_open(self) except -1:
        if self.closed:
            raise writer_closed(self.path)
        return 0

    cdef int _append(self, record) except -1:
        cdef Py_ssize_t at = PyByteArray_GET_SIZE(self.buf), size
        self._check_open()
        try:
            size = _append_frame(self.buf, record)
        except (TypeError, ValueError, BufferError) as exc:
            raise not_a_record(record, exc, self.path, self.records) from None
        if self._lines is not None:
            _put_line(self._lines, self.drained + at, size - at)
        self.records += 1
        return 0

    cdef int _drain(self) except -1:
        cdef bytearray frames = self.buf, lines = self._lines
        if PyByteArray_GET_SIZE(frames):
            try:
                self.sink(frames)
            except BaseException:
                # The failed sink's traceback may hold a view of frames, which cannot grow while
                # it lives: later appends go to a copy (they failed as "not a record").
                self.buf = bytearray(frames)
                raise
            self.drained += PyByteArray_GET_SIZE(frames)
            self.buf = bytearray()  # not emptied in place: a view the sink still holds would forbid it
        if lines is not None and PyByteArray_GET_SIZE(lines):
            try:
                self.index_sink(lines)
            except BaseException:
                self._lines = bytearray(lines)
                raise
            self._lines = bytearray()
        return 0


def _check_tiling(Py_ssize_t nbytes, lengths):
    """Index lines are only as right as lengths: they must tile the frames' nbytes exactly."""
    if int(lengths.sum()) + OVERHEAD_BYTES * len(lengths) != nbytes:
        raise InvalidArgumentError(f"frames of {nbytes} bytes do not hold records of these lengths")


cdef int _index_lines(bytearray lines, int64_t offset, const int64_t[::1] lengths) except -1:
    """One line per frame, whose records' data lengths are given, from offset on."""
    cdef Py_ssize_t i
    for i in range(lengths.shape[0]):
        _put_line(lines, offset, lengths[i] + FRAME_OVERHEAD)
        offset += lengths[i] + FRAME_OVERHEAD
    return 0


cdef int _put_line(bytearray lines, int64_t offset, int64_t length) except -1:
    """Append "<offset> <length>\n" (both >= 0), as the sidecar format spells them."""
    cdef char line[48]
    cdef Py_ssize_t n = _put_decimal(line, offset)
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(lines)
    line[n] = c' '
    n += 1
    n += _put_decimal(line + n, length)
    line[n] = c'\n'
    n += 1
    _reserve(lines, at + n)
    memcpy(PyByteArray_AS_STRING(lines) + at, line, n)
    return 0


cdef inline Py_ssize_t _put_decimal(char *out, int64_t value) noexcept nogil:
    cdef char digits[20]
    cdef Py_ssize_t n = 0, i
    cdef uint64_t v = <uint64_t>value
    while True:
        digits[n] = <char>(c'0' + v % 10)
        n += 1
        v //= 10
        if v == 0:
            break
    for i in range(n):
        out[i] = digits[n - 1 - i]
    return n


def encode_frames(records, bytearray out=None):
    """Append one frame per record (bytes-like) to out (a new bytearray if None); return out.
    Every record's data is found first (one that is not bytes-like raises with nothing
    appended), then all are framed in one pass, without the GIL from NOGIL_MIN_BYTES: the
    workers of write_parallel frame their encoders' records side by side."""
    cdef list held = records if type(records) is list else list(records)
    cdef Py_ssize_t n = len(held), i, got = 0, at, total = 0
    cdef ByteSpan *spans = <ByteSpan *>PyMem_Realloc(NULL, (n if n else 1) * sizeof(ByteSpan))
    cdef Py_buffer *views = NULL   # of the records that are not exactly bytes
    cdef unsigned char *dst
    cdef object record
    if spans == NULL:
        raise MemoryError()
    if out is None:
        out = bytearray()
    try:
        for i in range(n):
            record = held[i]
            if PyBytes_CheckExact(record):   # held alive by the list: no buffer to take
                spans[i].ptr = <const unsigned char *>PyBytes_AS_STRING(record)
                spans[i].len = PyBytes_GET_SIZE(record)
            else:
                if views == NULL:
                    views = <Py_buffer *>PyMem_Realloc(NULL, n * sizeof(Py_buffer))
                    if views == NULL:
                        raise MemoryError()
                acquire(record, &views[got])
                got += 1
                spans[i].ptr = <const unsigned char *>views[got - 1].buf
                spans[i].len = views[got - 1].len
            total += spans[i].len + FRAME_OVERHEAD
        at = PyByteArray_GET_SIZE(out)
        _reserve(out, at + total)
        dst = <unsigned char *>PyByteArray_AS_STRING(out) + at
        if total >= NOGIL_MIN_BYTES:
            with nogil:
                _write_frames(dst, spans, n)
        else:
            _write_frames(dst, spans, n)
        return out
    finally:
        for i in range(got):
            PyBuffer_Release(&views[i])
        PyMem_Free(views)
        PyMem_Free(spans)


cdef void _write_frames(unsigned char *dst, const ByteSpan *spans, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        _write_frame(dst, spans[i].ptr, <uint64_t>spans[i].len)
        dst += spans[i].len + FRAME_OVERHEAD


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc   # bytes allocated (capacity), >= size + 1


cdef inline int _reserve(bytearray out, Py_ssize_t size) except -1:
    """Resize out to size with doubling capacity. CPython grows a bytearray by only 1/8, or
    to the exact size for a large jump, so appending big records would copy the whole
    buffer each time; over-asking then trimming keeps the capacity (a trim to more than
    half the allocation does not reallocate)."""
    cdef Py_ssize_t alloc = (<PyByteArrayObject *>out).ob_alloc
    if size >= alloc:
        PyByteArray_Resize(out, max(size, 2 * alloc))
    PyByteArray_Resize(out, size)
    return 0


cdef inline void _frame_into(unsigned char *dst, Py_buffer *view):
    if view.len >= NOGIL_MIN_BYTES:
        with nogil:
            _write_frame(dst, <const unsigned char *>view.buf, <uint64_t>view.len)
    else:
        _write_frame(dst, <const unsigned char *>view.buf, <uint64_t>view.len)


cdef inline void _write_frame(unsigned char *dst, const unsigned char *data, uint64_t n) noexcept nogil:
    tfl_store_le64(dst, n)
    tfl_store_le32(dst + 8, tfl_mask_crc(tfl_crc32c(0, dst, 8)))
    memcpy(dst + FRAME_HEADER, data, n)
    tfl_store_le32(dst + FRAME_HEADER + n, tfl_mask_crc(tfl_crc32c(0, data, n)))


cdef struct Span:
    Py_ssize_t start   # offset of the record's data within the buffer
    Py_ssize_t length  # data length


cdef int _scan(Cursor *c, const unsigned char *base, bint check_crc, uint64_t max_record_bytes,
               Span *spans, Py_ssize_t max_spans, Py_ssize_t *count, uint64_t *value) noexcept nogil:
    """Verify frames from c.pos until the buffer ends, max_spans are found or a frame is bad.

    On return c.pos is the start of the first frame not returned; value holds the bytes still
    needed to finish that frame (FRAME_OK) or its length field (bad frames)."""
    cdef const unsigned char *header
    cdef const unsigned char *data
    cdef const unsigned char *footer
    cdef const unsigned char *frame_start
    cdef uint64_t length
    count[0] = 0
    while count[0] < max_spans:
        frame_start = c.pos
        if not cursor_take(c, FRAME_HEADER, &header):
            value[0] = FRAME_HEADER - (c.end - c.pos)
            return OK
        length = tfl_load_le64(header)
        if tfl_mask_crc(tfl_crc32c(0, header, 8)) != tfl_load_le32(header + 8):
            c.pos = frame_start
            value[0] = length
            return BAD_LENGTH_CRC
        if length > max_record_bytes:
            c.pos = frame_start
            value[0] = length
            return TOO_LARGE
        # Two takes, since length + FRAME_FOOTER can overflow when max_record_bytes is huge.
        if not (cursor_take(c, length, &data) and cursor_take(c, FRAME_FOOTER, &footer)):
            c.pos = frame_start + FRAME_HEADER
            if length > <uint64_t>0xFFFFFFFFFFFFFFFF - FRAME_FOOTER:
                value[0] = <uint64_t>0xFFFFFFFFFFFFFFFF
            else:
                value[0] = length + FRAME_FOOTER - <uint64_t>(c.end - c.pos)
            c.pos = frame_start
            return OK
        if check_crc and tfl_mask_crc(tfl_crc32c(0, data, length)) != tfl_load_le32(footer):
            c.pos = frame_start
            value[0] = length
            return BAD_DATA_CRC
        spans[count[0]].start = data - base
        spans[count[0]].length = <Py_ssize_t>length
        count[0] += 1
    value[0] = 0
    return OK


cdef int _scan_all(Cursor *c, const unsigned char *base, bint check_crc, uint64_t max_record_bytes,
                   Py_ssize_t max_records, Span *batch, Span **spans, Py_ssize_t *cap, Py_ssize_t *found,
                   uint64_t *value) noexcept nogil:
    """_scan until the buffer ends, max_records (if >= 0) are found in all or a frame is bad,
    appending to spans[0] (batch at first, moved to the heap and doubled as it fills; cap its
    room, found its count). The scan's status, or -1 out of memory."""
    cdef Py_ssize_t want, count
    cdef int status
    cdef Span *grown
    while True:
        if max_records >= 0 and found[0] == max_records:
            value[0] = 0
            return OK
        want = cap[0] - found[0] if max_records < 0 else min(cap[0] - found[0], max_records - found[0])
        status = _scan(c, base, check_crc, max_record_bytes, spans[0] + found[0], want, &count, value)
        found[0] += count
        if status != OK or count < want:
            return status
        if found[0] == cap[0]:
            grown = <Span *>realloc(spans[0] if spans[0] != batch else NULL, 2 * cap[0] * sizeof(Span))
            if grown == NULL:
                return -1
            if spans[0] == batch:
                memcpy(grown, batch, found[0] * sizeof(Span))
            spans[0] = grown
            cap[0] *= 2


cdef tuple _span_arrays(const Span *spans, Py_ssize_t found):
    """(starts, lengths): int64 arrays of the spans' data offsets and lengths."""
    cdef Py_ssize_t i
    starts, lengths = np.empty(found, np.int64), np.empty(found, np.int64)
    cdef int64_t *sp = <int64_t *>cnp.PyArray_DATA(starts)
    cdef int64_t *lp = <int64_t *>cnp.PyArray_DATA(lengths)
    for i in range(found):
        sp[i] = spans[i].start
        lp[i] = spans[i].length
    return starts, lengths


def scan_frames(buf, Py_ssize_t start=0, Py_ssize_t stop=-1, bint check_crc=True,
                uint64_t max_record_bytes=0xFFFFFFFFFFFFFFFF, Py_ssize_t max_records=-1):
    """Verify and copy out the complete frames in buf[start:stop].

    Returns (records, pos, status, value): records as a list of bytes; pos, the offset of the
    first frame not returned; status, one of the FRAME_* outcomes for the frame at pos; value,
    the bytes still needed to complete that frame (FRAME_OK) or its length field (otherwise).
    The header CRC is always checked; check_crc=False skips the data CRC only."""
    return _scan_into(buf, start, stop, check_crc, max_record_bytes, max_records, False)


def scan_spans(buf, Py_ssize_t start=0, Py_ssize_t stop=-1, bint check_crc=True,
               uint64_t max_record_bytes=0xFFFFFFFFFFFFFFFF, Py_ssize_t max_records=-1):
    """As scan_frames, but returns (starts, lengths, pos, status, value) where starts and
    lengths are int64 arrays locating each record's data in buf, instead of copies (indexing,
    zero-copy parsing). Frames are verified without the GIL, as in scan_frames."""
    return _scan_into(buf, start, stop, check_crc, max_record_bytes, max_records, True)


def scan_block(buf, Py_ssize_t start=0, Py_ssize_t stop=-1, bint check_crc=True,
               uint64_t max_record_bytes=0xFFFFFFFFFFFFFFFF, Py_ssize_t max_records=-1):
    """As scan_spans, but returns (frames, starts, lengths, pos, status, value): the verified
    frames buf[start:pos] copied (without the GIL) into one bytes object, and starts
    relative to it. A block outlives buf, which the reader then refills."""
    cdef Py_buffer view
    cdef bytes frames
    cdef Py_ssize_t n, keep
    cdef char *dst
    cdef uintptr_t fault
    acquire(buf, &view)  # once: the scan and the copy see the same bytes
    try:
        starts, lengths, pos, status, value = _scan_view(&view, start, stop, check_crc, max_record_bytes,
                                                         max_records, True)
        n = pos - start
        frames = PyBytes_FromStringAndSize(NULL, n)
        dst = PyBytes_AS_STRING(frames)
        with nogil:
            tfl_guard_enter()
            memcpy(dst, <const char *>view.buf + start, n)
            fault = tfl_guard_leave()
        if fault:  # the mapped file was truncated after the scan: keep what lies before
            value = <Py_ssize_t>(fault - <uintptr_t>view.buf)
            keep = int(np.searchsorted(starts + lengths + FRAME_FOOTER, value, side="right"))
            pos = int(starts[keep]) - FRAME_HEADER  # the copy only read frames, so one is lost
            starts, lengths, status = starts[:keep], lengths[:keep], SHRUNK
            frames = frames[:pos - start]
    finally:
        PyBuffer_Release(&view)
    starts -= start
    return frames, starts, lengths, pos, status, value


cdef tuple _scan_into(buf, Py_ssize_t start, Py_ssize_t stop, bint check_crc,
                      uint64_t max_record_bytes, Py_ssize_t max_records, bint as_spans):
    cdef Py_buffer view
    acquire(buf, &view)
    try:
        return _scan_view(&view, start, stop, check_crc, max_record_bytes, max_records, as_spans)
    finally:
        PyBuffer_Release(&view)


cdef tuple _scan_view(Py_buffer *view, Py_ssize_t start, Py_ssize_t stop, bint check_crc,
                      uint64_t max_record_bytes, Py_ssize_t max_records, bint as_spans):
    cdef Cursor c
    cdef Span batch[SPAN_BATCH]
    cdef Span *spans = batch     # as_spans: grows past the batch into heap storage
    cdef Py_ssize_t count, i, want, found = 0, cap = SPAN_BATCH, end, lost
    cdef uint64_t value = 0
    cdef int status = OK
    cdef uintptr_t fault = 0
    cdef const unsigned char *base
    cdef list out = []
    try:
        if stop < 0 or stop > view.len:
            stop = view.len
        if start < 0 or start > stop:
            raise InvalidArgumentError(f"start {start} is outside the buffer (0..{stop})")
        base = <const unsigned char *>view.buf
        cursor_init(&c, base + start, stop - start)
        if as_spans:
            # One GIL release for the whole buffer: spans need no object until the end.
            with nogil:
                tfl_guard_enter()
                status = _scan_all(&c, base, check_crc, max_record_bytes, max_records, batch, &spans, &cap,
                                   &found, &value)
                fault = tfl_guard_leave()
            if status < 0:
                raise MemoryError()
            if fault:
                lost = <Py_ssize_t>(fault - <uintptr_t>base)
                while found and spans[found - 1].start + spans[found - 1].length + FRAME_FOOTER > lost:
                    found -= 1  # read (partly) from the zeros mapped over the lost pages
                    c.pos = base + spans[found].start - FRAME_HEADER
                status, value = SHRUNK, lost
            return *_span_arrays(spans, found), c.pos - base, status, value
        tfl_guard_enter()
        try:
            while True:
                want = SPAN_BATCH
                if max_records >= 0:
                    want = min(want, max_records - found)
                    if want == 0:
                        value = 0
                        break
                with nogil:
                    status = _scan(&c, base, check_crc, max_record_bytes, spans, want, &count, &value)
                found += count
                for i in range(count):
                    out.append(PyBytes_FromStringAndSize(<const char *>base + spans[i].start, spans[i].length))
                if status != OK or count < want:
                    break
        finally:
            fault = tfl_guard_leave()
        if fault:
            lost, end = <Py_ssize_t>(fault - <uintptr_t>base), start
            for i in range(len(out)):  # the frames lie back to back from start
                if end + FRAME_OVERHEAD + len(out[i]) > lost:
                    del out[i:]
                    break
                end += FRAME_OVERHEAD + len(out[i])
            c.pos = base + end
            status, value = SHRUNK, lost
        return out, c.pos - base, status, value
    finally:
        if spans != batch:
            free(spans)


def find_header(buf, Py_ssize_t start=0, Py_ssize_t stop=-1):
    """Offset of the first position >= start in buf[:stop] whose 12 bytes form a header with a
    valid masked CRC, or -1. Used to resynchronise after corruption."""
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef const unsigned char *last
    cdef Py_ssize_t found = -1
    cdef uintptr_t fault
    acquire(buf, &view)
    try:
        if stop < 0 or stop > view.len:
            stop = view.len
        if start < 0:
            raise InvalidArgumentError("start must be >= 0")
        if stop - start < FRAME_HEADER:
            return -1
        p = <const unsigned char *>view.buf + start
        last = <const unsigned char *>view.buf + stop - FRAME_HEADER
        with nogil:
            tfl_guard_enter()
            while p <= last:
                if tfl_mask_crc(tfl_crc32c(0, p, 8)) == tfl_load_le32(p + 8):
                    found = p - <const unsigned char *>view.buf
                    break
                p += 1
            fault = tfl_guard_leave()
        # Not a header read from the zeros mapped over a truncated file's lost pages.
        if fault and found + FRAME_HEADER > <Py_ssize_t>(fault - <uintptr_t>view.buf):
            return -1
        return found
    finally:
        PyBuffer_Release(&view)


include "_framing_files.pxi"
