"""Writing TFRecord files: framing (in the compiled core), buffering, TensorFlow-identical
GZIP/ZLIB, index sidecars written alongside, atomic commit under the final name (one file or
a group of shards), and thread safety.

Records are framed into one growing ``bytearray`` and handed to the file in large writes by
the core's ``FrameBuffer``, which also formats the index lines as it frames: this module
opens, commits and discards the files around it.
"""

from __future__ import annotations

import os
import stat
import warnings
import zlib
from typing import Iterable

from . import _native
from . import fs as _fs
from ._typing import BinaryIO, Buffer, Compression, PathLike, StorageOptions
from .errors import ArgumentTypeError, InvalidArgumentError, TFRecordError
from .io import AtomicFile, CommitOnExit, _fsync_dir, check_level, compressor, normalize_compression
from .batch import RecordBatch
from ._replaced import drop_kept, keep_replaced, put_back
from .index import index_path

__all__ = ["TFRecordWriter"]

FLUSH_BYTES = 1 << 20


class TFRecordWriter(CommitOnExit):
    """Write records (bytes-like) to a path, an fsspec URL (``s3://...``, with
    ``storage_options``) or a binary file object.

    compression: None/"" (raw), "gzip"/"GZIP" or "zlib"/"ZLIB", or a ``tf.io.TFRecordOptions``
    (its compression_type and compression_level); output is byte-identical to
    ``tf.io.TFRecordWriter`` with the same options. compression_level: 1 (fastest) to 9
    (smallest), None or -1 for deflate's default, 0 for none (stored blocks, which TensorFlow
    reads, though they split where zlib's buffers end, not where TF's do).
    atomic (paths only, default True): write to a temporary file in the same directory and
    rename it to ``path`` on a successful close; on an exception inside ``with`` (or
    ``abort()``), the temporary file is removed and nothing appears under ``path``. A process
    killed while writing leaves at most a hidden ``.<name>.<random>.tmp`` file beside ``path``,
    never a partial file under ``path``. URLs are atomic too: on S3 and GCS a multipart
    upload completed at close (aborted on error; a killed process leaves no object), on other
    filesystems a hidden temporary name moved into place at close.
    fsync: fsync the file (before the rename, for atomic paths) and its directory.
    index: True writes the sidecar ``path + ".index"`` (the format of ``tfrecord_lite.index``:
    one ``offset frame_length`` line per record) while writing; a path names the sidecar
    explicitly (needed for file objects, whose offsets count from where the writer started).
    The sidecar is written under a temporary name and committed at close, right after the
    data file. Committing an atomic file first removes any existing ``path + ".index"`` (with
    or without index=True), so a sidecar never describes a different file; if the sidecar's
    commit fails, close() removes the new file as well. A file object writing to a local
    regular file (stdout redirected to one) has that file's sidecar removed when the writer
    opens, as a non-atomic path has. Only uncompressed files can be indexed.

    One writer may be shared by threads: each ``write`` lands whole, and each ``write_many``
    lands contiguously.
    """

    def __init__(self, path_or_fileobj: PathLike | BinaryIO, compression: Compression = None, *,
                 atomic: bool = True, fsync: bool = False, index: bool | PathLike = False,
                 storage_options: StorageOptions = None, compression_level: int | None = None) -> None:
        compression, compression_level = _tf_options(compression, compression_level)
        self.compression = normalize_compression(compression)
        self._atomic = None
        self._renamed = False
        self._kept = []  # (name, hidden copy) of files the commit replaces, until it stands
        self._owned = False
        self._index = None
        self._index_path = None
        self._storage_options = storage_options
        if isinstance(path_or_fileobj, (str, os.PathLike)):
            self.path = os.fspath(path_or_fileobj)
        elif hasattr(path_or_fileobj, "write"):
            self.path = getattr(path_or_fileobj, "name", None) or "<stream>"
            if not isinstance(self.path, str):
                self.path = "<stream>"
        else:
            raise ArgumentTypeError(
                f"TFRecordWriter needs a path or a binary file object, not {type(path_or_fileobj).__name__}"
            )
        compression_level = check_level(compression_level, self.path)
        if index:
            check_index_compression(self.compression, compression, self.path)
            if index is True and not isinstance(path_or_fileobj, (str, os.PathLike)):
                raise InvalidArgumentError("index=True needs a path to put the sidecar beside; pass "
                                           "index='<sidecar path>' when writing to a file object", path=self.path)
            self._index_path = None if index is True else os.fspath(index)
            self._index = _fs.open_output(self._index_path or index_path(self.path), storage_options, fsync=fsync)
        try:
            if isinstance(path_or_fileobj, (str, os.PathLike)):
                if atomic and not _fs.is_special(self.path):  # /dev/null is written, never replaced
                    self._atomic = _fs.open_output(self.path, storage_options, fsync=fsync)
                    self._file = self._atomic.file
                else:
                    # The file changes from here on: a sidecar of its old records must go, or
                    # a rewrite of the same size would be counted and indexed by it.
                    for name in _old_sidecars(self.path, _link_target(self.path)):
                        self._unlink(name)
                    self._file = _fs.open_plain_output(self.path, storage_options)
                self._owned = True
            else:
                # A regular file (stdout redirected to one: tfrecord-lite cat a > b) changes from
                # here on too: the sidecar of its old records must go, as for a path.
                for name in _file_sidecars(path_or_fileobj):
                    self._unlink(name)
                self._file = path_or_fileobj
        except BaseException:
            if self._index is not None:
                self._index.discard()
            raise
        self._fsync = fsync
        self._z = compressor(self.compression, compression_level) if self.compression else None
        # Errors handing bytes to the file, which then misses some. A list, not the writer:
        # the core keeps the sink, and a reference back would keep an unclosed writer alive.
        self._failures = []
        self._write_out = _watched(_whole(self._file.write, self.path), self._failures)
        # The per-record path is one C call: the instance's write is the core's, which frames
        # into its buffer (and index lines) under its lock and drains to the file itself.
        sink = self._write_out if self._z is None else _deflating(self._z, self._write_out)
        # The sidecar's writes are watched too: one that failed may have left part of its
        # lines, and the core hands them all again on its next drain.
        index_sink = None if self._index is None else _watched(
            _whole(self._index.file.write, self._index_path or index_path(self.path)), self._failures)
        self._core = _native.framing.FrameBuffer(sink, FLUSH_BYTES, self.path, index_sink)
        self._lock = self._core
        self.write = self._core.write

    def write(self, record: Buffer) -> None:
        """Append one record (bytes, bytearray, memoryview or any contiguous buffer)."""
        self._core.write(record)  # instances call the core directly; see __init__

    # The buffer, the counts and the closed flag live in the core, beside its lock.
    _buf = property(lambda self: self._core.buf, lambda self, value: setattr(self._core, "buf", value))
    records_written = property(lambda self: self._core.records)
    closed = property(lambda self: self._core.closed, lambda self, value: setattr(self._core, "closed", value))

    def write_many(self, records: Iterable[Buffer]) -> None:
        """Append many records under one lock acquisition; they land contiguously. If one is
        not bytes-like, the ones before it are written and the error names its index. A
        ``framed`` RecordBatch (``encode_examples(..., as_batch=True)``, or read with CRC
        checks) has its frames copied verbatim."""
        with self._lock:
            self._core.check_open()
            if type(records) is RecordBatch:
                records.append_frames(self._core)
            else:
                self._core.write_many(records)

    def flush(self) -> None:
        """Hand buffered records to the file. A compressed stream is flushed as TensorFlow's
        writer flushes it (deflate's Z_PARTIAL_FLUSH: the records so far can be decompressed),
        so the bytes on disk stay identical to TF's."""
        with self._lock:
            self._core.check_open()
            self._core.drain()
            if self._z is not None:
                self._write_out(self._z.flush(zlib.Z_PARTIAL_FLUSH))
            if hasattr(self._file, "flush"):
                _watched(self._file.flush, self._failures)()

    def close(self) -> None:
        """Finish the stream and, for atomic paths, rename it (and its sidecar) into place.
        Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._finish()
                self._commit()
            except BaseException:
                # A failed close publishes nothing: a data file already renamed (or an object
                # already uploaded) goes too, as when a group fails, and what it replaced is back.
                self._discard()
                self._uncommit()
                raise
            self._release()

    def abort(self) -> None:
        """Stop without committing: an atomic file is removed, nothing lands under path."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._discard()

    def __del__(self):
        # Never commit from the garbage collector: it cannot tell a finished file from one
        # abandoned by an exception. Remove the temporary file and say so loudly. A file that
        # is not atomic already holds what was drained, under its own name: like a Python
        # file (and TensorFlow's writer), it gets the rest rather than losing it.
        try:
            was_open = not self.closed
            if was_open and self._atomic is None:
                warnings.warn(
                    f"TFRecordWriter({self.path!r}) was never closed, so its last records were "
                    "written out when it was garbage-collected; call close() or use it in a with block",
                    ResourceWarning, stacklevel=1,
                )
                self.close()
            self.closed = True  # a write() kept past the writer must fail, not buffer
            if was_open and self._atomic is not None:
                self._discard()
                warnings.warn(
                    f"TFRecordWriter({self.path!r}) was never closed, so its {self.records_written} "
                    "records were discarded; call close() or use it in a with block",
                    ResourceWarning, stacklevel=1,
                )
        except Exception:
            pass

    # -- internals shared with the sharded writer and ops ----------------------------

    def _write_frames(self, frames, count=None, lengths=None) -> None:
        """Append already framed, verified records verbatim (merge, split, workers that frame
        in parallel). lengths (their data lengths, int64) or else count, if known, save reading
        the frames' headers. frames may be a RecordBatch, whose records are framed anew unless
        it is ``framed``."""
        with self._lock:
            self._core.check_open()
            if type(frames) is RecordBatch:
                frames.append_frames(self._core)
            else:
                self._core.write_frames(frames, lengths, -1 if count is None else count)

    def _copy_raw(self, src, nbytes=None, count=0) -> int:
        """Append the next nbytes (default: the rest) of binary file src, known to be whole
        frames, without parsing them: copy_file_range where the kernel allows, else a
        buffered copy. Only for uncompressed output without an index; see _raw_copyable.
        count is the number of records in those bytes, if known. Returns the bytes copied."""
        with self._lock:
            self._core.check_open()
            if not self._raw_copyable():
                raise InvalidArgumentError(f"{self.path}: raw copies need uncompressed output without an index")
            self._core.drain()
            if hasattr(self._file, "flush"):
                # A buffered sink must not hold bytes that belong before these.
                _watched(self._file.flush, self._failures)()
            copied = _watched(_copy_file, self._failures)(src, self._file, nbytes)
            self._core.drained += copied
            self._core.records += count
            return copied

    def _park(self) -> None:
        """Finish a file that gets no more records and close its descriptors (the sidecar's
        too) until its group commits it: shards written one after another (split, rolling
        shards) then hold a descriptor or two at a time, not one per shard. Files that are not
        local temporary files stay open."""
        with self._lock:
            self._core.check_open()
            self._finish()
            for out in (self._atomic, self._index):
                if isinstance(out, AtomicFile):
                    if self._fsync:  # while the descriptor is there; commit() then syncs the directory
                        out.file.flush()
                        os.fsync(out.file.fileno())
                    out.file.close()

    def _raw_copyable(self) -> bool:
        return self._z is None and self._index is None

    @property
    def bytes_written(self) -> int:
        """Uncompressed stream bytes written so far, buffered ones included."""
        return self._core.drained + len(self._core.buf)

    def _finish(self):
        """Write everything that is still buffered; the file is complete but not committed."""
        if self._failures:
            failure = self._failures[0]
            raise TFRecordError(
                f"an earlier write to the file failed ({type(failure).__name__}: {failure}), so it misses "
                "data; it is not committed", path=self.path,
                hint="Fix the cause (free space, permissions, the connection) and write the file again",
            ) from failure
        self._core.drain()
        if self._z is not None:
            self._write_out(self._z.flush())
            self._z = None

    def _commit(self, path=None):
        """Put the finished file (and sidecar) under its final name; path overrides it."""
        if path is not None:
            self.path = self._core.path = os.fspath(path)
        if self._atomic is not None:
            self._atomic.path = _fs.local_path(self.path) if not _fs.is_url(self.path) else self.path
            # The old sidecar goes before the data is renamed, the new one comes after: readers
            # see the old pair, a file alone (they scan it) or the new pair, never a sidecar of
            # other data. The files replaced are kept (hard links; server-side copies on object
            # stores) until the commit stands: a failure, here or in a later shard of the group,
            # puts them back.
            if self._index is not None:
                self._index.path = self._index_path or index_path(self._atomic.path)
            target = getattr(self._atomic, "target", self.path)
            stale = _old_sidecars(self.path, target)
            self._kept = keep_replaced([target] + stale + ([self._index.path] if self._index is not None else []),
                                       self._storage_options)
            for name in stale:
                self._unlink(name)
            if self._index is not None:
                self._unlink(self._index.path)
            self._atomic.commit()
            self._renamed = True
        elif self._owned:
            # A device or a pipe (/dev/null, /dev/stdout) has nothing to sync: fsync fails there.
            synced = self._fsync and not _fs.is_url(self.path) and not _fs.is_special(self.path)
            if synced:
                self._file.flush()  # the file is buffered: its last bytes reach the OS first
                os.fsync(self._file.fileno())
            self._file.close()
            if synced:  # a file it created is durable once its directory entry is
                _fsync_dir(os.path.dirname(os.path.abspath(_fs.local_path(self.path))))
        elif hasattr(self._file, "flush"):
            self._file.flush()
        if self._index is not None:
            self._index.commit()

    def _uncommit(self):
        """Remove what _commit put in place (its sidecar failed, or a later shard of the same
        group did), and put back the files it replaced. The sidecar name goes first: it
        must not outlive the data it describes."""
        if self._renamed:
            if self._index is not None:
                self._unlink(self._index.path)
            self._unlink(getattr(self._atomic, "target", self.path))  # a symlink's target: what was written
        kept, self._kept = self._kept, []
        put_back(kept, self._storage_options)

    def _release(self):
        """The commit stands (alone, or with its whole group): drop the copies _uncommit
        would have put back."""
        kept, self._kept = self._kept, []
        drop_kept(kept, self._storage_options)

    def _unlink(self, path):
        _fs.remove(path, self._storage_options, name=self.path)

    def _discard(self):
        self._buf = bytearray()
        if self._atomic is not None:
            self._atomic.discard()
        elif self._owned:
            self._file.close()
        if self._index is not None:
            self._index.discard()


# tf.io.TFRecordOptions fields that change the compressed bytes in ways not supported here.
_TF_OPTIONS_UNSUPPORTED = ("flush_mode", "window_bits", "compression_method", "mem_level", "compression_strategy")


def _tf_options(compression, level):
    """(compression, level) from a tf.io.TFRecordOptions passed as compression (TensorFlow's
    writer takes one as its options); any other compression passes as it is."""
    if isinstance(compression, (str, type(None))) or not hasattr(compression, "compression_type"):
        return compression, level
    unsupported = [name for name in _TF_OPTIONS_UNSUPPORTED if getattr(compression, name, None) is not None]
    if unsupported:
        raise InvalidArgumentError(f"TFRecordOptions {', '.join(unsupported)} are not supported",
                                   hint="leave them unset (TensorFlow's defaults); only compression_type and "
                                   "compression_level are honoured")
    given = getattr(compression, "compression_level", None)
    if level is not None and given is not None and level != given:
        raise InvalidArgumentError(f"compression_level={level!r} contradicts the TFRecordOptions' {given!r}")
    return compression.compression_type, given if level is None else level


def _old_sidecars(path, target) -> list:
    """The sidecars that describe the file at path before it is replaced: beside path, and
    beside target, the file a symlink at path points to (written through, it changes too)."""
    return list(dict.fromkeys([index_path(path), index_path(target)]))


def _link_target(path) -> str:
    """The file a local symlink at path points to, else path."""
    if _fs.is_url(path):
        return path
    local = _fs.local_path(path)
    return os.path.realpath(local) if os.path.islink(local) else path


def _file_sidecars(fileobj) -> list:
    """The sidecars of the local regular file that fileobj writes to (see file_names)."""
    return list(dict.fromkeys(sidecar for name, path in file_names(fileobj) for sidecar in _old_sidecars(name, path)))


def file_names(fileobj) -> list:
    """(name, path) for each name of the local regular file that fileobj writes to, found by
    the object's name or its descriptor (/proc/self/fd on Linux, F_GETPATH on macOS), each
    checked to be that very file (path: the name with symlinks resolved); none when it is
    no such file (a pipe, a device, an in-memory stream)."""
    try:
        fd = fileobj.fileno()
        st = os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        return []
    if not stat.S_ISREG(st.st_mode):
        return []
    names = [getattr(fileobj, "name", None), f"/proc/self/fd/{fd}"]
    try:
        import fcntl
        names.append(os.fsdecode(fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024)).rstrip(b"\0")))
    except (ImportError, AttributeError, OSError):
        pass
    found = []
    for name in names:
        if isinstance(name, str):
            path = os.path.realpath(name)
            try:
                if os.path.samestat(st, os.stat(path)):
                    found.append((path if name.startswith("/proc/") else name, path))
            except OSError:
                pass
    return found


def check_index_compression(normalized, compression, path) -> None:
    """Refuse an index of a compressed file (normalized: compression after
    normalize_compression; compression: as the caller passed it)."""
    if normalized:
        raise InvalidArgumentError(
            f"index=True needs an uncompressed file, but compression={compression!r}: "
            "records in a compressed stream have no byte offsets to index",
            path=path, hint="write it uncompressed, or drop index=True",
        )


def close_group(writers, paths=None) -> None:
    """Commit a group of writers all or nothing: every file is finished first, then renamed
    into place (under ``paths[i]`` if given). If anything fails, every writer is discarded
    and the files already renamed are removed again, so no member of the group remains."""
    finished, committed = [], []
    try:
        for w in writers:
            with w._lock:
                if w.closed:
                    raise TFRecordError(f"{w.path}: a shard writer was closed outside its group")
                w._finish()
                # Closed as it is finished: a record another thread writes before the commit
                # would be counted but never reach the file; it fails instead.
                w.closed = True
                finished.append(w)
        for i, w in enumerate(writers):
            with w._lock:
                committed.append(w)
                w._commit(None if paths is None else paths[i])
    except BaseException:
        for w in writers:
            if w in finished:
                w._discard()  # the temporary files of a half-done commit
            else:
                w.abort()
        for w in committed:
            w._uncommit()
        raise
    for w in writers:
        w._release()


def abort_group(writers) -> None:
    """Discard every writer of a group that is still open (nothing lands under their names)."""
    for w in writers:
        try:
            w.abort()
        except Exception:
            pass


def _watched(write, failures):
    """write, its errors appended to failures: a file may have taken part of the bytes (and a
    compressor has consumed them), so a later close must not commit the file."""
    def watched(*args):
        try:
            return write(*args)
        except BaseException as exc:
            failures.append(exc)
            raise
    return watched


def _whole(write, path):
    """write, made to hand over all it is given: a raw file may take only part (returning how
    much), and then gets the rest; one that takes none fails."""
    def write_all(data):
        taken = write(data)
        if isinstance(taken, int):
            view = memoryview(data).cast("B")
            while taken < len(view):
                if taken <= 0:
                    raise OSError(f"{path}: the output took none of the last {len(view)} bytes written to it")
                view = view[taken:]
                taken = write(view)
    return write_all


def _deflating(z, write):
    """A FrameBuffer sink that compresses frames on their way to write. Like TensorFlow's
    writer, deflate keeps its pending block until flush() or the stream's end."""
    def sink(frames):
        data = z.compress(frames)
        if data:
            write(data)
    return sink


def _copy_file(src, dst, nbytes=None) -> int:
    """Copy nbytes (default: the rest) of src into dst from their current positions;
    copy_file_range keeps the bytes in the kernel."""
    left = float("inf") if nbytes is None else nbytes
    total = 0
    if hasattr(os, "copy_file_range"):
        try:
            fin, fout = src.fileno(), dst.fileno()
            while left:
                n = os.copy_file_range(fin, fout, int(min(left, 1 << 30)))
                if n == 0:
                    break
                total += n
                left -= n
            return total
        except (OSError, AttributeError, ValueError):
            # Not regular files, across file systems, or an old kernel. The file positions
            # stand right after what was copied, so the plain copy carries on from there
            # (and re-raises a real error such as a full disk).
            pass
    while left:
        chunk = src.read(int(min(left, FLUSH_BYTES)))
        if not chunk:
            break
        dst.write(chunk)
        total += len(chunk)
        left -= len(chunk)
    return total


def _chunks(iterable, n):
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
