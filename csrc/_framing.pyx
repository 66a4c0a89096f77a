# cython: freethreading_compatible = False
"""TFRecord frames: CRC32C, scanning a buffer into verified records, writing frames.

A frame is::

    uint64 length           little-endian
    uint32 masked_crc32c(length's 8 bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

The pure-Python twin is tfrecord_lite/_framing_py.py; both expose the same names.
"""
import os
import weakref

import numpy as np

from tfrecord_lite.errors import InvalidArgumentError

from cpython.buffer cimport PyBuffer_Release
from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE, PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.pythread cimport (
    NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock, PyThread_free_lock,
    PyThread_release_lock, PyThread_type_lock,
)
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

from cpython.pycapsule cimport PyCapsule_New
from crc32c cimport (
    TFL_CRC32C_CAPSULE, tfl_crc32c, tfl_crc32c_backend, tfl_crc32c_hw_available, tfl_crc32c_init, tfl_mask_crc,
)
from cursor cimport Cursor, acquire, cursor_init, cursor_take
from le cimport tfl_load_le32, tfl_load_le64, tfl_store_le32, tfl_store_le64

# This module is the only one that links crc32c.c, so the CRC backend state lives here once;
# tfrecord_lite._example reaches tfl_crc32c through this capsule.
_crc32c_capsule = PyCapsule_New(<void *>tfl_crc32c, TFL_CRC32C_CAPSULE, NULL)
# The frame layout under the twin's public names (the C enum below keeps the bare names).
globals().update(HEADER_BYTES=HEADER_BYTES, FOOTER_BYTES=FOOTER_BYTES)

cdef enum:
    HEADER_BYTES = 12     # uint64 length + uint32 masked CRC of it
    FOOTER_BYTES = 4      # uint32 masked CRC of the data
    SPAN_BATCH = 1024     # records verified per GIL release before bytes objects are made
    NOGIL_MIN_BYTES = 65536  # below this, releasing the GIL costs more than it saves

cdef enum Outcome:       # scan outcomes, exported below with the same values as the twin
    OK = 0               # stopped at the end of the buffer or after max_records
    BAD_LENGTH_CRC = 1
    BAD_DATA_CRC = 2
    TOO_LARGE = 3

FRAME_OK = OK
FRAME_BAD_LENGTH_CRC = BAD_LENGTH_CRC
FRAME_BAD_DATA_CRC = BAD_DATA_CRC
FRAME_TOO_LARGE = TOO_LARGE

_BACKEND_NAMES = {0: "table", 1: "sse4.2", 2: "armv8"}
tfl_crc32c_init(os.environ.get("TFRECORD_LITE_CRC32C_TABLE") == "1")


def crc32c_backend():
    """Name of the CRC32C path in use: "sse4.2", "armv8" or "table"."""
    return _BACKEND_NAMES[tfl_crc32c_backend()]


def set_crc32c_backend(str name):
    """Select "hardware" (the CPU's instruction, if any) or "table"; returns the active name."""
    if name not in ("hardware", "table"):
        raise InvalidArgumentError(f"CRC32C backend must be 'hardware' or 'table', not {name!r}")
    if name == "hardware" and not tfl_crc32c_hw_available():
        raise InvalidArgumentError("this CPU has no CRC32C instruction; only the 'table' backend is available")
    tfl_crc32c_init(name == "table")
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


cdef Py_ssize_t _append_frame(bytearray out, record) except -1:
    """out's new length; a record that is not bytes-like raises with nothing appended."""
    cdef Py_buffer view
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    acquire(record, &view)
    try:
        _reserve(out, at + view.len + HEADER_BYTES + FOOTER_BYTES)
        _frame_into(<unsigned char *>PyByteArray_AS_STRING(out) + at, &view)
    finally:
        PyBuffer_Release(&view)
    return at + view.len + HEADER_BYTES + FOOTER_BYTES


cdef class FrameBuffer:
    """A writer's per-record path as one C call: ``write(record)`` frames the record onto
    ``buf`` under the lock this object is (``with fb:``), counts it in ``records``, and once
    ``buf`` holds ``flush_bytes`` runs the owner's ``_drain()`` still under the lock.
    Everything else goes to the owner: when ``closed`` its ``_raise_closed()`` raises, with
    ``per_record`` (each record needs more, such as an index line) its ``_write_one()``
    takes the record, and a record that is not bytes-like raises its
    ``_not_bytes(record, exc)``. The owner is held weakly: a writer discards itself when
    collected, which a reference cycle would delay."""
    cdef PyThread_type_lock _lock
    cdef public bytearray buf
    cdef public Py_ssize_t records
    cdef public bint closed, per_record
    cdef readonly Py_ssize_t flush_bytes
    cdef object _owner

    def __cinit__(self, owner, Py_ssize_t flush_bytes):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        self.buf = bytearray()
        self.flush_bytes = flush_bytes
        self._owner = weakref.ref(owner)

    def __dealloc__(self):
        if self._lock != NULL:
            PyThread_free_lock(self._lock)

    def __enter__(self):
        _take(self._lock)
        return True

    def __exit__(self, *exc):
        PyThread_release_lock(self._lock)

    def write(self, record):
        """Append one record (bytes, bytearray, memoryview or any contiguous buffer)."""
        cdef Py_ssize_t size
        _take(self._lock)
        try:
            if self.closed or self.per_record:
                _owner(self)._write_one(record)
                return
            try:
                size = _append_frame(self.buf, record)
            except (TypeError, ValueError, BufferError) as exc:
                raise _owner(self)._not_bytes(record, exc) from None
            self.records += 1
            if size >= self.flush_bytes:
                _owner(self)._drain()
        finally:
            PyThread_release_lock(self._lock)


cdef inline void _take(PyThread_type_lock lock):
    if not PyThread_acquire_lock(lock, NOWAIT_LOCK):
        with nogil:  # the holder may need the GIL to let go
            PyThread_acquire_lock(lock, WAIT_LOCK)


cdef object _owner(FrameBuffer fb):
    """The writer, which raises its own error when closed."""
    owner = fb._owner()
    if owner is None:
        from .errors import TFRecordError
        raise TFRecordError("write to a TFRecordWriter that no longer exists")
    if fb.closed:
        owner._raise_closed()
    return owner


def encode_frames(records, bytearray out=None):
    """Append one frame per record (bytes-like) to out (a new bytearray if None); return out."""
    if out is None:
        out = bytearray()
    for record in records:
        _append_frame(out, record)
    return out


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
    memcpy(dst + HEADER_BYTES, data, n)
    tfl_store_le32(dst + HEADER_BYTES + n, tfl_mask_crc(tfl_crc32c(0, data, n)))


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
        if not cursor_take(c, HEADER_BYTES, &header):
            value[0] = HEADER_BYTES - (c.end - c.pos)
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
        # Two takes, since length + FOOTER_BYTES can overflow when max_record_bytes is huge.
        if not (cursor_take(c, length, &data) and cursor_take(c, FOOTER_BYTES, &footer)):
            c.pos = frame_start + HEADER_BYTES
            if length > <uint64_t>0xFFFFFFFFFFFFFFFF - FOOTER_BYTES:
                value[0] = <uint64_t>0xFFFFFFFFFFFFFFFF
            else:
                value[0] = length + FOOTER_BYTES - <uint64_t>(c.end - c.pos)
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
    cdef Py_ssize_t n
    cdef char *dst
    starts, lengths, pos, status, value = _scan_into(buf, start, stop, check_crc, max_record_bytes,
                                                     max_records, True)
    n = pos - start
    frames = PyBytes_FromStringAndSize(NULL, n)
    acquire(buf, &view)
    try:
        if view.len < pos:
            raise InvalidArgumentError("the buffer shrank while it was scanned")
        dst = PyBytes_AS_STRING(frames)
        with nogil:
            memcpy(dst, <const char *>view.buf + start, n)
    finally:
        PyBuffer_Release(&view)
    starts -= start
    return frames, starts, lengths, pos, status, value


cdef tuple _scan_into(buf, Py_ssize_t start, Py_ssize_t stop, bint check_crc,
                      uint64_t max_record_bytes, Py_ssize_t max_records, bint as_spans):
    cdef Py_buffer view
    cdef Cursor c
    cdef Span batch[SPAN_BATCH]
    cdef Span *spans = batch     # as_spans: grows past the batch into heap storage
    cdef Span *grown
    cdef Py_ssize_t count, i, want, found = 0, cap = SPAN_BATCH
    cdef uint64_t value = 0
    cdef int status = OK
    cdef const unsigned char *base
    cdef list out = []
    cdef int64_t[::1] starts_view, lengths_view
    acquire(buf, &view)
    try:
        if stop < 0 or stop > view.len:
            stop = view.len
        if start < 0 or start > stop:
            raise InvalidArgumentError(f"start {start} is outside the buffer (0..{stop})")
        base = <const unsigned char *>view.buf
        cursor_init(&c, base + start, stop - start)
        while True:
            want = SPAN_BATCH
            if max_records >= 0:
                want = min(want, max_records - found)
                if want == 0:
                    value = 0
                    break
            if as_spans and found + want > cap:
                cap = max(2 * cap, found + want)
                grown = <Span *>PyMem_Realloc(spans if spans != batch else NULL, cap * sizeof(Span))
                if grown == NULL:
                    raise MemoryError()
                if spans == batch:
                    memcpy(grown, batch, found * sizeof(Span))
                spans = grown
            with nogil:
                status = _scan(&c, base, check_crc, max_record_bytes, spans + (found if as_spans else 0),
                               want, &count, &value)
            found += count
            if not as_spans:
                for i in range(count):
                    out.append(PyBytes_FromStringAndSize(<const char *>base + spans[i].start, spans[i].length))
            if status != OK or count < want:
                break
        if not as_spans:
            return out, c.pos - base, status, value
        starts, lengths = np.empty(found, np.int64), np.empty(found, np.int64)
        starts_view, lengths_view = starts, lengths
        for i in range(found):
            starts_view[i] = spans[i].start
            lengths_view[i] = spans[i].length
        return starts, lengths, c.pos - base, status, value
    finally:
        if spans != batch:
            PyMem_Free(spans)
        PyBuffer_Release(&view)


def new_buffer(Py_ssize_t n):
    """A bytearray of n bytes left uninitialized (the reader fills it at once)."""
    if n < 0:
        raise InvalidArgumentError("n must be >= 0")
    return PyByteArray_FromStringAndSize(NULL, n)


def find_header(buf, Py_ssize_t start=0, Py_ssize_t stop=-1):
    """Offset of the first position >= start in buf[:stop] whose 12 bytes form a header with a
    valid masked CRC, or -1. Used to resynchronise after corruption."""
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef const unsigned char *last
    cdef Py_ssize_t found = -1
    acquire(buf, &view)
    try:
        if stop < 0 or stop > view.len:
            stop = view.len
        if start < 0:
            raise InvalidArgumentError("start must be >= 0")
        if stop - start < HEADER_BYTES:
            return -1
        p = <const unsigned char *>view.buf + start
        last = <const unsigned char *>view.buf + stop - HEADER_BYTES
        with nogil:
            while p <= last:
                if tfl_mask_crc(tfl_crc32c(0, p, 8)) == tfl_load_le32(p + 8):
                    found = p - <const unsigned char *>view.buf
                    break
                p += 1
        return found
    finally:
        PyBuffer_Release(&view)
