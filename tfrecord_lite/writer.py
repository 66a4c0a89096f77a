"""Writing TFRecord files: framing (in the compiled core), buffering, TensorFlow-identical
GZIP/ZLIB, atomic commit under the final name, and thread safety.

Records are framed into one growing ``bytearray`` and handed to the file in large writes.
"""

from __future__ import annotations

import os
import threading
import warnings

from . import _native
from .errors import TFRecordError
from .io import AtomicFile, compressor, normalize_compression

__all__ = ["TFRecordWriter"]

FLUSH_BYTES = 1 << 20


class TFRecordWriter:
    """Write records (bytes-like) to a path or a binary file object.

    compression: None/"" (raw), "gzip"/"GZIP" or "zlib"/"ZLIB"; output is byte-identical to
    ``tf.io.TFRecordWriter`` with the same option.
    atomic (paths only, default True): write to a temporary file in the same directory and
    rename it to ``path`` on a successful close; on an exception inside ``with`` (or
    ``abort()``), the temporary file is removed and nothing appears under ``path``.
    fsync: fsync the file (and directory) before the rename.

    One writer may be shared by threads: each ``write`` lands whole.
    """

    def __init__(self, path_or_fileobj, compression=None, *, atomic=True, fsync=False):
        self.compression = normalize_compression(compression)
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._atomic = None
        self._owned = False
        self.closed = False
        self.records_written = 0
        self._drained = 0
        if isinstance(path_or_fileobj, (str, os.PathLike)):
            self.path = os.fspath(path_or_fileobj)
            if atomic:
                self._atomic = AtomicFile(self.path, fsync=fsync)
                self._file = self._atomic.file
            else:
                self._file = open(self.path, "wb", buffering=0)
            self._owned = True
        elif hasattr(path_or_fileobj, "write"):
            self.path = getattr(path_or_fileobj, "name", None) or "<stream>"
            self._file = path_or_fileobj
        else:
            raise TFRecordError(
                f"TFRecordWriter needs a path or a binary file object, not {type(path_or_fileobj).__name__}"
            )
        self._fsync = fsync
        self._z = compressor(self.compression) if self.compression else None

    def write(self, record) -> None:
        """Append one record (bytes, bytearray, memoryview or any contiguous buffer)."""
        with self._lock:
            if self.closed:
                self._raise_closed()
            _native.framing.encode_frames((record,), self._buf)
            self.records_written += 1
            if len(self._buf) >= FLUSH_BYTES:
                self._drain()

    def write_many(self, records) -> None:
        """Append many records under one lock acquisition; they land contiguously."""
        with self._lock:
            if self.closed:
                self._raise_closed()
            for chunk in _chunks(records, 1024):
                _native.framing.encode_frames(chunk, self._buf)
                self.records_written += len(chunk)
                if len(self._buf) >= FLUSH_BYTES:
                    self._drain()

    @property
    def bytes_written(self) -> int:
        """Uncompressed stream bytes written so far, buffered ones included."""
        return self._drained + len(self._buf)

    def flush(self) -> None:
        """Hand buffered records to the file. Compressed streams, like TensorFlow's, keep
        deflate's pending block until close(), so the bytes on disk stay identical to TF's."""
        with self._lock:
            if self.closed:
                self._raise_closed()
            self._drain()
            if hasattr(self._file, "flush"):
                self._file.flush()

    def close(self) -> None:
        """Finish the stream and, for atomic paths, rename it into place. Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._drain()
                if self._z is not None:
                    self._file.write(self._z.flush())
                if self._atomic is not None:
                    self._atomic.commit()
                elif self._owned:
                    if self._fsync:
                        os.fsync(self._file.fileno())
                    self._file.close()
                elif hasattr(self._file, "flush"):
                    self._file.flush()
            except BaseException:
                if self._atomic is not None:
                    self._atomic.discard()
                raise

    def abort(self) -> None:
        """Stop without committing: an atomic file is removed, nothing lands under path."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._buf.clear()
            if self._atomic is not None:
                self._atomic.discard()
            elif self._owned:
                self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self):
        # Never commit from the garbage collector: it cannot tell a finished file from one
        # abandoned by an exception. Remove the temporary file and say so loudly.
        try:
            if not self.closed and self._atomic is not None:
                self._atomic.discard()
                warnings.warn(
                    f"TFRecordWriter({self.path!r}) was never closed, so its {self.records_written} "
                    "records were discarded; call close() or use it in a with block",
                    ResourceWarning, stacklevel=1,
                )
        except Exception:
            pass

    def _raise_closed(self):
        raise TFRecordError(f"{self.path}: write to a closed TFRecordWriter",
                            hint="open a new writer; close() has already committed this one")

    def _drain(self):
        if not self._buf:
            return
        data = self._z.compress(self._buf) if self._z is not None else self._buf
        if data:
            self._file.write(data)
        self._drained += len(self._buf)
        self._buf = bytearray()


def _chunks(iterable, n):
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
