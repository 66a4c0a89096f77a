"""Pure-Python twin of csrc/_framing.pyx: CRC32C, frame scanning and frame writing, mapped files.

Same names, signatures and results as the compiled module; CRC32C comes from the crc32c
package. Used when the compiled core is unavailable or TFRECORD_LITE_PURE_PYTHON=1.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import sys
import threading

import crc32c as _crc32c_pkg
import numpy as np

from .errors import InvalidArgumentError, not_a_record, writer_closed, writer_in_use

HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of it
FOOTER_BYTES = 4  # uint32 masked CRC of the data
OVERHEAD_BYTES = HEADER_BYTES + FOOTER_BYTES

FRAME_OK = 0
FRAME_BAD_LENGTH_CRC = 1
FRAME_BAD_DATA_CRC = 2
FRAME_TOO_LARGE = 3
FRAME_SHRUNK = 4  # a mapped file cut short: the core's guarded scans find it, the reader by the file's size

_u64 = struct.Struct("<Q")
_u32 = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


def crc32c_backend():
    """Name of the CRC32C path in use: the crc32c package's ("hardware" or "software")."""
    return "hardware" if _crc32c_pkg.hardware_based else "software"


def set_crc32c_backend(name: str):
    """The crc32c package picks its own path; only validates name for signature parity."""
    if name not in ("hardware", "table"):
        raise InvalidArgumentError(f"CRC32C backend must be 'hardware' or 'table', not {name!r}")
    return crc32c_backend()


def crc32c(data, value: int = 0) -> int:
    """CRC32C (Castagnoli, reflected 0x82F63B78) of data, continuing from value."""
    return _crc32c_pkg.crc32c(byte_view(data), value)


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data) -> int:
    """TFRecord's masked CRC: ((c >> 15) | (c << 17)) + 0xa282ead8, mod 2**32."""
    return _mask(crc32c(data))


def encode_frames(records, out: bytearray | None = None) -> bytearray:
    """Append one frame per record (bytes-like) to out (a new bytearray if None); return out.
    Every record is looked at first: one that is not bytes-like raises with nothing appended."""
    if out is None:
        out = bytearray()
    for data in [byte_view(record) for record in records]:
        header = _u64.pack(len(data))
        out += header
        out += _u32.pack(_mask(_crc32c_pkg.crc32c(header)))
        out += data
        out += _u32.pack(_mask(_crc32c_pkg.crc32c(data)))
    return out


def byte_view(obj) -> memoryview:
    """obj's bytes, as the compiled core's acquire borrows them: C-contiguous, and not a
    buffer of object pointers (a numpy object array), whose bytes are addresses, not the
    objects' data."""
    view = memoryview(obj)
    fmt = view.format
    if _holds_objects(fmt):
        view.release()
        raise TypeError(f"its buffer holds pointers to Python objects (format {fmt!r}), not their "
                        "bytes; encode the values to bytes first")
    if not view.c_contiguous:
        view.release()
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return view.cast("B")


def _holds_objects(fmt: str) -> bool:
    """Whether a struct-syntax format has an 'O' among its types; text between colons is a
    field name."""
    return "O" in fmt and any("O" in part for part in fmt.split(":")[::2])


def check_buffer(obj) -> None:
    """Raise the error the compiled core raises when it borrows obj's bytes, if any."""
    byte_view(obj).release()


def append_frame(out: bytearray, record) -> int:
    """Append one frame for record (bytes-like) to out; return out's new length."""
    encode_frames((record,), out)
    return len(out)


class FrameBuffer:
    """A writer's core: frames appended to buf under the lock this object is, with their
    index lines formatted as they are appended, drained to sink and index_sink; see
    _framing.pyx."""

    def __init__(self, sink, flush_bytes, path="<stream>", index_sink=None):
        self._lock = threading.Lock()
        self._owner = None  # the thread holding _lock
        self.buf = bytearray()
        self.records = self.drained = 0
        self.closed = False
        self.path = path
        self.sink = sink
        self.flush_bytes = flush_bytes
        self.index_sink = index_sink
        self._lines = None if index_sink is None else []

    def __enter__(self):
        me = threading.get_ident()
        if not self._lock.acquire(blocking=False):
            if self._owner == me:
                raise writer_in_use(self.path)
            self._lock.acquire()
        self._owner = me
        return True

    def __exit__(self, *exc):
        self._owner = None
        self._lock.release()

    def write(self, record):
        """Append one record (bytes, bytearray, memoryview or any contiguous buffer)."""
        with self:
            self._append(record)
            if len(self.buf) >= self.flush_bytes:
                self.drain()

    def write_many(self, records):
        """Append each record of an iterable; one that is not bytes-like raises, naming its
        index, with the records before it appended."""
        self.check_open()
        for record in records:
            self._append(record)
            if len(self.buf) >= self.flush_bytes:
                self.drain()

    def write_frames(self, frames, lengths=None, count=-1):
        """Append whole, verified frames verbatim; see _framing.pyx."""
        at = len(self.buf)
        self.check_open()
        if lengths is None and (count < 0 or self._lines is not None):
            lengths = scan_spans(frames, 0, -1, False)[1]
        if lengths is not None:
            lengths = np.asarray(lengths, dtype=np.int64)
            count = len(lengths)
        nbytes = memoryview(frames).nbytes
        if self._lines is not None:
            sizes = (lengths + OVERHEAD_BYTES).tolist()
            if sum(sizes) != nbytes:
                raise InvalidArgumentError(f"frames of {nbytes} bytes do not hold records of these lengths")
        direct = nbytes >= self.flush_bytes // 2  # a write of its own, after the buffer's, not copied first
        if direct and at:
            self.drain()
            at = 0
        if not direct:
            self.buf += frames
        if self._lines is not None:
            offset = self.drained + at
            for size in sizes:
                self._lines.append(f"{offset} {size}\n")
                offset += size
        self.records += count
        if direct:
            self.sink(frames)
            self.drained += nbytes
            self.drain()
        elif len(self.buf) >= self.flush_bytes:
            self.drain()

    def drain(self):
        """Hand the buffered frames to sink and the pending index lines to index_sink."""
        if self.buf:
            try:
                self.sink(self.buf)
            except BaseException:
                # The failed sink's traceback may hold a view of buf, which cannot grow while it
                # lives: later appends go to a copy.
                self.buf = bytearray(self.buf)
                raise
            self.drained += len(self.buf)
            self.buf = bytearray()  # not emptied in place: a view the sink still holds would forbid it
        if self._lines:
            self.index_sink(bytearray("".join(self._lines).encode("ascii")))
            self._lines = []

    def check_open(self):
        """Raise the error for a write after close when closed."""
        if self.closed:
            raise writer_closed(self.path)

    def _append(self, record):
        at = len(self.buf)
        self.check_open()
        try:
            size = append_frame(self.buf, record)
        except (TypeError, ValueError, BufferError) as exc:
            raise not_a_record(record, exc, self.path, self.records) from None
        if self._lines is not None:
            self._lines.append(f"{self.drained + at} {size - at}\n")
        self.records += 1


def scan_frames(buf, start=0, stop=-1, check_crc=True, max_record_bytes=0xFFFFFFFFFFFFFFFF, max_records=-1):
    """Verify and copy out the complete frames in buf[start:stop]; see _framing.pyx."""
    return _scan(buf, start, stop, check_crc, max_record_bytes, max_records, False)


def scan_spans(buf, start=0, stop=-1, check_crc=True, max_record_bytes=0xFFFFFFFFFFFFFFFF, max_records=-1):
    """As scan_frames, but int64 arrays of data offsets and lengths instead of copies:
    (starts, lengths, pos, status, value); see _framing.pyx."""
    spans, pos, status, value = _scan(buf, start, stop, check_crc, max_record_bytes, max_records, True)
    spans = np.array(spans, dtype=np.int64).reshape(-1, 2)
    return spans[:, 0].copy(), spans[:, 1].copy(), pos, status, value


def scan_block(buf, start=0, stop=-1, check_crc=True, max_record_bytes=0xFFFFFFFFFFFFFFFF, max_records=-1):
    """As scan_spans, plus the verified frames copied out as one bytes, starts relative to it:
    (frames, starts, lengths, pos, status, value); see _framing.pyx."""
    starts, lengths, pos, status, value = scan_spans(buf, start, stop, check_crc, max_record_bytes, max_records)
    return bytes(memoryview(buf).cast("B")[start:pos]), starts - start, lengths, pos, status, value


def read_spans(fd, buf, pos, filled, offset, step, check_crc=True, max_record_bytes=0xFFFFFFFFFFFFFFFF):
    """Read the file open as fd into buf, verifying each read's frames as it lands, until buf
    is full, the file ends or a frame is bad: (starts, lengths, pos, filled, status, value,
    eof); see _framing.pyx."""
    size = len(buf)
    if not (0 <= pos <= filled <= size and step > 0 and offset >= 0):
        raise InvalidArgumentError(f"read_spans: pos {pos}, filled {filled}, step {step} and offset {offset} "
                                   f"do not fit a buffer of {size} bytes")
    starts, lengths, eof = [], [], False
    with memoryview(buf) as mv:
        while True:
            found, sizes, pos, status, value = scan_spans(buf, pos, filled, check_crc, max_record_bytes)
            starts.append(found)
            lengths.append(sizes)
            if status != FRAME_OK or filled == size:
                break
            want = size - filled
            if step < want and value < want:
                want = max(step, value)
            try:
                got = os.preadv(fd, [mv[filled:filled + want]], offset)  # EINTR retried (PEP 475)
            except OSError:
                if sum(map(len, starts)):
                    break  # the next call meets it
                raise
            if not got:
                eof = True
                break
            filled += got
            offset += got
    return np.concatenate(starts), np.concatenate(lengths), pos, filled, status, value, eof


def _scan(buf, start, stop, check_crc, max_record_bytes, max_records, as_spans):
    mv = memoryview(buf).cast("B")
    if stop < 0 or stop > len(mv):
        stop = len(mv)
    if start < 0 or start > stop:
        raise InvalidArgumentError(f"start {start} is outside the buffer (0..{stop})")
    records = []
    pos = start
    while True:
        if 0 <= max_records <= len(records):
            return records, pos, FRAME_OK, 0
        if stop - pos < HEADER_BYTES:
            return records, pos, FRAME_OK, HEADER_BYTES - (stop - pos)
        header = mv[pos : pos + 8]
        (length,) = _u64.unpack(header)
        if _mask(_crc32c_pkg.crc32c(header)) != _u32.unpack(mv[pos + 8 : pos + 12])[0]:
            return records, pos, FRAME_BAD_LENGTH_CRC, length
        if length > max_record_bytes:
            return records, pos, FRAME_TOO_LARGE, length
        left = stop - pos - HEADER_BYTES
        if length + FOOTER_BYTES > left:
            # Saturates like the compiled core's uint64 arithmetic.
            return records, pos, FRAME_OK, min(length + FOOTER_BYTES - left, 0xFFFFFFFFFFFFFFFF)
        data = mv[pos + HEADER_BYTES : pos + HEADER_BYTES + length]
        if check_crc:
            footer = pos + HEADER_BYTES + length
            if _mask(_crc32c_pkg.crc32c(data)) != _u32.unpack(mv[footer : footer + 4])[0]:
                return records, pos, FRAME_BAD_DATA_CRC, length
        records.append((pos + HEADER_BYTES, length) if as_spans else bytes(data))
        pos += HEADER_BYTES + length + FOOTER_BYTES


def _shared_word(buf, index):
    view = memoryview(buf).cast("B")
    if view.readonly:
        raise BufferError("Object is not writable.")
    if index < 0 or (index + 1) * 4 > view.nbytes or np.frombuffer(view, np.uint8).ctypes.data % 4:
        raise InvalidArgumentError(f"word {index} is not an aligned int32 of the {view.nbytes}-byte buffer")
    return np.frombuffer(view, np.int32, 1, 4 * index)


def store_release(buf, index, value):
    # Python gives no ordering guarantees to choose from: the compiled core's is what counts.
    _shared_word(buf, index)[0] = value


def load_acquire(buf, index):
    return int(_shared_word(buf, index)[0])


def new_buffer(n):
    """A bytearray of n bytes (zeroed here; the compiled core leaves it uninitialized)."""
    if n < 0:
        raise InvalidArgumentError("n must be >= 0")
    return bytearray(n)


# Python's mmap keeps a duplicate of the descriptor while it lives, unless told not to (3.13).
_TRACKFD = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class _MappedFile(mmap.mmap):
    """Python's read-only mapping, pickled as the bytes it holds (as the core's is). Unlike
    the core's, before Python 3.13 it keeps a duplicate of the descriptor while it lives
    (``holds_descriptor``: MappedFiles keeps none of these), and its reads are not guarded:
    a file truncated under it ends the process (SIGBUS) when a byte past its new end is
    read."""

    path = None
    holds_descriptor = not _TRACKFD

    def lost(self, offset=-1, stat=False):
        """Where the bytes known lost begin: the compiled core's, but with no guard to find
        any, only the size of the file now, with stat."""
        size = len(self)
        if stat and self.path is not None:
            try:
                size = min(size, os.stat(self.path).st_size)
            except OSError:
                pass
        return min(size, offset) if offset >= 0 else size

    def __reduce__(self):
        return bytes, (self[:],)


def map_file(fd, size, path=None):
    if size <= 0:
        raise InvalidArgumentError("map_file needs a size > 0 (an empty file cannot be mapped)")
    if fd < 0:  # Python's mmap would map anonymous memory
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    out = _MappedFile(fd, size, access=mmap.ACCESS_READ, **_TRACKFD)
    out.path = path
    return out


def find_header(buf, start=0, stop=-1):
    """Offset of the first position >= start in buf[:stop] whose 12 bytes form a header with a
    valid masked CRC, or -1."""
    mv = memoryview(buf).cast("B")
    if stop < 0 or stop > len(mv):
        stop = len(mv)
    if start < 0:
        raise InvalidArgumentError("start must be >= 0")
    for p in range(start, stop - HEADER_BYTES + 1):
        if _mask(_crc32c_pkg.crc32c(mv[p : p + 8])) == _u32.unpack(mv[p + 8 : p + 12])[0]:
            return p
    return -1
