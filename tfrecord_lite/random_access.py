"""Random access to uncompressed TFRecord files through their index sidecars
(``tfrecord_lite.index``): ``TFRecordFile`` (one file: len, [i], slices) and
``IndexedDataset`` (many files, one global index) read frames with ``os.pread`` at indexed offsets, never scanning, and
verify the CRCs of every frame they return. fsspec URLs work everywhere here (with
``storage_options``): sidecars are read and written beside the remote file, and a random
read is one ranged request. Both are Grain random-access data sources
(``__len__``, thread-safe ``__getitem__``, ``_getitems`` for batched reads, picklable, and a
``__repr__`` that names the data, which Grain's checkpoints compare).
"""

from __future__ import annotations

import collections
import collections.abc
import operator
import os
import threading
import zlib
from typing import Any

import numpy as np

from . import _native
from . import fs as _fs
from ._typing import Features, Files, ParseFn, PathLike, StorageOptions
from .batch import locate_error
from .errors import (ArgumentTypeError, CorruptRecordError, InvalidArgumentError, TFRecordError, TruncatedRecordError,
                     positive_int)
from .files import resolve_files
from .index import OVERHEAD, _index_file, _load, _rebuild, read_index
from .parsing import make_parse, unbatch
from .reader import DEFAULT_MAX_RECORD_BYTES, TFRecordReader, check_max_record_bytes

__all__ = ["TFRecordFile", "IndexedDataset"]


class TFRecordFile:
    """Random access to the records of one uncompressed TFRecord file.

    ``len(f)``, ``f[i]`` (negative too) -> bytes, ``f[a:b:c]`` and ``f[[i, j, ...]]`` -> list of
    bytes, each run of consecutive records read at once. Offsets come from index_file, else
    the sidecar (``path + '.index'``; none for an HTTP URL with a query string or an object
    version) when present, else from an in-memory scan. Fetched frames are read with
    ``os.pread`` and both CRCs checked (``check_crc=False`` skips the data CRC);
    ``index_file`` is the index read, None when the file was scanned. The descriptor opens on
    first read; the object pickles without it, and without an index read from a file, which
    is read again (and must be the same) where it is unpickled. For an fsspec URL (with
    ``storage_options``) each read is one ranged request instead.
    """

    def __init__(self, path: PathLike, index_file: PathLike | None = None, *, check_crc: bool = True,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, storage_options: StorageOptions = None) -> None:
        path = os.fsdecode(path)  # a bytes path as str, which the sidecar's name is made from
        self.path = path if _fs.is_url(path) else _fs.local_path(path)
        self.storage_options = storage_options
        self.check_crc = bool(check_crc)
        self.max_record_bytes = check_max_record_bytes(max_record_bytes)
        index_file = os.fsdecode(index_file) if isinstance(index_file, bytes) else index_file
        self.index_file = _index_file(self.path, index_file, storage_options)  # None: scanned
        # Opened (and the index read again once unpickled) at these, so that a chdir, or a
        # worker started in another directory, reads the same file; path stays as given.
        self._file = _absolute(self.path)
        self._index_at = None if self.index_file is None else _absolute(self.index_file)
        self.offsets, self.lengths = _load(self.path, self.index_file, self.check_crc, self.max_record_bytes,
                                           storage_options)
        self._fds = {}  # pid -> the descriptor opened in that process (a forked child opens its own)
        self._remote = None  # (fsspec filesystem, path in it), made on first remote read
        self._reset_readers()
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
            return self._getitems(range(*key.indices(n)))
        if _is_index(key) or not hasattr(key, "__iter__"):
            i = _position(key, n, self.path)
            return self.read_range(i, i + 1)[0]
        return self._getitems(key)

    def _getitems(self, indices) -> list:
        """Records at indices, runs of consecutive ones read with one read (Grain's batched
        read, and ``f[[i, j, ...]]``)."""
        at = _positions(indices, len(self.offsets), self.path)
        return [r for a, b in _runs(at) for r in self.read_range(int(at[a]), int(at[b - 1]) + 1)]

    def __repr__(self):
        return f"TFRecordFile({self.path!r}, records={len(self)})"

    def read_range(self, start: int, stop: int) -> list:
        """Records start..stop-1 (contiguous, so one read); none when stop <= start."""
        n = len(self.offsets)
        try:
            start, stop = operator.index(start), operator.index(stop)
        except TypeError:
            raise ArgumentTypeError(f"read_range takes integers, not {type(start).__name__} and "
                                    f"{type(stop).__name__}") from None
        if not (0 <= start <= n and 0 <= stop <= n):  # NumPy would take a negative one from the end
            raise IndexError(f"{self.path}: records {start}..{stop - 1} out of range for {n} records")
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
        with self._guarded():
            self._readers += 1  # close() now leaves the descriptor to the last reader to close
        try:
            fd = self.fileno()
            data = os.pread(fd, end - begin, begin)
            while len(data) < end - begin:  # pread may return short reads; zero means EOF
                more = os.pread(fd, end - begin - len(data), begin + len(data))
                if not more:
                    break
                data += more
        finally:
            with self._guarded():
                self._readers -= 1
                if self._closing and not self._readers:
                    self._closing = False
                    self._close_fd()
        return data

    def _reset_readers(self) -> None:
        self._lock, self._lock_pid = threading.Lock(), os.getpid()
        self._readers = 0  # preads in flight in this process
        self._closing = False  # close() was called during one of them

    def _guarded(self) -> threading.Lock:
        """The lock over _readers and _closing. A forked child makes its own (a thread of
        the parent may have held it as the process forked; the parent's reads are not its)."""
        if self._lock_pid != os.getpid():
            self._reset_readers()
        return self._lock

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
        said = int(self.lengths[index])
        # Read again, the file holds the frame listed when it changed while it was read.
        found = f"the frame there is {size} bytes but the index says {said}"
        if size == said:
            found = (f"the bytes read there did not hold the {said}-byte frame the index lists, which the file "
                     "holds now: it changed while it was read")
            hint = f"read it again once nothing writes to {self.path}"
        raise CorruptRecordError(f"corrupted record at {offset}: {found}", path=self.path, offset=offset,
                                 index=index, hint=hint)

    def _frame_size(self, offset, index, hint) -> int:
        """The size of the frame at offset as the reader reads it; where it cannot, the
        reader's own error for it (class, offset and words), with hint."""
        reader = TFRecordReader(self._file, None, self.check_crc, max_record_bytes=self.max_record_bytes,
                                start_offset=offset, start_index=index, storage_options=self.storage_options)
        try:
            return len(next(iter(reader))) + OVERHEAD
        except TFRecordError as exc:
            raise type(exc)(exc.detail, **{**exc._keywords(), "path": self.path, "hint": hint}) from None
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
            fd = os.open(self._file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            # Of threads that opened one at once, one keeps its descriptor and the others close
            # theirs: no lock, which a child forked while a thread held it would wait on forever.
            kept = self._fds.setdefault(pid, fd)
            if kept != fd:
                os.close(fd)
            fd = kept
        return fd

    def close(self) -> None:
        """Close the descriptor; one that a read of another thread is using is closed when
        the last such read ends (closing it under the read failed it, or made it read
        whichever file got the number next). A later read opens it again."""
        with self._guarded():
            if self._readers:
                self._closing = True
            else:
                self._close_fd()

    def _close_fd(self) -> None:
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
        # An index read from a file is read again where this is unpickled, not carried (16
        # bytes a record, to each worker process); one from a scan is carried as its frame
        # lengths alone, 4 bytes each where they fit: the frames tile the file from byte 0.
        if self.index_file is not None and "_digest" not in self.__dict__:
            self._digest = _digest(self.offsets, self.lengths)
        state = self.__dict__.copy()
        state["_fds"], state["_remote"] = {}, None
        del state["_lock"]
        if self.index_file is not None:
            state.pop("offsets", None)
            state.pop("lengths", None)
        elif not len(self.offsets) or (self.offsets[0] == 0 and self.lengths.max() < 2**32):
            state["offsets"], state["lengths"] = None, self.lengths.astype(np.uint32)
        return state

    def __getattr__(self, name):
        # Only for attributes not set: the index of an unpickled TFRecordFile, read on first use.
        if name not in ("offsets", "lengths") or "_digest" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._reload()
        return self.__dict__[name]

    def _reload(self) -> None:
        again = "open the file again (make the dataset again) where it was pickled"
        try:
            offsets, lengths = read_index(self._index_at, storage_options=self.storage_options)
        except OSError as exc:
            raise TFRecordError(f"the index read when {self.path} was opened cannot be read again where it was "
                                f"unpickled ({exc})", path=os.fspath(self.index_file),
                                hint=f"make it readable there, or {again}") from None
        if _digest(offsets, lengths) != self._digest:
            raise TFRecordError(f"the index of {self.path} changed after it was opened and pickled: its records "
                                "would not be those its length and positions were taken from",
                                path=os.fspath(self.index_file), hint=again)
        self.offsets, self.lengths = offsets, lengths

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset_readers()
        if state.get("offsets", 0) is None:
            self.lengths = self.lengths.astype(np.int64)
            self.offsets = np.cumsum(self.lengths) - self.lengths


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
        self.max_open_files = positive_int("max_open_files", max_open_files)
        self.files = [TFRecordFile(p, check_crc=check_crc, max_record_bytes=max_record_bytes,
                                   storage_options=storage_options)
                      for p in resolve_files(files, storage_options)]
        self.features = features
        self.parse = parse
        self._parse_fn = make_parse(features, parse)
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
        i = _position(i, len(self), self._name)  # a bound method: named only on error
        k = int(np.searchsorted(self.cumulative, i, side="right"))
        return k, i - (int(self.cumulative[k - 1]) if k else 0)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            key = range(*key.indices(len(self)))
        elif _is_index(key):
            return self._getitems([key])[0]
        elif not hasattr(key, "__iter__"):  # an iterable goes to _positions as it is: an array is not walked
            raise ArgumentTypeError(f"record indices must be an integer, a slice or a sequence of "
                                    f"integers, not {type(key).__name__}")
        return self._items(key, unbatched=False)

    def _getitems(self, indices) -> list:
        """One item (record or parsed example) per index, read with coalesced reads and
        parsed as one batch: Grain's batched read."""
        return self._items(indices, unbatched=True)

    def _items(self, indices, unbatched: bool):
        """The records at indices, or their parse (one batch, or unbatched)."""
        at = _positions(indices, len(self), self._name)  # located once, in NumPy
        records = self.records(at)
        if self._parse_fn is None:
            return records
        try:
            parsed = self._parse_fn(records)
            return unbatch(parsed, len(records), self._parse_fn, records) if unbatched else parsed
        except TFRecordError as exc:
            locate_error(exc, self._origins(at))
            raise

    def _origins(self, indices):
        """Position in a read of these indices -> (path, frame offset, index in the file)."""
        def origin(i):
            k, j = self.locate(indices[i])
            f = self.files[k]
            return f.path, int(f.offsets[j]), j
        return origin

    def _name(self) -> str:
        """The files, for messages: all of a few, else the first and the last."""
        paths = [f.path for f in self.files]
        if len(paths) > 3:
            paths = [paths[0], f"... {len(paths) - 2} more ...", paths[-1]]
        return f"IndexedDataset of {len(self.files)} file{'s' * (len(self.files) != 1)} ({', '.join(paths)})"

    def __repr__(self):
        paths = [f.path for f in self.files]
        return f"IndexedDataset({paths!r}, features={self.features!r}, records={len(self)})"

    def records(self, indices) -> list:
        """Raw records at global indices, in that order; runs of consecutive records in one
        file are fetched with one read."""
        at = _positions(indices, len(self), self._name)
        if not len(at):
            return []
        k = np.searchsorted(self.cumulative, at, side="right")  # file numbers
        j = at - np.concatenate(([0], self.cumulative[:-1]))[k]  # record numbers in them
        out = []
        for a, b in _runs(at, k[1:] != k[:-1]):  # a run ends where a file does
            out.extend(self._fetch(int(k[a]), int(j[a]), int(j[b - 1]) + 1))
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
                if k not in self._open and not self._busy[k]:
                    f.close()  # close() ran meanwhile: the descriptor this read opened is not kept
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
        """Close the descriptors; those under reads of other threads close as the reads
        end (TFRecordFile.close). Reads after it open them again."""
        with self._guarded():
            for f in self.files:
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


def _digest(offsets, lengths) -> tuple:
    """What tells an index from another: contiguous frames are fixed by where the first
    starts and by their lengths."""
    return len(offsets), int(offsets[0]) if len(offsets) else 0, zlib.crc32(np.ascontiguousarray(lengths, np.int64))


def _runs(at, ends=None) -> list:
    """(first, stop) positions in at of each run of consecutive indices, a run also ending
    after each position where ends (one flag per neighbouring pair) is set."""
    cut = at[1:] != at[:-1] + 1
    if ends is not None:
        cut |= ends
    cuts = (np.flatnonzero(cut) + 1).tolist()
    return [(a, b) for a, b in zip([0, *cuts], [*cuts, len(at)]) if b > a]


def _absolute(path):
    """A local path (or ``file://`` URL) joined to the working directory, not normalized
    (``link/..`` is left to the kernel, as an open of the relative path would); a URL as it is."""
    if _fs.is_url(path):
        return path
    path = _fs.local_path(path)  # file:// too
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _is_index(key) -> bool:
    """Whether key is one integer: an int, a NumPy integer or a 0-d integer array."""
    try:
        operator.index(key)
    except TypeError:
        return False
    return True


def _positions(indices, n, name) -> np.ndarray:
    """Indices as int64, negative ones counted from the end, found in NumPy (a Python step
    per index made a slice of a million records take seconds); the first that is not an
    integer, or is out of range, raises as _position does."""
    if isinstance(indices, (str, bytes, bytearray, memoryview, collections.abc.Set, collections.abc.Mapping)):
        # Iterable, but no list of indices: characters, bytes as numbers, no order, keys.
        raise ArgumentTypeError(f"record indices must be a sequence or array of integers, not {type(indices).__name__}")
    try:
        at = (np.arange(indices.start, indices.stop, indices.step, dtype=np.int64)
              if isinstance(indices, range) else np.asarray(indices))
    except (ValueError, TypeError, OverflowError):  # ragged, not numbers, beyond int64
        at = None
    if at is not None and at.dtype.kind == "b":  # NumPy reads it as a mask, Python as 0s and 1s
        raise ArgumentTypeError("record indices must be integers, not booleans",
                                hint="to read the records a boolean mask selects, pass np.flatnonzero(mask)")
    if at is None or at.ndim != 1 or at.dtype.kind not in "iu" or (at.dtype.kind == "u" and (at >= n).any()):
        return np.array([_position(i, n, name) for i in indices], np.int64)
    at = at.astype(np.int64)
    wrong = (at < -n) | (at >= n)
    if wrong.any():
        _position(int(at[wrong.argmax()]), n, name)  # raises
    return np.where(at < 0, at + n, at)


def _position(key, n, name):
    try:
        i = operator.index(key)  # an integer: not a float or a string that int() would take
    except TypeError:
        raise ArgumentTypeError(f"record indices must be integers or slices, not {type(key).__name__}") from None
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"{name() if callable(name) else name}: record index {key} out of range for {n} records")
    return i
