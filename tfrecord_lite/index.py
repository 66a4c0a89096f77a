"""Index sidecars: where each record of an uncompressed TFRecord file starts.

Format (shared with the ``tfrecord`` package's ``create_index`` and DALI's ``tfrecord2idx``,
so their indexes work here and ours work there): one text line per record,
``<frame offset> <frame length>``, where the frame length includes the 16 bytes of
header and footer. The sidecar of ``data.tfrecord`` is ``data.tfrecord.index``.

Compressed files have no stable record offsets, so indexing them raises an error that says
how to get an indexable file.
"""

from __future__ import annotations

import os

import numpy as np

from . import _native
from .errors import CorruptRecordError, TFRecordError, TruncatedRecordError
from .io import AtomicFile, detect_compression
from .reader import DEFAULT_MAX_RECORD_BYTES

__all__ = ["index_path", "build_index", "read_index", "write_index", "scan_index"]

OVERHEAD = 16  # frame bytes around the data


def index_path(path) -> str:
    """The sidecar path for a TFRecord file."""
    return os.fspath(path) + ".index"


def scan_index(path, *, check_crc=True, max_record_bytes=DEFAULT_MAX_RECORD_BYTES):
    """(offsets, frame_lengths) as int64 arrays for an uncompressed TFRecord file, computed
    by scanning it (mmap, no record copies). Corruption raises a DataLossError."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        import mmap

        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if detect_compression(mm[:12]) is not None:
                raise TFRecordError(
                    "compressed TFRecord files cannot be indexed: records have no fixed byte offsets",
                    path=path,
                    hint="decompress it first (tfrecord-lite cat FILE > plain.tfrecord) or write "
                    "it uncompressed",
                )
            spans, pos, status, value = _native.framing.scan_spans(mm, 0, -1, check_crc, max_record_bytes)
    F = _native.framing
    if status != F.FRAME_OK or pos != size:
        index = len(spans)
        if status == F.FRAME_OK:
            raise TruncatedRecordError(
                f"truncated record at {pos}: the file ends inside it", path=path, offset=pos, index=index,
                hint="the file was cut short; it cannot be indexed until it is repaired",
            )
        raise CorruptRecordError(
            f"corrupted record at {pos} (scan outcome {status})", path=path, offset=pos, index=index,
            hint="verify the file with `tfrecord-lite verify`; it cannot be indexed while damaged",
        )
    arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0] - (OVERHEAD - 4), arr[:, 1] + OVERHEAD


def write_index(index_file, offsets, lengths) -> None:
    """Write a sidecar atomically."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = AtomicFile(index_file)
    try:
        text = "".join(f"{o} {n}\n" for o, n in zip(offsets.tolist(), lengths.tolist()))
        out.file.write(text.encode("ascii"))
        out.commit()
    except BaseException:
        out.discard()
        raise


def build_index(path, index_file=None, *, check_crc=True) -> str:
    """Scan path and write its sidecar (default ``path + '.index'``); returns the sidecar path."""
    index_file = index_file or index_path(path)
    offsets, lengths = scan_index(path, check_crc=check_crc)
    write_index(index_file, offsets, lengths)
    return index_file


def read_index(index_file):
    """(offsets, frame_lengths) int64 arrays from a sidecar; malformed sidecars raise."""
    index_file = os.fspath(index_file)
    with open(index_file, "rb") as f:
        data = f.read()
    try:
        arr = np.array(data.split(), dtype=np.int64)
    except ValueError:
        raise TFRecordError("index sidecar is not 'offset length' lines of integers", path=index_file,
                            hint="rebuild it with tfrecord_lite.build_index") from None
    if arr.size % 2:
        raise TFRecordError("index sidecar has an odd number of fields", path=index_file,
                            hint="rebuild it with tfrecord_lite.build_index")
    arr = arr.reshape(-1, 2)
    offsets, lengths = arr[:, 0].copy(), arr[:, 1].copy()
    if len(offsets) and (
        offsets[0] < 0 or (lengths < OVERHEAD).any() or (offsets[1:] != offsets[:-1] + lengths[:-1]).any()
    ):
        raise TFRecordError("index sidecar entries are not contiguous frames", path=index_file,
                            hint="rebuild it with tfrecord_lite.build_index")
    return offsets, lengths
