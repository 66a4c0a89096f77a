"""Files, streams and compression: opening sources and sinks, detecting and undoing
GZIP/ZLIB, and writing files atomically under their final name.

GZIP and ZLIB wrap the whole TFRecord stream (not single records). Deflate parameters
match TensorFlow's ``ZlibCompressionOptions`` defaults (level -1, window 15 bits, memLevel 9,
default strategy), so compressed output is byte-identical to ``tf.io.TFRecordWriter``.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import stat
import tempfile
import zlib
from typing import TypeVar

from .errors import (CorruptRecordError, DataLossError, InvalidArgumentError, NotTFRecordError,
                     TruncatedRecordError, as_integer)

__all__ = ["normalize_compression", "detect_compression", "check_tfrecord", "AtomicFile", "CommitOnExit",
           "make_parents", "check_output_name"]

# TensorFlow's ZlibCompressionOptions defaults.
_LEVEL = zlib.Z_DEFAULT_COMPRESSION
_MEM_LEVEL = 9
_WBITS = {"zlib": zlib.MAX_WBITS, "gzip": zlib.MAX_WBITS + 16}

_T = TypeVar("_T")

_NAMES = {
    None: None, "": None, "none": None, "NONE": None,
    "gzip": "gzip", "GZIP": "gzip",
    "zlib": "zlib", "ZLIB": "zlib",
}


def normalize_compression(compression, allow_auto: bool = False):
    """Map TF's and our spellings to None, "gzip" or "zlib" (and "auto" when allowed)."""
    if allow_auto and compression == "auto":
        return "auto"
    try:
        return _NAMES[compression]
    except (KeyError, TypeError):
        allowed = "None, '', 'gzip', 'zlib', 'GZIP', 'ZLIB'" + (", 'auto'" if allow_auto else "")
        raise InvalidArgumentError(f"unknown compression {compression!r}; use one of {allowed}") from None


def detect_compression(head: bytes):
    """Guess the compression of a stream from its first bytes (12 or more unless it is shorter).

    A valid TFRecord header (its length CRC verifies) wins, since a raw file's first length
    bytes can look like a zlib header; then the gzip magic; then a zlib header."""
    from . import _native

    header = _native.framing.HEADER_BYTES
    if len(head) >= header and _native.framing.find_header(head, 0, header) == 0:
        return None
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return None


def compression_mismatch(head: bytes, compression):
    """A hint when head (a stream's first bytes) shows another compression than the one a
    caller named, or None: read with the wrong compression=, a file looks damaged at byte 0."""
    from . import _native

    seen = detect_compression(head)
    if seen == compression:
        return None
    if seen is None:
        header = _native.framing.HEADER_BYTES
        if len(head) < header or _native.framing.find_header(head, 0, header) != 0:
            return None  # neither compressed nor a TFRecord header: damage, or another format
        what, fix = "like an uncompressed TFRecord file", "None"
    else:
        what, fix = f"{seen}-compressed", repr(seen)
    return (f"The file looks {what}, but compression={compression!r} was given: pass "
            f"compression={fix}, or 'auto' to detect it")


# Formats a mistaken input often has, by their first bytes.
_MAGIC = (
    (b"PAR1", "a Parquet file"),
    (b"ARROW1", "an Arrow IPC file"),
    (b"Obj\x01", "an Avro file"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"PK\x03\x04", "a ZIP archive (or .npz, .whl, .xlsx)"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"RIFF", "a RIFF file (WAV audio, WebP image, AVI video)"),
    (b"%PDF", "a PDF document"),
    (b"\x7fELF", "an ELF executable or library"),
    (b"BZh", "bzip2-compressed data (decompress it first)"),
    (b"\xfd7zXZ\x00", "xz-compressed data (decompress it first)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data (decompress it first)"),
    (b"\x1f\x8b", "gzip-compressed data"),
)
SNIFF_BYTES = 1 << 16  # a TFRecord file has a valid record header within this many bytes


def describe_head(head: bytes, cut: bool | None = None):
    """What a stream that is not TFRecord looks like, from its first bytes (cut: whether they
    may end inside a character; by default when they are all SNIFF_BYTES); None when it is
    no format known here (nor text)."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    text = head.decode("utf-8", errors="replace")
    if len(head) >= SNIFF_BYTES if cut is None else cut:
        text = text[:-3] + text[-3:].rstrip("\ufffd")  # a character cut in two
    if text and "\ufffd" not in text and all(c.isprintable() or c in "\t\r\n\f" for c in text):
        return f"text (starting {text.lstrip().split(chr(10), 1)[0][:40]!r})"
    return None


def head_hint(head: bytes, compression):
    """The hint for an error at byte 0 of a stream whose first bytes are head, read with
    compression (as given, "auto" included): compression= looks wrong, or the stream is
    uncompressed and looks like text or another format; None otherwise (damage)."""
    from . import _native

    if compression != "auto":
        mismatch = compression_mismatch(head, compression)
        if mismatch:
            return mismatch
    if (compression if compression != "auto" else detect_compression(head)) is not None:
        return None  # what decompresses is checked as it is read
    header = _native.framing.HEADER_BYTES
    if len(head) >= header and _native.framing.find_header(head, 0, header) == 0:
        return None
    what = describe_head(head, cut=True)
    return None if what is None else (f"It looks like {what}, not a TFRecord file: check that this is the file "
                                      "you meant (only TFRecord files, optionally gzip or zlib compressed, can be read)")


def check_tfrecord(f, path, compression="auto", *, first_header: bool = False) -> None:
    """Raise NotTFRecordError when the binary file object f (read from its start and left
    there) does not start with a valid TFRecord header and its first bytes, decompressed
    first when compression (or "auto" detection) says so, are text or a known other format.
    Anything else, damaged TFRecord files included, passes: the reader reports the damage.

    first_header=True also refuses an uncompressed stream whose first record header (length and
    its masked CRC) is damaged or cut short, with the reader's error for record 0: a plain
    byte copy reads nothing else. An empty file is an empty TFRecord file."""
    from . import _native

    raw = f.read(SNIFF_BYTES)
    f.seek(0)
    header = _native.framing.HEADER_BYTES
    mismatch = compression != "auto" and compression_mismatch(raw[:header], compression)
    if mismatch:
        raise NotTFRecordError(f"not {'a ' + compression + '-compressed' if compression else 'an uncompressed'} "
                               "TFRecord file", path=path, hint=mismatch)
    if compression == "auto":
        compression = detect_compression(raw[:header])
    head = raw
    if compression is not None and raw:
        try:
            head = zlib.decompressobj(_WBITS[compression]).decompress(raw, SNIFF_BYTES)
        except zlib.error:
            return  # a damaged compressed stream: the reader reports it
    if not head or (len(head) >= header and _native.framing.find_header(head, 0, header) == 0):
        return
    what = describe_head(head)
    if what is None:
        if first_header and compression is None:
            _check_first_header(head, path)
        return
    inside = f"its {compression}-decompressed content looks like" if compression else "it looks like"
    raise NotTFRecordError(f"not a TFRecord file: {inside} {what}", path=path,
                           hint="Check that this is the file you meant: only TFRecord files "
                           "(optionally gzip or zlib compressed) can be read")


def _check_first_header(head: bytes, path) -> None:
    from . import _native

    size = _native.framing.HEADER_BYTES
    if len(head) < size:
        raise TruncatedRecordError(f"truncated record at 0: the file ends inside the first record's header "
                                   f"({len(head)} of its {size} bytes)", path=path, offset=0, index=0,
                                   hint="The file was cut short or is not a TFRecord file")
    raise CorruptRecordError("corrupted record at 0: the masked CRC32C of the length field does not match",
                             path=path, offset=0, index=0,
                             hint="The file is damaged or not a TFRecord file; check that it is the "
                             "file you meant")


def compressor(compression, level=None):
    """A zlib compressobj producing TensorFlow's exact GZIP/ZLIB output at level (None: TF's
    default, -1; else 0 to 9, see check_level)."""
    return zlib.compressobj(_LEVEL if level is None else level, zlib.DEFLATED, _WBITS[compression], _MEM_LEVEL,
                            zlib.Z_DEFAULT_STRATEGY)


def check_level(level, path=None):
    """level as an int, or None; refuse one deflate cannot take (TensorFlow's writer aborts
    the whole process on one)."""
    if level is None:
        return None
    value = as_integer(level)
    if value is None or not -1 <= value <= 9:
        raise InvalidArgumentError(f"compression_level={level!r} is not a deflate level", path=path,
                                   hint="use an int from 0 (no compression) to 9 (smallest), or -1 or None "
                                   "for the default (6)")
    return value


class DecompressingStream:
    """readinto() over a compressed file object, decompressing at most len(view) bytes at a
    time so output memory stays bounded. Concatenated gzip members are read in sequence."""

    def __init__(self, raw, compression, prefix: bytes = b"", path=None, read_size: int = 1 << 18):
        self._raw = raw
        self._wbits = _WBITS[compression]
        self._compression = compression
        self._d = zlib.decompressobj(self._wbits)
        self._pending = prefix  # compressed bytes not yet fed
        self._path = path
        self._read_size = read_size
        self._raw_eof = False
        self._seen_input = bool(prefix)
        self._ended = False  # a zlib stream's end marker was read: any byte after it is an error

    def readinto(self, view) -> int:
        n = len(view)
        while True:
            if self._d.unconsumed_tail:
                data, self._pending = self._d.unconsumed_tail + self._pending, b""
            else:
                data, self._pending = self._pending, b""
            if not data and not self._raw_eof:
                data = self._raw.read(self._read_size)
                if not data:
                    self._raw_eof = True
                else:
                    self._seen_input = True
            if not data:
                # inflate stops at n bytes of output and may still hold some: deliver every
                # byte the input decodes to before reporting the truncation.
                out = self._d.decompress(b"", n) if self._seen_input and not self._d.eof else b""
                if out:
                    view[: len(out)] = out
                    return len(out)
                if not self._d.eof and self._seen_input:
                    raise DataLossError(
                        f"the {self._compression} stream ends before its end marker", path=self._path,
                        hint="the compressed file is truncated; re-create or re-download it",
                    )
                return 0
            if self._ended:
                raise DataLossError(
                    "trailing bytes after the end of the zlib stream", path=self._path,
                    hint="the file holds more than one zlib stream, or bytes were appended to it "
                    "(TensorFlow reads the first stream and ignores the rest)",
                )
            saved = self._d.copy()  # inflate's error loses the call's output: to decode it again
            try:
                out = self._d.decompress(data, n)
            except zlib.error as exc:
                out = self._before_error(saved, data, n)
                if not out:
                    raise DataLossError(
                        f"corrupt {self._compression} stream ({exc})", path=self._path,
                        hint="the compressed file is damaged; offsets in TFRecord errors count decompressed bytes",
                    ) from None
            if self._d.eof:
                # Bytes after the end marker: a next gzip member, or (the next call says so, once
                # this output is delivered) what a zlib stream must not have.
                self._pending = self._d.unused_data + self._pending
                if self._compression == "zlib":
                    self._ended = True
                else:
                    self._d = zlib.decompressobj(self._wbits)
                    self._seen_input = bool(self._pending)
            if out:
                view[: len(out)] = out
                return len(out)

    def _before_error(self, saved, data, n: int) -> bytes:
        """What inflate makes of data before the error it found there (at most n bytes),
        from saved (its state before data), in pieces ever smaller near the error: every
        record that decompresses whole comes before the error, whatever the read sizes. The
        stream goes on after that output; the next call meets the error again."""
        d, parts, have, pos, step = saved, [], 0, 0, 1 << 12
        while pos < len(data) and have < n and not d.eof:
            trial, piece = d.copy(), data[pos:pos + step]
            try:
                got = trial.decompress(piece, n - have)
            except zlib.error:
                if step == 1:
                    break
                step //= 8
                continue
            pos += len(piece) - len(trial.unconsumed_tail)
            d, have = trial, have + len(got)
            parts.append(got)
        self._d, self._pending = d, data[pos:]
        return b"".join(parts)


class CommitOnExit:
    """Context manager protocol for sinks: ``close()`` (commit) when the block succeeds,
    ``abort()`` (discard) when it raises, so an exception never publishes partial output."""

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def make_parents(path) -> None:
    """Create the missing directories above an output path."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        try:
            os.makedirs(directory, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file stands where a directory must
            while not os.path.exists(directory):
                directory = os.path.dirname(directory)
            raise NotADirectoryError(errno.ENOTDIR, f"{directory} is a file, not a directory, "
                                     "so the output cannot go under it", os.fspath(path)) from None


def check_output_name(path: str, url: bool = False, example: str = "out.tfrecord") -> None:
    """Refuse an output path that names a directory (an existing one, or any path ending
    with a separator; for a URL, one ending with "/") before anything is written: the rename
    at commit would fail with a misleading message, and only after all the data was written;
    an object store would store the data under the name without its "/". example: the file
    name suggested in the directory."""
    seps = ("/",) if url else (os.sep, os.altsep) if os.altsep else (os.sep,)
    if path.endswith(seps) or (not url and os.path.isdir(path)):
        example = (posixpath if url else os.path).join(path, example)
        raise IsADirectoryError(errno.EISDIR, f"names a directory, not a file: give the output a file name, "
                                f"such as {example}", path)


def _named(exc: OSError, path: str) -> OSError:
    """The same OS error naming the user's path instead of a temporary file."""
    return type(exc)(exc.errno, exc.strerror, path)


class NamedWriter(io.BufferedWriter):
    """A buffered binary file whose OS errors while writing (a full disk, a quota) name
    name() (the user's path, looked up when the error happens) instead of no file at all."""

    def __init__(self, raw, name):
        super().__init__(raw)
        self._name = name

    def write(self, data):
        try:
            return super().write(data)
        except OSError as exc:
            raise _named(exc, self._name()) from None

    def flush(self):
        try:
            super().flush()
        except OSError as exc:
            raise _named(exc, self._name()) from None


class AtomicFile:
    """A binary file written under a temporary name in the destination's directory and
    renamed over the final name by commit(); discard() removes it. Readers never see a
    half-written file under the final name. Missing directories above it are created, and
    OS errors name the final path, never the temporary one."""

    def __init__(self, path, fsync: bool = False):
        self.path = os.fspath(path)
        check_output_name(self.path)
        target = self.target
        make_parents(target)
        try:
            fd, self.temp_path = tempfile.mkstemp(
                prefix=f".{_temp_stem(os.path.basename(target))}.", suffix=".tmp",
                dir=os.path.dirname(os.path.abspath(target)),
            )
        except OSError as exc:
            raise _named(exc, self.path) from None
        # Buffered: its write takes everything or raises (a raw file may take part). Writes
        # of a buffer's size or more pass straight through.
        self.file = NamedWriter(io.FileIO(fd, "wb"), lambda: self.path)
        self._fsync = fsync

    @property
    def target(self) -> str:
        """Where commit() puts the file: path, or the file that a symlink at path points to
        (written through, as open() does; renaming over the link would leave its target stale)."""
        return os.path.realpath(self.path) if os.path.islink(self.path) else self.path

    def commit(self) -> None:
        target = self.target
        try:
            if self._fsync and not self.file.closed:  # closed early: synced by whoever closed it
                self.file.flush()
                os.fsync(self.file.fileno())
            self.file.close()
            os.chmod(self.temp_path, _mode_for(target))
            os.replace(self.temp_path, target)
        except OSError as exc:
            self.discard()
            raise _named(exc, self.path) from None
        except BaseException:
            self.discard()
            raise
        if self._fsync:
            _fsync_dir(os.path.dirname(os.path.abspath(target)))

    def discard(self) -> None:
        # Bytes still buffered belong to the file being removed: closing the descriptor first
        # drops them unwritten (a full disk failed that write, hid the error that led here and
        # left the temporary file).
        self.file.raw.close()
        self.file.close()
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass


_TEMP_STEM_BYTES = 200  # the temporary name adds 14 bytes; file names end at 255 (NAME_MAX)


def _temp_stem(name: str) -> str:
    """name, cut to _TEMP_STEM_BYTES when encoded, for the temporary file's name: any name
    that may be written directly must have a temporary name that fits as well."""
    while len(os.fsencode(name)) > _TEMP_STEM_BYTES:
        name = name[:-1]
    return name


def _mode_for(target: str) -> int:
    """The permissions of the file that replaces target: target's own when it exists (as a
    write in place keeps them: a private file stays private), else what open() gives."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_UMASK


def _read_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before threads start.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
