"""Index sidecars: where each record of an uncompressed TFRecord file starts.

Format (shared with the ``tfrecord`` package's ``create_index`` and DALI's ``tfrecord2idx``,
so their indexes work here and ours work there): one text line per record,
``<frame offset> <frame length>``, where the frame length includes the 16 bytes of
header and footer. The sidecar of ``data.tfrecord`` is ``data.tfrecord.index``.

Compressed files have no stable record offsets, so indexing them raises an error that says
how to get an indexable file.

fsspec URLs work here (with ``storage_options``): sidecars are read and written beside the
remote file. Counting records (``count_records``, ``count_shard``) uses a sidecar when there
is one. Random access through them: ``tfrecord_lite.random_access``.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from . import _native
from . import fs as _fs
from ._typing import PathLike, Progress, StorageOptions
from .errors import DataLossError, InvalidArgumentError, TFRecordError
from .io import detect_compression
from .progress import progress as _progress
from .reader import DEFAULT_MAX_RECORD_BYTES, TFRecordReader, check_max_record_bytes

__all__ = ["index_path", "build_index", "read_index", "write_index", "scan_index", "load_index",
           "count_records", "count_shard"]

OVERHEAD = _native.framing.OVERHEAD_BYTES  # frame bytes around the data
_COUNTS: dict = {}  # (path, size, stamp) -> records: each version of a file counted once per process


def index_path(path) -> str:
    """The sidecar path for a TFRecord file (for a chained URL, beside the file inside the
    chain: ``zip://a.tfrecord.index::s3://b/x.zip``)."""
    path = os.fspath(path)
    return _fs.beside(path, ".index") if _fs.is_url(path) else path + ".index"


def _sidecar(path) -> str | None:
    """The sidecar looked for beside path, or None for a URL that names one fixed object
    (``_fs.pinned``: a presigned URL, an object version): ``?versionId=v.index`` names another
    version of the same object, ``?X-Amz-Signature=....index`` nothing, and the sidecar of the
    bare name describes another version, so such a file is scanned unless its index file is
    given."""
    return None if _fs.pinned(os.fspath(path)) else index_path(path)


def not_a_file(path) -> bool:
    """Whether path is a pipe or a device (a FIFO, /dev/null), or leads to a descriptor's
    file through /proc (/dev/stdin, /dev/fd/0, even when they lead to a file): an index of
    it gives offsets nothing can seek to, and its sidecar would be written into /dev. A file
    in /dev/shm is a file."""
    path = os.fspath(path)
    if _fs.is_url(path):
        return False
    if _fs.is_special(path):
        return True
    path = _fs.local_path(path)
    try:
        for _ in range(40):  # the symlink chain, each link's directory resolved
            path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            if path.startswith("/proc/"):
                return True
            if not os.path.islink(path):
                return False
            path = os.path.join(os.path.dirname(path), os.readlink(path))
    except OSError:  # a link gone meanwhile: the open that follows says so
        pass
    return False


def check_seekable(path) -> None:
    """Refuse to index a pipe or a device (``not_a_file``)."""
    if not_a_file(path):
        raise TFRecordError("an index holds byte offsets to seek to in a file, but this is a pipe or a device",
                            path=os.fspath(path), hint="copy it to a file first (tfrecord-lite cat FILE -o "
                            "copy.tfrecord) and index the copy")


def scan_index(path, *, check_crc=True, max_record_bytes=DEFAULT_MAX_RECORD_BYTES, progress=False,
               storage_options=None):
    """(offsets, frame_lengths) as int64 arrays for an uncompressed TFRecord file, computed
    by scanning it in chunks with the reader's record_spans (no copies of records or blocks;
    no mmap, which a file truncated meanwhile would turn into a crash). Corruption raises the reader's
    DataLossError, naming the record and offset. progress: a bool (see tfrecord_lite.progress)
    or an open bar to advance by the bytes scanned."""
    path = os.fspath(path)
    check_seekable(path)  # read twice below: a FIFO's second open waited for a writer forever
    _check_uncompressed(path, storage_options)
    F = _native.framing
    starts, lengths, done = [], [], 0
    bar = progress if hasattr(progress, "update") else _progress(
        _fs.size(path, storage_options), desc="index", enabled=progress, unit="B")
    with TFRecordReader(path, None, check_crc, max_record_bytes=max_record_bytes,
                        storage_options=storage_options) as reader, \
            contextlib.nullcontext() if bar is progress else bar:
        for block_starts, block_lengths in reader.record_spans():
            starts.append(block_starts)
            lengths.append(block_lengths)
            end = int(block_starts[-1] + block_lengths[-1]) + F.FOOTER_BYTES
            bar.update(end - done)
            done = end
    starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    return starts - F.HEADER_BYTES, lengths + F.OVERHEAD_BYTES


def _compressed(path, storage_options) -> bool:
    with _fs.open_input(path, storage_options) as f:
        return detect_compression(f.read(_native.framing.HEADER_BYTES)) is not None


def _check_uncompressed(path, storage_options) -> None:
    if _compressed(path, storage_options):
        raise TFRecordError("compressed TFRecord files cannot be indexed: records have no fixed byte offsets",
                            path=path, hint="decompress it first (tfrecord-lite cat FILE > plain.tfrecord) or "
                            "write it uncompressed")


def write_index(index_file, offsets, lengths, *, storage_options=None) -> None:
    """Write a sidecar atomically: one ``<offset> <length>`` line per frame."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape != lengths.shape:
        raise InvalidArgumentError(f"an index needs one offset per frame length: got offsets of shape "
                                   f"{offsets.shape} and lengths of shape {lengths.shape}",
                                   path=os.fspath(index_file))
    if len(offsets) and min(offsets.min(), lengths.min()) < 0:
        raise InvalidArgumentError("index offsets and frame lengths are byte counts: none can be negative",
                                   path=os.fspath(index_file))
    out = _fs.open_output(index_file, storage_options)
    try:
        for start in range(0, len(offsets), _CHUNK):
            out.file.write(_index_text(offsets[start:start + _CHUNK], lengths[start:start + _CHUNK]))
        out.commit()
    except BaseException:
        out.discard()
        raise


_CHUNK = 1 << 16  # lines formatted at once: a few MB of work arrays, whatever the index's size
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)


def _index_text(offsets, lengths) -> bytes:
    """The lines of these frames, as ``f"{offset} {length}\\n"`` of each writes them, formatted
    column by column in NumPy (a Python string per number took seconds per million frames):
    each number is written right-aligned into a fixed-width row, and the leading places it
    does not fill are dropped."""
    widths = [int(np.searchsorted(_POW10, a.max(), side="right")) + 1 for a in (offsets, lengths)]
    rows = sum(widths) + 2
    text = np.empty((rows, len(offsets)), np.uint8)  # one column per line
    keep = np.empty((rows, len(offsets)), bool)
    first = 0
    for values, width in zip((offsets, lengths), widths):
        for row in range(first + width - 1, first, -1):  # last digit first
            keep[row] = values > 0
            quotient = values // 10
            text[row] = values - quotient * 10 + ord("0")
            values = quotient
        text[first], keep[first] = values + ord("0"), values > 0
        keep[first + width - 1] = True  # 0 is written "0"
        first += width
        text[first], keep[first] = ord(" ") if first < rows - 1 else ord("\n"), True
        first += 1
    return text.T[keep.T].tobytes()


def build_index(path: PathLike, index_file: PathLike | None = None, *, check_crc: bool = True,
                progress: Progress = None, storage_options: StorageOptions = None,
                max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> str:
    """Scan path and write its sidecar (default ``path + '.index'``); returns the sidecar path.
    progress and max_record_bytes: as in scan_index."""
    index_file = index_file or _sidecar(path)
    if index_file is None:
        raise InvalidArgumentError(f"{path} has a query string or an object version, so no sidecar can be "
                                   "named after it",
                                   hint="pass index_file, the path to write the index to")
    if _same_file(path, index_file):
        raise InvalidArgumentError("the index file would replace the file it indexes", path=os.fspath(index_file),
                                   hint="pass another index_file, or none for the sidecar (path + '.index')")
    offsets, lengths = scan_index(path, check_crc=check_crc, max_record_bytes=max_record_bytes, progress=progress,
                                  storage_options=storage_options)
    write_index(index_file, offsets, lengths, storage_options=storage_options)
    return os.fspath(index_file)


def _same_file(path, other) -> bool:
    path, other = os.fspath(path), os.fspath(other)
    if _fs.is_url(path) or _fs.is_url(other):
        return path == other
    try:
        return os.path.samefile(_fs.local_path(path), _fs.local_path(other))
    except OSError:  # one of them does not exist (yet)
        return False


_MAX_INDEX_VALUE = 2**61  # far beyond any file; offset + length then fits in int64
_INDEX_TEXT = b"0123456789 \t\n\r\x0b\x0c"  # all a sidecar may hold


def read_index(index_file, *, storage_options=None):
    """(offsets, frame_lengths) int64 arrays from a sidecar; malformed sidecars raise."""
    index_file = os.fspath(index_file)
    data = _fs.read_bytes(index_file, storage_options)
    if data.translate(None, _INDEX_TEXT):
        raise TFRecordError("index sidecar is not 'offset length' lines of integers", path=index_file,
                            hint="rebuild it with tfrecord_lite.build_index")
    # Digits and whitespace only: parsed in one pass, not one bytes object per number as
    # split() made (a number beyond int64, clamped, fails the bounds below; fromstring reads
    # whitespace alone as one 0).
    arr = np.zeros(0, np.int64) if not data or data.isspace() else np.fromstring(data, dtype=np.int64, sep=" ")
    if arr.size % 2:
        raise TFRecordError("index sidecar has an odd number of fields", path=index_file,
                            hint="rebuild it with tfrecord_lite.build_index")
    arr = arr.reshape(-1, 2)
    offsets, lengths = arr[:, 0].copy(), arr[:, 1].copy()
    # Bounding every number first keeps the sums below from wrapping around int64.
    if len(offsets) and (
        offsets[0] < 0 or (lengths < OVERHEAD).any() or (arr > _MAX_INDEX_VALUE).any()
        or (offsets[1:] != offsets[:-1] + lengths[:-1]).any()
    ):
        raise TFRecordError("index sidecar entries are not contiguous frames", path=index_file,
                            hint="rebuild it with tfrecord_lite.build_index")
    return offsets, lengths


def load_index(path, index_file=None, *, check_crc=True, max_record_bytes=DEFAULT_MAX_RECORD_BYTES,
               storage_options=None):
    """(offsets, frame_lengths) from index_file (which must exist), else from the sidecar when
    it exists, else by scanning the file (in memory; nothing is written) under
    max_record_bytes. The index must cover the file exactly, from byte 0 to its size, and its
    last frame's header must state that frame's length: one that does not is stale (the file
    was rewritten or appended to after it was written) and raises, rather than hide records
    or point past the end."""
    max_record_bytes = check_max_record_bytes(max_record_bytes)  # unused where a sidecar is read: checked anyway
    return _load(path, _index_file(path, index_file, storage_options), check_crc, max_record_bytes, storage_options)


def _index_file(path, index_file, storage_options):
    """The index file load_index reads, or None to scan. An index file that was given must
    be there (a typo would cost a silent scan); a sidecar is used when present."""
    if index_file:
        return index_file
    sidecar = _sidecar(path)
    return sidecar if sidecar is not None and _fs.exists(sidecar, storage_options) else None


def _load(path, index_file, check_crc, max_record_bytes, storage_options):
    if index_file is None:
        return scan_index(path, check_crc=check_crc, max_record_bytes=max_record_bytes,
                          storage_options=storage_options)
    offsets, lengths = read_index(index_file, storage_options=storage_options)
    wrong = _mismatch(path, offsets, lengths, _fs.size(path, storage_options), storage_options)
    if wrong is not None:
        _check_uncompressed(path, storage_options)  # no sidecar fits a compressed file
        raise TFRecordError(wrong, path=os.fspath(index_file),
                            hint=f"the index is stale: rebuild it with {_rebuild(path, index_file)}")
    return offsets, lengths


def _rebuild(path, index_file) -> str:
    """How to rebuild index_file, the index of path."""
    index_file = os.fspath(index_file)
    if index_file == index_path(path):
        return f"`tfrecord-lite index {path}` or tfrecord_lite.build_index"
    return f"tfrecord_lite.build_index({path!r}, {index_file!r})"


def _end(offsets, lengths) -> int:
    return int(offsets[-1] + lengths[-1]) if len(offsets) else 0


def _mismatch(path, offsets, lengths, size, storage_options) -> str | None:
    """What shows that read_index's contiguous frames are not those of the file of size bytes,
    or None: they must tile it exactly, and the headers of the first and last frames (two
    small reads) must be valid and state those frames' lengths. A sidecar of a file since
    rewritten to the same size seldom passes."""
    if not len(offsets):
        return None if size == 0 else f"the index sidecar lists no records but {path} has {size} bytes"
    if offsets[0] != 0 or _end(offsets, lengths) != size:
        return (f"the index sidecar's frames span bytes {int(offsets[0])}..{_end(offsets, lengths)} but {path} "
                f"has {size} bytes")
    F = _native.framing
    ends = sorted({0, len(offsets) - 1})
    for i, header in zip(ends, _read_at(path, [int(offsets[i]) for i in ends], F.HEADER_BYTES, storage_options)):
        offset, length = int(offsets[i]), int(lengths[i]) - OVERHEAD
        if len(header) < F.HEADER_BYTES or F.masked_crc32c(header[:8]) != int.from_bytes(header[8:], "little"):
            return f"the index sidecar puts record {i} at byte {offset} of {path}, where no record starts"
        stated = int.from_bytes(header[:8], "little")
        if stated != length:
            return (f"the index sidecar says record {i} at byte {offset} of {path} holds {length} bytes, but "
                    f"its header says {stated}")
    return None


def _read_at(path, offsets, n, storage_options) -> list:
    """Up to n bytes of a file from each offset: preads, or ranged requests for a URL."""
    if _fs.is_url(path):
        fs = _fs.filesystem(path, storage_options)
        return [_fs.read_range(*fs, offset, offset + n, path) for offset in offsets]
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return [os.pread(fd, n, offset) for offset in offsets]
    finally:
        os.close(fd)


def count_records(path, storage_options=None) -> int:
    """Records in a TFRecord file, counted once: from its sidecar when that matches the file's
    size, else by scanning. The scan of an uncompressed file is kept as its sidecar (so other
    processes, and random access, read it); a count is kept in memory too, for the file's
    size and change time or ETag (``fs.fingerprint``)."""
    path = os.fspath(path)
    size, stamp = _fs.fingerprint(path, storage_options)
    key = (path, size, stamp)
    if key not in _COUNTS:
        _COUNTS[key] = _count(path, size, storage_options)
    return _COUNTS[key]


def _count(path, size, storage_options) -> int:
    sidecar = _sidecar(path)
    if sidecar is not None and _fs.exists(sidecar, storage_options):
        try:
            offsets, lengths = read_index(sidecar, storage_options=storage_options)
        except TFRecordError:  # malformed (a write cut short): scanned past, as a stale one is
            pass
        else:
            if _mismatch(path, offsets, lengths, size, storage_options) is None:
                return len(offsets)
    if _compressed(path, storage_options):
        with TFRecordReader(path, storage_options=storage_options) as reader:
            return sum(len(offsets) for offsets, _ in reader.record_spans())
    offsets, lengths = scan_index(path, storage_options=storage_options)
    try:
        if sidecar is not None:
            write_index(sidecar, offsets, lengths, storage_options=storage_options)
    except (OSError, NotImplementedError):
        pass  # a read-only directory or filesystem (HTTP): the count in memory is all there is
    return len(offsets)


def count_shard(files, positions, record_rule=None, storage_options=None, reader_options=None) -> int:
    """Records that a shard (``files.shard_plan``'s file positions and record rule) reads.
    A file whose count scan fails (damaged, or read with options the scan does not use) is
    counted by reading it as the shard does, with reader_options (``TFRecordReader``'s
    compression, check_crc, on_corrupt): the records that read keeps, or its error."""
    total = 0
    for p in positions:
        # records j with (p + j) % count == index
        first, step = (0, 1) if record_rule is None else ((record_rule[0] - p) % record_rule[1], record_rule[1])
        try:
            total += len(range(first, count_records(files[p], storage_options), step))
        except DataLossError:
            if not reader_options:
                raise
            with TFRecordReader(files[p], **reader_options, storage_options=storage_options) as reader:
                for offsets, _ in reader.record_spans():
                    # the reader numbers records it skips too, as the shard's rule does
                    total += len(range((first - reader.batch_index) % step, len(offsets), step))
    return total
