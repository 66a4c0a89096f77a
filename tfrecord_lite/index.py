"""Index sidecars: where each record of an uncompressed TFRecord file starts.

Format (shared with the ``tfrecord`` package's ``create_index`` and DALI's ``tfrecord2idx``,
so their indexes work here and ours work there): one text line per record,
``<frame offset> <frame length>``, where the frame length includes the 16 bytes of
header and footer. The sidecar of ``data.tfrecord`` is ``data.tfrecord.index``.

Compressed files have no stable record offsets, so indexing them raises an error that says
how to get an indexable file.

Random access: ``TFRecordFile`` (one file: len, [i], slices) and ``IndexedDataset`` (many
files, one global index) read frames with ``os.pread`` at indexed offsets, never scanning, and
verify the CRCs of every frame they return. fsspec URLs work everywhere here (with
``storage_options``): sidecars are read and written beside the remote file, and a random
read is one ranged request. Both are Grain random-access data sources
(``__len__``, thread-safe ``__getitem__``, ``_getitems`` for batched reads, picklable, and a
``__repr__`` that names the data, which Grain's checkpoints compare).
"""

from __future__ import annotations

import collections
import contextlib
import operator
import os
import threading
from typing import Any

import numpy as np

from . import _native
from . import fs as _fs
from ._typing import Features, Files, ParseFn, PathLike, Progress, StorageOptions
from .batch import locate_error
from .errors import (ArgumentTypeError, CorruptRecordError, DataLossError, InvalidArgumentError, TFRecordError,
                     TruncatedRecordError)
from .files import resolve_files
from .io import detect_compression
from .parsing import make_parse, unbatch
from .progress import progress as _progress
from .reader import DEFAULT_MAX_RECORD_BYTES, TFRecordReader

__all__ = ["index_path", "build_index", "read_index", "write_index", "scan_index", "load_index",
           "count_records", "count_shard", "TFRecordFile", "IndexedDataset"]

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
    """Write a sidecar atomically."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = _fs.open_output(index_file, storage_options)
    try:
        text = "".join(f"{o} {n}\n" for o, n in zip(offsets.tolist(), lengths.tolist()))
        out.file.write(text.encode("ascii"))
        out.commit()
    except BaseException:
        out.discard()
        raise


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


class TFRecordFile:
    """Random access to the records of one uncompressed TFRecord file.

    ``len(f)``, ``f[i]`` (negative too) -> bytes, ``f[a:b:c]`` -> list of bytes. Offsets come
    from index_file, else the sidecar (``path + '.index'``; none for an HTTP URL with a query
    string or an object version) when present, else from an in-memory scan. Fetched
    frames are read with ``os.pread`` and both CRCs checked (``check_crc=False`` skips the data
    CRC); ``index_file`` is the index read, None when the file was scanned. The descriptor
    opens on first read; the object pickles without it. For an fsspec URL (with
    ``storage_options``) each read is one ranged request instead.
    """

    def __init__(self, path: PathLike, index_file: PathLike | None = None, *, check_crc: bool = True,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, storage_options: StorageOptions = None) -> None:
        path = os.fspath(path)
        self.path = path if _fs.is_url(path) else _fs.local_path(path)
        self.storage_options = storage_options
        self.check_crc = bool(check_crc)
        self.max_record_bytes = int(max_record_bytes)
        self.index_file = _index_file(self.path, index_file, storage_options)  # None: scanned
        self.offsets, self.lengths = _load(self.path, self.index_file, self.check_crc, self.max_record_bytes,
                                           storage_options)
        self._fds = {}  # pid -> the descriptor opened in that process (a forked child opens its own)
        self._remote = None  # (fsspec filesystem, path in it), made on first remote read
        # A sidecar's frames tile the file; a record over the limit must still not make a
        # read allocate what its length claims (a scan raised the reader's error for it).
        biggest = int(self.lengths.max()) - OVERHEAD if len(self.lengths) else 0
        if biggest > self.max_record_bytes:
            raise TFRecordError(
                f"the index describes a record of {biggest} bytes but max_record_bytes is "
                f"{self.max_record_bytes}", path=self.path,
                hint="pass a larger max_record_bytes if the records are that large; otherwise the "
                "index is stale: rebuild it with tfrecord_lite.build_index")

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, key: Any) -> Any:
        n = len(self.offsets)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step == 1:
                return self.read_range(start, stop)
            return [self.read_range(i, i + 1)[0] for i in range(start, stop, step)]
        i = _position(key, n, self.path)
        return self.read_range(i, i + 1)[0]

    def _getitems(self, indices) -> list:
        """Records at indices (Grain's batched read)."""
        return [self[i] for i in indices]

    def __repr__(self):
        return f"TFRecordFile({self.path!r}, records={len(self)})"

    def read_range(self, start: int, stop: int) -> list:
        """Records start..stop-1 (contiguous, so one read)."""
        if stop <= start:
            return []
        begin, end = self.span(start, stop)
        return self.verify(self.pread(begin, end), start, stop)

    def span(self, start, stop):
        """Byte range [begin, end) of frames start..stop-1."""
        return int(self.offsets[start]), int(self.offsets[stop - 1] + self.lengths[stop - 1])

    def pread(self, begin, end) -> bytes:
        if _fs.is_url(self.path):
            if self._remote is None:
                self._remote = _fs.filesystem(self.path, self.storage_options)
            return _fs.read_range(*self._remote, begin, end, self.path)
        fd = self.fileno()
        data = os.pread(fd, end - begin, begin)
        while len(data) < end - begin:  # pread may return short reads; zero means EOF
            more = os.pread(fd, end - begin - len(data), begin + len(data))
            if not more:
                break
            data += more
        return data

    def verify(self, data: bytes, start: int, stop: int) -> list:
        """The records of frames start..stop-1 held in data, with their CRCs checked."""
        want = stop - start
        begin = int(self.offsets[start])
        records, pos, _, _ = _native.framing.scan_frames(data, 0, -1, self.check_crc, self.max_record_bytes, want)
        # Each frame must have its index entry's length, not only all of them together: a
        # sidecar whose entries cut the same bytes elsewhere would hand out other records.
        sizes = [len(r) + OVERHEAD for r in records]
        listed = self.lengths[start:start + len(sizes)].tolist()
        if sizes == listed and len(records) == want and pos == len(data):
            return records
        wrong = next((k for k, (got, said) in enumerate(zip(sizes, listed)) if got != said), None)
        index = start + (len(records) if wrong is None else wrong)
        offset = begin + pos if wrong is None else int(self.offsets[index])
        again = ("open it again" if self.index_file is None
                 else f"rebuild its index with {_rebuild(self.path, self.index_file)} and open it again")
        hint = (f"if {self.path} changed since it was opened, {again}; if not, it is damaged: check it "
                "with `tfrecord-lite verify`")
        size = sizes[wrong] if wrong is not None else self._frame_size(offset, index, hint)
        raise CorruptRecordError(f"corrupted record at {offset}: the frame there is {size} bytes but the index "
                                 f"says {int(self.lengths[index])}", path=self.path, offset=offset, index=index,
                                 hint=hint)

    def _frame_size(self, offset, index, hint) -> int:
        """The size of the frame at offset as the reader reads it; where it cannot, the
        reader's own error for it (class, offset and words), with hint."""
        reader = TFRecordReader(self.path, None, self.check_crc, max_record_bytes=self.max_record_bytes,
                                start_offset=offset, start_index=index, storage_options=self.storage_options)
        try:
            return len(next(iter(reader))) + OVERHEAD
        except TFRecordError as exc:
            raise type(exc)(exc.detail, **{**exc._keywords(), "hint": hint}) from None
        except StopIteration:  # the file now ends where the frame began
            end = offset + int(self.lengths[index])
            raise TruncatedRecordError(
                f"truncated record at {offset}: the file ends at byte {offset}, before the record's end at "
                f"byte {end}", path=self.path, offset=offset, index=index, hint=hint) from None
        finally:
            reader.close()

    def fileno(self) -> int:
        pid = os.getpid()
        fd = self._fds.get(pid)
        if fd is None:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            # Of threads that opened one at once, one keeps its descriptor and the others close
            # theirs: no lock, which a child forked while a thread held it would wait on forever.
            kept = self._fds.setdefault(pid, fd)
            if kept != fd:
                os.close(fd)
            fd = kept
        return fd

    def close(self) -> None:
        fd = self._fds.pop(os.getpid(), None)
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> TFRecordFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_fds"], state["_remote"] = {}, None
        return state


class IndexedDataset:
    """Map-style access to the records of many uncompressed files under one global index.

    ``ds[i]`` is a record (bytes), or one parsed example when ``features`` (or ``parse``) is
    given; ``ds[a:b]`` and ``ds[[i, j, ...]]`` give a list of records or one parsed batch.
    Indexes are read from sidecars (or scanned) up front; at most ``max_open_files``
    descriptors are held, least recently used closed first (fsspec URLs hold none: each read
    is one ranged request). Safe to share between threads. check_crc and max_record_bytes:
    as in TFRecordFile.
    """

    def __init__(self, files: Files, features: Features | None = None, *, parse: ParseFn | None = None,
                 check_crc: bool = True, max_open_files: int = 16, storage_options: StorageOptions = None,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        if features is not None and parse is not None:
            raise InvalidArgumentError("pass features or parse, not both")
        self.files = [TFRecordFile(p, check_crc=check_crc, max_record_bytes=max_record_bytes,
                                   storage_options=storage_options)
                      for p in resolve_files(files, storage_options)]
        self.features = features
        self.parse = parse
        self._parse_fn = make_parse(features, parse)
        self.max_open_files = max(1, int(max_open_files))
        self.cumulative = np.cumsum([len(f) for f in self.files], dtype=np.int64)
        self._open = collections.OrderedDict()  # file number -> TFRecordFile with an open fd
        self._busy = collections.Counter()  # file number -> reads in flight, whose fd stays open
        self._lock, self._lock_pid = threading.Lock(), os.getpid()

    def _guarded(self) -> threading.Lock:
        """The lock over _open and _busy. A forked child makes its own: a thread of the
        parent may have held it as the process forked, and the parent's reads are not its."""
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid, self._busy = threading.Lock(), os.getpid(), collections.Counter()
        return self._lock

    def __len__(self) -> int:
        return int(self.cumulative[-1]) if len(self.cumulative) else 0

    def locate(self, i: int):
        """(file number, record number in that file) of global record i."""
        i = _position(i, len(self), "<dataset>")
        k = int(np.searchsorted(self.cumulative, i, side="right"))
        return k, i - (int(self.cumulative[k - 1]) if k else 0)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            key = range(*key.indices(len(self)))
        elif _is_index(key):
            return self._getitems([key])[0]
        else:
            try:
                key = list(key)
            except TypeError:
                raise ArgumentTypeError(f"record indices must be an integer, a slice or a sequence of "
                                        f"integers, not {type(key).__name__}") from None
        records = self.records(key)
        if self._parse_fn is None:
            return records
        try:
            return self._parse_fn(records)
        except TFRecordError as exc:
            locate_error(exc, self._origins(key))
            raise

    def _getitems(self, indices) -> list:
        """One item (record or parsed example) per index, read with coalesced reads and
        parsed as one batch: Grain's batched read."""
        indices = list(indices)
        records = self.records(indices)
        if self._parse_fn is None:
            return records
        try:
            return unbatch(self._parse_fn(records), len(records), self._parse_fn, records)
        except TFRecordError as exc:
            locate_error(exc, self._origins(indices))
            raise

    def _origins(self, indices):
        """Position in a read of these indices -> (path, frame offset, index in the file)."""
        def origin(i):
            k, j = self.locate(indices[i])
            f = self.files[k]
            return f.path, int(f.offsets[j]), j
        return origin

    def __repr__(self):
        paths = [f.path for f in self.files]
        return f"IndexedDataset({paths!r}, features={self.features!r}, records={len(self)})"

    def records(self, indices) -> list:
        """Raw records at global indices, in that order; runs of consecutive records in one
        file are fetched with one read."""
        out = []
        run = None  # [file number, first, stop]
        for i in indices:
            k, j = self.locate(i)
            if run is not None and run[0] == k and run[2] == j:
                run[2] += 1
                continue
            if run is not None:
                out.extend(self._fetch(*run))
            run = [k, j, j + 1]
        if run is not None:
            out.extend(self._fetch(*run))
        return out

    def _fetch(self, k, start, stop):
        f = self.files[k]
        begin, end = f.span(start, stop)
        if f._remote is not None or _fs.is_url(f.path):  # no descriptor: reads run in parallel
            return f.verify(f.pread(begin, end), start, stop)
        with self._guarded():
            self._open[k] = f
            self._open.move_to_end(k)
            self._busy[k] += 1
            self._evict()
        try:  # outside the lock, so that threads read at once
            data = f.pread(begin, end)
        finally:
            with self._guarded():
                self._busy[k] -= 1
                self._evict()
        return f.verify(data, start, stop)

    def _evict(self) -> None:
        """Close the least recently used descriptors over max_open_files, except those
        under a read (they are closed after it, when still over)."""
        over = len(self._open) - self.max_open_files
        if over > 0:
            for k in [k for k in self._open if not self._busy[k]][:over]:
                self._open.pop(k).close()

    def close(self) -> None:
        with self._guarded():
            for f in self._open.values():
                f.close()
            self._open.clear()

    def __enter__(self) -> IndexedDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_open"] = collections.OrderedDict()
        state["_busy"] = collections.Counter()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock, self._lock_pid = threading.Lock(), os.getpid()


def _is_index(key) -> bool:
    """Whether key is one integer: an int, a NumPy integer or a 0-d integer array."""
    try:
        operator.index(key)
    except TypeError:
        return False
    return True


def _position(key, n, path):
    try:
        i = operator.index(key)  # an integer: not a float or a string that int() would take
    except TypeError:
        raise ArgumentTypeError(f"record indices must be integers or slices, not {type(key).__name__}") from None
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"{path}: record index {key} out of range for {n} records")
    return i
