"""Reading TFRecord files: sources (paths, file objects, in-memory buffers, mapped files),
bounded chunked buffering, compression detection and the corrupt-record policy. The blocks it
reads become :class:`~tfrecord_lite.batch.RecordBatch` es (``record_batches``).

The per-record work (header parse, length sanity, both CRCs, slicing) happens in
``_native.framing.scan_frames``; this module only moves chunks and decides what an error
means. Memory is bounded by the chunk size and the largest record, never the file size.
"""

from __future__ import annotations

import io
import itertools
import logging
import numbers
import os
import stat
import sys
import threading
from typing import Any, Iterator

from . import _native
from . import fs as _fs
from ._typing import BinaryIO, Buffer, Compression, PathLike, StorageOptions
from .errors import (
    ArgumentTypeError, CorruptRecordError, DataLossError, InvalidArgumentError, RecordTooLargeError, TFRecordError,
    TruncatedRecordError,
)
from .batch import BlockOrigin, RecordBatch, rebatch
from .io import DecompressingStream, detect_compression, head_hint, normalize_compression

__all__ = ["TFRecordReader", "DEFAULT_MAX_RECORD_BYTES", "ON_CORRUPT"]

log = logging.getLogger("tfrecord_lite")

# Protobuf messages cannot exceed 2 GiB, so no Example can; a larger length is corruption.
DEFAULT_MAX_RECORD_BYTES = 2**31
CHUNK_BYTES = 1 << 18  # stays in L2 cache, so the CRC and the copy into bytes read warm data
# Blocks and spans copy no record into bytes: larger chunks mean fewer blocks and fewer
# record tails carried over to the next one (parse_example over record_batches(): W2 10%,
# W1 4% faster). Both are the defaults of chunk_size=None.
BLOCK_CHUNK_BYTES = 1 << 20
_SHARED_POOL_BYTES = 64 << 20  # read buffers kept for readers given no pool (_shared_pool)
_POOL_BUFFERS = 128  # buffers a pool holds at most by default: each take searches them
ON_CORRUPT = ("raise", "skip", "stop")
_HEADER = _native.framing.HEADER_BYTES
_FOOTER = _native.framing.FOOTER_BYTES
_HINT_KEEP = "pass on_corrupt='skip' or 'stop' to keep the records before it"
_HINT_DAMAGED = (
    "The file is damaged: pass on_corrupt='skip' to drop bad records and keep the rest, "
    "or on_corrupt='stop' to keep the records before this one"
)


def check_max_record_bytes(value) -> int:
    """max_record_bytes as an int (numpy integers too): a bool, float or str is refused, not
    truncated or parsed, and a negative one too. Past 2**64 - 1 it limits nothing more (the
    compiled scan takes a uint64)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ArgumentTypeError(f"max_record_bytes must be an integer, not {value!r:.80}",
                                hint="pass a number of bytes, e.g. 2**31")
    if value < 0:
        raise InvalidArgumentError(f"max_record_bytes must be >= 0, not {value}",
                                   hint="pass the largest record length, in bytes, to accept")
    return min(int(value), 2**64 - 1)


def _is_buffer(source) -> bool:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return True
    if isinstance(source, (str, os.PathLike)):
        return False
    try:
        memoryview(source)
    except TypeError:
        return False
    return True


class TFRecordReader:
    """Iterate over the records of one TFRecord stream as ``bytes``.

    source: a path or fsspec URL (``s3://bucket/data.tfrecord``; ``storage_options`` go to
    fsspec, and the file is read in large ranged blocks), a binary file object (anything with
    ``read``), or an in-memory buffer (bytes, bytearray, memoryview, mmap, numpy array),
    scanned in place.
    compression: "auto" (detect from content), None/"", "gzip"/"GZIP", "zlib"/"ZLIB".
    check_crc: verify each record's data CRC (the length CRC is always verified).
    on_corrupt: "raise" (default), "skip" (drop the bad record, resynchronise on the next
    valid header, log it and keep going; dropped records are in ``.skipped``) or "stop"
    (end quietly at the first bad record, like TF's ``ignore_errors()``).
    max_record_bytes: a length field above this is reported as RecordTooLargeError.
    chunk_size: bytes read at a time; by default 256 KiB where records become ``bytes`` and
    1 MiB for ``record_batches()``, ``frame_blocks()`` and ``record_spans()``, which copy none.
    start_offset / start_index: begin at the frame at this byte offset, counting it as record
    ``start_index`` in errors. An uncompressed file or buffer seeks
    there; a compressed stream has no seekable record offsets, so the bytes before it are
    decompressed and discarded (not scanned).
    buffers: the ``BufferPool`` read buffers come from; readers that run together (a
    dataset's) share one. By default, one the process's readers share, keeping up to 64 MiB
    of buffers nothing refers to any more.
    maps: with memory_map, the ``MappedFiles`` whose mapping of the file to reuse (one
    made for the file as it is now), else a mapping of its own.
    memory_map: map a local, uncompressed regular file instead of reading it, and scan it in
    place, a chunk at a time: no read calls and no copies (``record_batches()`` hold views
    of the page cache), and no descriptor held once it is mapped; the file is read up to
    the size it had when opened. Other sources are read as usual. As with any mapped file
    (``numpy.memmap``), the file must not change while its records are in use: what another
    process writes into it shows in them. A file cut short under its mapping raises
    TruncatedRecordError (its file, the first lost record's offset and index) when the
    compiled core's scan, parse or copy (a RecordBatch's records by index, iteration or
    ``to_numpy()``) reaches a record past its new end, after the records before it; reading
    those pages yourself (a RecordBatch's ``segments``) ends the process with SIGBUS, as with
    ``numpy.memmap``, and so does any read of them under the pure-Python backend.

    Offsets in errors count bytes of the decompressed stream. ``batch_offset`` is the offset
    of the first frame of the batch (or block) yielded last, ``batch_index`` its index.
    """

    def __init__(self, source: PathLike | BinaryIO | Buffer, compression: Compression = "auto",
                 check_crc: bool = True, on_corrupt: str = "raise", *,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, chunk_size: int | None = None,
                 start_offset: int = 0, start_index: int = 0, storage_options: StorageOptions = None,
                 buffers: BufferPool | None = None, memory_map: bool = False,
                 maps: MappedFiles | None = None) -> None:
        if on_corrupt not in ON_CORRUPT:
            raise InvalidArgumentError(f"on_corrupt must be one of {ON_CORRUPT}, not {on_corrupt!r}")
        self.compression = normalize_compression(compression, allow_auto=True)
        self.check_crc = bool(check_crc)
        self.on_corrupt = on_corrupt
        self.max_record_bytes = check_max_record_bytes(max_record_bytes)
        self.chunk_size = None if chunk_size is None else max(int(chunk_size), 64)
        self.skipped: list[TFRecordError] = []  # errors for records dropped under "skip"
        self.records_read = 0
        self.start_offset, self.start_index = int(start_offset), int(start_index)
        if self.start_offset < 0 or self.start_index < 0:
            raise InvalidArgumentError("start_offset and start_index must be >= 0")
        self.batch_offset = self.start_offset
        self.batch_index = self.start_index
        self._owned = None
        self._buffer = None
        self._file = None
        self._mapped = False
        self._mismatch = None  # the hint for an error at byte 0 (head_hint): a wrong compression=, another format
        if _is_buffer(source):
            self.path = "<buffer>"
            try:
                _native.framing.check_buffer(source)
            except _native.BUFFER_ERRORS as exc:
                raise ArgumentTypeError(f"cannot read records from a buffer of type {type(source).__name__}: {exc}",
                                        path=self.path, hint="pass the file's bytes (bytes, bytearray, or a "
                                        "contiguous memoryview or uint8 array)") from None
            self._buffer = memoryview(source).cast("B") if not isinstance(source, bytes) else source
        elif isinstance(source, (str, os.PathLike)):
            self.path = os.fspath(source)
            self._file = self._owned = _fs.open_input(self.path, storage_options)
            if memory_map:
                self._map(maps)
        else:
            name = getattr(source, "name", None)  # an int for a file opened from a descriptor
            self.path = (f"<file descriptor {name}>" if isinstance(name, int) and not isinstance(name, bool)
                         else name or "<stream>")
            if not hasattr(source, "read") or isinstance(source, io.TextIOBase):
                # Else an AttributeError, or a UnicodeDecodeError from a text-mode file, at the first read.
                raise ArgumentTypeError(f"cannot read records from {source!r:.80}: not a path, a binary file "
                                        "or bytes", hint="pass a path, or a file opened with open(path, 'rb')")
            self._file = source
        self._iter = None
        self._gen = None  # the scanning generator, once reading has started
        self._pread_to = None  # the file read up to by offset (read_spans), not moving its position
        self._buffers = buffers if buffers is not None else _shared_pool

    def __iter__(self) -> Iterator[bytes]:
        if self._iter is None:
            # chain flattens in C: no Python frame per record.
            self._iter = itertools.chain.from_iterable(self._start(self._scan()))
        return self._iter

    def __next__(self) -> bytes:
        return next(iter(self))

    def batches(self) -> Iterator[list[bytes]]:
        """Yield lists of records, as many as each buffered chunk holds: the same records as
        iterating the reader, for bulk consumers that do not want per-record overhead."""
        return self._start(self._scan())

    def frame_blocks(self) -> Iterator[tuple[Any, Any, Any]]:
        """Yield ``(frames, starts, lengths)``: runs of whole frames exactly as stored
        (headers, data and CRCs verbatim, decompressed) as ``bytes``, checked like records
        are, with int64 arrays locating each record's data in ``frames``. Copying frames this
        way never re-encodes them (merge, split, cat)."""
        return self._start(self._scan(blocks=True))

    def head(self, n: int) -> RecordBatch:
        """The first n records (fewer if the file has fewer) as one RecordBatch, which knows
        each record's file, offset and index: an error parsing them can name its record."""
        parts, have = [], 0
        if n > 0:
            for batch in self.record_batches():
                parts.append(batch[:n - have])
                have += len(parts[-1])
                if have >= n:
                    break
        return RecordBatch.concat(parts)

    def record_spans(self) -> Iterator[tuple[Any, Any]]:
        """Yield ``(offsets, lengths)``: int64 arrays giving each record's data offset in the
        (decompressed) stream and its length, checked like records are, without copying any
        record or block (counting, indexing, verifying)."""
        return self._start(self._scan(spans=True))

    def record_batches(self, batch_size: int | None = None, drop_remainder: bool = False) -> Iterator[RecordBatch]:
        """Yield :class:`RecordBatch` es: the same records as iterating the reader, without a
        Python object per record (parse_example reads them in place). One per buffered chunk,
        or exactly ``batch_size`` records each (the last one shorter unless
        ``drop_remainder``)::

            for batch in TFRecordReader(path).record_batches(1024):
                arrays = parse_example(batch, features)
        """
        blocks = self._record_blocks(self.blocks_in_place())
        if batch_size is None:
            return blocks
        if int(batch_size) != batch_size or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive integer, not {batch_size!r}")
        return rebatch(blocks, int(batch_size), drop_remainder)

    def blocks_in_place(self) -> Iterator[tuple[Any, Any, Any]]:
        """Yield ``(frames, starts, lengths)`` per scanned block, as ``record_batches()``
        holds them: frames the read buffer itself (or a view of a mapped file or in-memory
        bytes), never written again, else a copy; int64 arrays locating each record's data in
        it. ``batch_offset`` and ``batch_index`` describe a block's first frame until the
        next is asked for."""
        return self._start(self._scan(blocks=True, in_place=True))

    def _record_blocks(self, blocks):
        """RecordBatches of scanned blocks, each knowing its file, offsets and indices."""
        framed, path = self.check_crc, self.path
        for frames, starts, lengths in blocks:
            # batch_offset and batch_index still describe this block's first frame.
            base = self.batch_offset - int(starts[0]) + _HEADER  # file offset of frames[0]
            yield RecordBatch(frames, starts, lengths, framed=framed,
                              origin=BlockOrigin(path, base, self.batch_index))

    def _start(self, gen):
        if self._gen is not None:
            raise TFRecordError("a TFRecordReader can be read only once; open a new one",
                                path=self.path)
        self._gen = gen
        return gen

    @property
    def input_offset(self) -> int | None:
        """Bytes of the underlying file consumed so far (compressed bytes for a compressed
        file), for progress reporting; None for in-memory buffers, mapped files and unseekable
        streams."""
        if self._pread_to is not None:
            return self._pread_to
        try:
            return None if self._file is None else self._file.tell()
        except (AttributeError, OSError, ValueError):
            return None

    def __enter__(self) -> TFRecordReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None
        if self._gen is not None:
            self._gen.close()

    def __del__(self):
        try:
            if self._owned is not None:
                self._owned.close()
        except Exception:
            pass

    @property
    def mapped(self) -> bool:
        """Whether the file is scanned through a mapping (``memory_map``) rather than read."""
        return self._mapped

    # -- internals -------------------------------------------------------------------

    def _map(self, maps):
        """Scan the open file through a mapping when it is a local, uncompressed regular file
        the system can map (memory_map; maps: the MappedFiles to take it from); else leave it
        to be read."""
        if self.compression not in (None, "auto"):
            return
        try:
            fd = self._file.fileno()
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return
            # A compressed file is read: known from its first bytes, before any mapping is made
            # (or kept in maps).
            head = os.pread(fd, _HEADER, 0)
            if self.compression == "auto" and detect_compression(head) is not None:
                return
            # never read from the mapping here: only the core's reads are guarded
            self._mismatch = head_hint(head, self.compression)
            mapped = maps.mapping(fd, info, self.path) if maps is not None else _map_file(fd, info, self.path)
        except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
            return  # not a local file, or one this system cannot map: read it
        self._buffer, self._mapped = mapped, True
        self._owned.close()  # the mapping needs no descriptor
        self._file = self._owned = None

    def _open_stream(self):
        """(readinto-able stream or None for an in-place buffer, bytes already read from it,
        total stream size when known), the stream positioned at ``start_offset``."""
        if self._mapped:
            # Uncompressed (_map read its first bytes to know), and read by the core alone: its
            # reads of a mapping are guarded against the file being truncated (csrc/guard.h).
            return None, b"", len(self._buffer)
        in_memory = self._buffer is not None
        if not in_memory and not _seekable(self._file):
            self._file = _Counted(self._file)  # so input_offset can say how far a pipe was read
        start = self.start_offset
        head = bytes(memoryview(self._buffer)[:_HEADER]) if in_memory else _read_exact(self._file, _HEADER)
        self._mismatch = head_hint(head, self.compression)
        compression = detect_compression(head) if self.compression == "auto" else self.compression
        if compression is not None:
            raw = io.BytesIO(self._buffer) if in_memory else self._file
            stream = DecompressingStream(raw, compression, prefix=b"" if in_memory else head, path=self.path)
            if start:
                try:
                    _discard(stream, start)
                except DataLossError as exc:  # short or damaged before start_offset: no record to read
                    detail = f"{exc.detail} (while skipping to start_offset {start})"
                    self._on_error(self._error(type(exc), detail, start, self.start_index, exc.hint))
                    return io.BytesIO(), b"", None
            return stream, b"", None
        if in_memory:
            return None, b"", len(self._buffer)
        if start:
            if start > len(head):
                self._file.seek(start)
                head = b""
            else:
                head = head[start:]
        stream = self._file if hasattr(self._file, "readinto") else _ReadInto(self._file)
        total = _remaining_size(self._file, len(head))
        return stream, head, None if total is None else start + total

    def _error(self, cls, detail, offset, index, hint=_HINT_DAMAGED):
        if offset == 0 and self._mismatch:
            hint = self._mismatch
        return cls(detail, path=self.path, offset=offset, index=index, hint=hint)

    def _scan(self, blocks=False, in_place=False, spans=False):
        """Records (lists of bytes), or blocks (frames, starts, lengths): frames a copy of
        the verified frames, or with in_place the read buffer itself, which is then never
        written again (the reader moves on to a fresh one), or with spans only
        (stream offsets, lengths)."""
        F = _native.framing
        stream, head, total = self._open_stream()
        if total is not None and self.start_offset > total:
            # As a compressed file says (_open_stream): no record there, not an empty file.
            self._on_error(self._error(TruncatedRecordError, f"the input ends {self.start_offset - total} bytes early "
                                       f"(while skipping to start_offset {self.start_offset})", self.start_offset,
                                       self.start_index, "pass an offset saved from this same file"))
            return
        check, limit = self.check_crc, self.max_record_bytes
        chunk = self.chunk_size or (BLOCK_CHUNK_BYTES if blocks or spans else CHUNK_BYTES)
        if stream is None:
            # In memory (or mapped) and uncompressed: scanned in place, no copies, a chunk at
            # a time as if read, so that what one scan makes (records, index arrays) stays
            # bounded. Never alias a mutable buffer; a mapped file is read-only here.
            buf, base = self._buffer, 0
            pos = min(self.start_offset, len(buf))
            filled = min(len(buf), pos + chunk)
            eof = filled == len(buf)
            in_place = in_place and (self._mapped or isinstance(buf, bytes))
        else:
            pool = self._buffers
            buf = pool.take(max(chunk, len(head)))
            buf[: len(head)] = head
            filled, eof = len(head), False
            base, pos = self.start_offset, 0  # base: stream offset of buf[0]
        handed_out = False  # buf is referenced by a yielded block: write to a fresh one
        # A regular file this reader opened, read for spans: each read verified as it lands, a
        # whole buffer's reads in one core call (read_spans); else a read, then a scan.
        fd = stream.fileno() if (in_place or spans) and stream is self._owned and type(stream) is io.FileIO \
            and total is not None and hasattr(os, "preadv") else -1
        index = self.start_index
        resyncing = False
        while True:
            if resyncing:
                found = F.find_header(buf, pos, filled)
                if found >= 0:
                    pos, resyncing = found, False
                elif eof:
                    # The error that started the resync reported these bytes; not a cut since.
                    if self._mapped and (kept := buf.lost(stat=True)) < len(buf):
                        self._on_error(self._frame_error(F.FRAME_SHRUNK, kept, max(pos, kept), index))
                    return
                else:
                    pos = max(pos, filled - (_HEADER - 1))
            if not resyncing:
                self.batch_offset, self.batch_index = base + pos, index
                if fd >= 0 and not eof:
                    starts, lengths, pos, filled, status, value, eof = F.read_spans(
                        fd, buf, pos, filled, base + filled, CHUNK_BYTES, check, limit)
                    self._pread_to = base + filled
                    frames, count = buf, len(starts)
                    handed_out = handed_out or (in_place and count > 0)
                elif in_place or spans:
                    starts, lengths, pos, status, value = F.scan_spans(buf, pos, filled, check, limit, -1)
                    frames, count = buf, len(starts)
                    handed_out = handed_out or (in_place and count > 0)
                elif blocks:
                    frames, starts, lengths, pos, status, value = F.scan_block(buf, pos, filled, check, limit, -1)
                    count = len(starts)
                else:
                    records, pos, status, value = F.scan_frames(buf, pos, filled, check, limit, -1)
                    count = len(records)
                if count:
                    index += count
                    self.records_read += count
                    yield (starts + base, lengths) if spans else (frames, starts, lengths) if blocks else records
                if status != F.FRAME_OK:
                    offset = base + pos
                    if self._mapped:
                        status, value = self._mapped_status(status, value, offset, len(buf))
                    err = self._frame_error(status, value, offset, index)
                    if self._on_error(err):
                        return
                    index += 1
                    if status == F.FRAME_BAD_DATA_CRC:
                        pos += _HEADER + value + _FOOTER  # the frame itself is intact
                    else:
                        pos += 1
                        resyncing = True
                    continue
                # A regular file too short for this record: fail before buffering it (read_spans
                # may have read to its end first: the same error).
                short = total is not None and pos < filled and base + filled + value > total
                if eof or short:
                    if pos < filled:
                        self._on_error(self._truncated(
                            base + pos, index,
                            f"it ends at byte {base + filled + value} but the input has {total} bytes"
                            if short and (fd >= 0 or not eof)
                            else f"the input ends {filled - pos} bytes into a record that needs {filled - pos + value}",
                        ))
                    return
            # What the next read or stretch of memory takes: a chunk, or all of a record the scan
            # found unfinished. Not the whole buffer, which a pool may hand out at up to twice
            # the size asked for: a damaged compressed stream fails the read that reaches its
            # end, and loses what that read had decompressed.
            want = max(chunk, 0 if resyncing else value)
            if stream is None:
                filled = min(len(buf), filled + want)
                eof = filled == len(buf)
                continue
            # Keep the unfinished tail, then read more.
            if pos or handed_out:
                tail = filled - pos
                if handed_out:
                    buf, handed_out = _moved(buf, pos, filled, len(buf), pool), False
                else:
                    buf[:tail] = buf[pos:filled]
                base += pos
                filled, pos = tail, 0
            if filled == len(buf):
                # Doubling only when full of real data keeps allocation under 2x what was
                # read, whatever a (possibly hostile) length field claims.
                buf = _moved(buf, 0, filled, 2 * len(buf), pool)
            if fd >= 0 and not resyncing:
                continue  # read_spans reads on
            stop = min(len(buf), filled + want)
            damaged = None
            with memoryview(buf) as mv:
                try:
                    n = stream.readinto(mv[filled:stop]) if fd < 0 else os.preadv(fd, [mv[filled:stop]], base + filled)
                except DataLossError as exc:  # a damaged compressed stream: say which record it hit
                    damaged = self._error(type(exc), f"{exc.detail} ({base + filled} bytes into the decompressed "
                                          "stream)", base + pos, index, f"{exc.hint}; {_HINT_KEEP}")
            if damaged is not None:
                self._on_error(damaged)
                return  # nothing after the damage can be decompressed
            if not n:
                eof = True
            else:
                filled += n
                if fd >= 0:
                    self._pread_to = base + filled

    def _truncated(self, offset, index, detail):
        return self._error(
            TruncatedRecordError, f"truncated record at {offset}: {detail}", offset, index,
            hint=f"The file was cut short (an interrupted write or copy?); {_HINT_KEEP}",
        )

    def _mapped_status(self, status, value, offset, size):
        """(status, value) for a scan of the mapping (size bytes) that stopped at offset: FRAME_SHRUNK
        (value: the first byte lost) when the frame there lies past the end of a file cut short
        since it was mapped, whose pages past its new end read as zeros once the core's guard
        caught their faults (or, in the page the new end falls in, without one)."""
        F = _native.framing
        # Marked on the mapping for the parses and copies of records scanned before.
        kept = self._buffer.lost(value if status == F.FRAME_SHRUNK else -1, stat=True)
        if status == F.FRAME_SHRUNK:  # value: the first byte that faulted
            return status, kept
        if kept < size and offset + _HEADER + (value + _FOOTER if status == F.FRAME_BAD_DATA_CRC else 0) > kept:
            return F.FRAME_SHRUNK, kept
        return status, value

    def _frame_error(self, status, value, offset, index):
        F = _native.framing
        if status == F.FRAME_SHRUNK:
            return self._error(
                TruncatedRecordError,
                f"truncated record at {offset}: the file was cut short while it was mapped (its bytes "
                f"from {value} on are gone)",
                offset, index,
                hint="A file read with memory_map=True must not change until it is read; the "
                "records before this one were delivered",
            )
        if status == F.FRAME_BAD_LENGTH_CRC:
            return self._error(
                CorruptRecordError,
                f"corrupted record at {offset}: the masked CRC32C of the length field does not match",
                offset, index,
            )
        if status == F.FRAME_BAD_DATA_CRC:
            return self._error(
                CorruptRecordError,
                f"corrupted record at {offset + _HEADER}: the masked CRC32C of the {value}-byte data "
                "does not match",
                offset, index,
            )
        return self._error(
            RecordTooLargeError,
            f"the length field says {value} bytes, over max_record_bytes={self.max_record_bytes}",
            offset, index,
            hint="If the file really holds records this large, pass a larger max_record_bytes; "
            "otherwise the file is damaged (on_corrupt='skip' drops bad records)",
        )

    def _on_error(self, err) -> bool:
        """Apply the on_corrupt policy to err; True means stop reading this stream."""
        if self.on_corrupt == "raise":
            raise err
        log.warning("%s (on_corrupt=%r)", err, self.on_corrupt)
        self.skipped.append(err)
        return self.on_corrupt == "stop" or isinstance(err, TruncatedRecordError)


class _ReadInto:
    """readinto() for file objects that only offer read()."""

    def __init__(self, f):
        self._f = f

    def readinto(self, view) -> int:
        data = self._f.read(len(view))
        view[: len(data)] = data
        return len(data)


class _Counted(_ReadInto):
    """An unseekable stream (a pipe, a socket) that counts what was read from it, its tell()."""

    def __init__(self, f):
        super().__init__(f)
        self._at = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self._at += len(data)
        return data

    def readinto(self, view) -> int:
        into = getattr(self._f, "readinto", None)
        got = into(view) if into is not None else super().readinto(view)
        self._at += got or 0
        return got

    def tell(self) -> int:
        return self._at


def _seekable(f) -> bool:
    try:
        return bool(f.seekable())
    except (AttributeError, OSError, ValueError):
        return False


class BufferPool:
    """Buffers handed out again once nothing but the pool refers to them (whatever is read
    into a buffer keeps it, as a reference, for as long as it lives). A fresh 1 MiB buffer
    per chunk costs an allocation and, as glibc gives such blocks back to the kernel, a page
    fault per 4 KiB. Thread-safe: a dataset's readers share one.

    keep: the bytes of buffers held, in use or not, at most; most: the buffers. A new buffer
    is held only while both allow, so the pool never holds more than its readers used at
    once. Each take searches the held buffers, so most bounds it: reading 20,000 batches of
    64-byte chunks that their caller kept took 6.8 s with a pool bounded by bytes alone (each
    take searched every buffer still in use), 0.22 s with 128 buffers at most."""

    def __init__(self, keep: int, most: int = _POOL_BUFFERS):
        self.keep, self.most = keep, most
        self._buffers: list[bytearray] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """A buffer of size to 2 x size bytes, its content undefined."""
        buffers = self._buffers
        with self._lock:
            i = _first_free(buffers, _FREE_REFS, size)
            if i < 0:
                buf = _native.framing.new_buffer(size)
                # Summed here, where a buffer is being made anyway, not kept up beside the list.
                if len(buffers) < self.most and sum(map(len, buffers)) + len(buf) <= self.keep:
                    buffers.append(buf)
            else:
                # To the back: buffers come free about in the order they were taken, so the
                # search, which holds the GIL, stops near the front of hundreds.
                buf = buffers.pop(i)
                buffers.append(buf)
            return buf

    def drop_held(self) -> None:
        """Let go of the buffers something else still refers to (a batch its caller keeps):
        they go with it. The free ones stay."""
        buffers = self._buffers
        with self._lock:
            i = 0
            while i < len(buffers):
                if sys.getrefcount(buffers[i]) == _FREE_REFS:
                    i += 1
                else:
                    del buffers[i]

    def clear(self) -> None:
        """Let go of every buffer: those in use go with what holds them, the free ones now."""
        with self._lock:
            self._buffers = []

    def _after_fork(self) -> None:
        # Another thread may have held the lock as the process forked: the child starts over
        # (its copies of the parent's buffers go as it drops them).
        self._lock = threading.Lock()
        self._buffers = []


# Readers given no pool share this one: a batch of 1,024 images of 32 KiB spans 33 read
# buffers of 1 MiB, so a pool of each reader's own (which kept 8) made fresh buffers, and
# so did each next reader of a chain over files. parse_example of W1 over a chain of readers
# (8 files): 0.13 s a pass against 0.16, page faults 12,300 against 23,400 a pass.
_shared_pool = BufferPool(_SHARED_POOL_BYTES)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_shared_pool._after_fork)


def _map_file(fd: int, info: os.stat_result, path=None):
    return _native.framing.map_file(fd, info.st_size, path=path) if info.st_size else b""


class MappedFiles:
    """Mappings of files kept to be reused (a dataset's, from one epoch to the next): a new
    mapping faults every page in again as it is scanned, and unmapping one that was read
    costs too. A mapping is reused while the file has the same identity, size and
    modification time; another is made otherwise. Up to ``keep`` files: each mapping is an
    address-space area of the process, whose count the system bounds (vm.max_map_count,
    65,530 by default). Thread-safe."""

    def __init__(self, keep: int):
        self.keep = keep
        self._maps: dict = {}  # (device, inode) -> (size, mtime_ns, mapping)
        self._lock = threading.Lock()

    def mapping(self, fd: int, info: os.stat_result, path=None):
        """A read-only mapping of the open file fd (fstat: info; its name: path), reused where
        one was kept."""
        key, state = (info.st_dev, info.st_ino), (info.st_size, info.st_mtime_ns)
        with self._lock:
            kept = self._maps.get(key)
            if kept is not None and kept[:2] == state:
                return kept[2]
        mapped = _map_file(fd, info, path)
        if getattr(mapped, "holds_descriptor", False):  # kept, it would count past max_open_files
            return mapped
        with self._lock:
            if key in self._maps or len(self._maps) < self.keep:
                self._maps[key] = (*state, mapped)
        return mapped


def _first_free(buffers: list, refs: int, size: int) -> int:
    """The index of the first of buffers of size to 2 x size bytes with refs references,
    which is what one that only the list holds has here, or -1."""
    for i in range(len(buffers)):  # no loop variable, whose reference would count
        if sys.getrefcount(buffers[i]) == refs and size <= len(buffers[i]) <= 2 * size:
            return i
    return -1


# Measured, not assumed: how many references this interpreter counts in _first_free for a
# buffer only its list holds (newer interpreters may borrow some of them).
_FREE_REFS = next(refs for refs in range(1, 16) if _first_free([bytearray()], refs, 0) >= 0)


def _moved(buf: bytearray, start: int, stop: int, size: int, pool: BufferPool) -> bytearray:
    """A buffer of pool's (size bytes or more) that begins with buf[start:stop], the rest
    undefined."""
    fresh = pool.take(size)
    with memoryview(buf) as mv:
        fresh[:stop - start] = mv[start:stop]
    return fresh


def _discard(stream, n: int) -> None:
    """Read and drop the first n bytes of a (decompressing) stream."""
    buf = bytearray(min(n, 1 << 20))
    with memoryview(buf) as view:
        while n:
            got = stream.readinto(view[:min(n, len(buf))])
            if not got:
                raise TruncatedRecordError(f"the decompressed stream ends {n} bytes early",
                                           hint="pass an offset saved from this same file")
            n -= got


def _read_exact(f, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = f.read(n - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _remaining_size(f, consumed: int):
    """Bytes left in a regular or remote file after the first `consumed`, or None for streams."""
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size - f.tell() + consumed
    except (AttributeError, OSError, ValueError):
        pass
    known = getattr(f, "size", None)  # an fsspec file knows its size
    if isinstance(known, int) and not isinstance(known, bool):
        try:
            return known - f.tell() + consumed
        except (AttributeError, OSError, ValueError):
            return None
    return None
