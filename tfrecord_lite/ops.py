"""Whole-file operations that move records without decoding them: merge and split.

Frames are copied verbatim (length, data and both CRCs as stored), never re-encoded. Only
the compression wrapper may change: inputs are decompressed and the output compressed as
asked. Outputs are committed atomically (split: all shards or none).
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Iterable

from . import _native
from . import fs as _fs
from ._typing import BinaryIO, Compression, PathLike, Progress, StorageOptions
from .errors import InvalidArgumentError, TFRecordError, positive_int
from .index import scan_index
from .io import check_tfrecord, detect_compression, normalize_compression
from .progress import progress as _progress
from .reader import DEFAULT_MAX_RECORD_BYTES, TFRecordReader, check_max_record_bytes
from .sharded import DEFAULT_SUFFIX, ShardInfo, check_shard_index, shard_path, writer_options
from .writer import TFRecordWriter, abort_group, close_group

__all__ = ["merge", "split", "tracked_blocks"]

_EXTENSIONS = (".gz", ".zz", ".zlib", ".tfrecord", ".tfrecords", ".tfr")
_WALK_BYTES = 1 << 16  # a read of _walk_headers: frames longer than this are jumped over


def merge(inputs: PathLike | Iterable[PathLike], output: PathLike | BinaryIO, *, compression: Compression = None,
          input_compression: Compression = "auto", verify: bool = False, index: bool = False,
          fsync: bool = False, progress: Progress = None, storage_options: StorageOptions = None,
          on_corrupt: str = "raise", max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
          compression_level: int | None = None, check_headers: bool = True) -> ShardInfo:
    """Concatenate the records of ``inputs`` (paths, in order) into ``output`` (a path, or a
    binary file object such as ``sys.stdout.buffer``); return ShardInfo(output, records).
    Inputs and output may be fsspec URLs (``s3://...``, with ``storage_options``), local and
    remote mixed.

    compression (with compression_level, as in TFRecordWriter) is the output's; each input's
    is detected (or set by input_compression).
    Every record header (length and its CRC) of every input is checked, and each input must
    end where its last record does: a truncated or damaged input never yields a corrupt
    output. A local uncompressed input going to uncompressed output with verify=False and
    no index has its headers walked first (reading it once, with no copy made), then its
    bytes copied in the kernel (``os.copy_file_range`` where possible); otherwise frames are
    streamed through, checked the same way (and their data CRCs with verify=True).
    check_headers=False skips the walk: such inputs are copied as plain bytes after only
    their first record header is checked (a damaged or truncated one is copied as it is),
    and ``records`` is None. Corruption raises a DataLossError naming the input, record and
    offset, and nothing appears under ``output``.
    index=True writes ``output + ".index"`` as well (uncompressed output only).
    on_corrupt: as in TFRecordReader; "skip" or "stop" copies the good records of damaged
    inputs (frames are then streamed, never byte-copied, and only with verify=True are records
    whose data is damaged found).
    max_record_bytes: as in TFRecordReader, where frames are streamed.
    progress: a bool (see tfrecord_lite.progress) or an open bar to advance by the bytes read.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(p) for p in inputs]
    input_compression = normalize_compression(input_compression, allow_auto=True)
    max_record_bytes = check_max_record_bytes(max_record_bytes)  # the header walk scans with it directly
    # A pipe has no size to show progress against: the bar then counts bytes read.
    total = None if any(map(_fs.is_special, inputs)) else sum(_fs.size(p, storage_options) for p in inputs)
    counted = True
    options = writer_options(compression, compression_level, index=index, fsync=fsync,
                             storage_options=storage_options)
    _refuse_output(output, inputs)  # before the writer: opening one on a file removes its sidecar
    bar = progress if hasattr(progress, "update") else _progress(total, desc="merge", enabled=progress, unit="B")
    with (contextlib.nullcontext() if bar is progress else bar), TFRecordWriter(output, **options) as w:
        for path in inputs:
            counted &= _append(w, path, input_compression, verify, bar, storage_options, on_corrupt,
                               max_record_bytes, check_headers)
    return ShardInfo(w.path, w.records_written if counted else None)


def _append(writer, path, compression, verify, bar, storage_options, on_corrupt, max_record_bytes,
            check_headers) -> bool:
    """Copy one input's frames to writer; False if they were copied without being counted."""
    with _fs.open_input(path, storage_options) as f:
        if f.seekable():  # a pipe can be read only once: the reader checks it and detects compression
            check_tfrecord(f, path, compression, first_header=on_corrupt == "raise")  # all a plain copy checks
            if compression == "auto":
                compression = detect_compression(f.read(_native.framing.HEADER_BYTES))
                f.seek(0)
            if compression is None and on_corrupt == "raise" and not verify and writer._raw_copyable():
                if not check_headers:
                    bar.update(writer._copy_raw(f))
                    return False
                if not _fs.is_url(path):  # a remote input is streamed: read once, not twice
                    count, end = _walk_headers(f, path, bar, max_record_bytes)
                    if writer._copy_raw(f, end, count) != end or f.read(1):
                        raise _changed(path, f"its {count} records ended at byte {end} when their headers "
                                       "were checked", merging=True)
                    return True
        with TFRecordReader(f, compression, check_crc=verify, on_corrupt=on_corrupt,
                            max_record_bytes=max_record_bytes) as r:
            r.path = path  # errors name the input as given (a URL, not fsspec's key)
            for frames, _, lengths in tracked_blocks(r, bar):
                writer._write_frames(frames, lengths=lengths)
    return True


def _walk_headers(f, path, bar, max_record_bytes):
    """(records, end of the last) of the local uncompressed input f, every header (length and
    its CRC, max_record_bytes) checked and the file found to end where its last record does.
    Only what holds headers is read: a record longer than a read is jumped over, never
    buffered. A problem found is reported by the reader started at that frame, with its
    error naming the record and offset. f is left at its start."""
    F = _native.framing
    fd = f.fileno()
    size = os.fstat(fd).st_size
    buf = bytearray(_WALK_BYTES)
    at = count = 0  # the next frame's offset, and its index
    while at < size:
        f.seek(at)
        n = f.readinto(buf)
        starts, _, pos, status, value = F.scan_spans(buf, 0, n, False, max_record_bytes)
        count += len(starts)
        rest = n - pos  # the bytes of an unfinished frame at pos
        if not n or status != F.FRAME_OK or (
                rest and (at + n + value > size if rest >= F.HEADER_BYTES else at + n >= size)):
            at += pos
            break  # a damaged header, or a frame the file ends inside (or a file cut meanwhile)
        if rest >= F.HEADER_BYTES:  # a frame longer than the read: its header checked, its data jumped over
            count += 1
            pos = n + value
        bar.update(pos)
        at += pos
    f.seek(0)
    if at != size:
        with TFRecordReader(f, None, check_crc=False, max_record_bytes=max_record_bytes, start_offset=at,
                            start_index=count) as r:
            r.path = path
            next(r.record_spans(), None)  # raises the reader's error for that frame
        raise _changed(path, f"its frame at byte {at} changed while it was read", merging=True)
    return count, at


def _refuse_output(output, inputs) -> None:
    """Refuse an input that is the output file itself (``cat a >> a``, as GNU cat does): the
    copy would read back what it appends and never end. All inputs are checked before
    anything is copied (or any sidecar removed): the output of ``cat b a >> a`` must not get
    b's records first. A path output is written to a temporary file, so merge may still name
    one of its inputs as its output."""
    try:
        dst = os.fstat(output.fileno())
    except (AttributeError, OSError, ValueError):  # a path, or a file object without a descriptor
        return
    if not stat.S_ISREG(dst.st_mode):
        return
    for path in inputs:
        try:
            if _fs.is_url(path):
                continue
            src = os.stat(_fs.local_path(path))  # as open() finds it: through symlinks, /dev/stdin too
        except (OSError, ValueError):  # missing: opening it says so
            continue
        if (src.st_dev, src.st_ino) == (dst.st_dev, dst.st_ino):
            raise InvalidArgumentError("input file is output file", path=path,
                                       hint="write to another file (merge -o may name one of its inputs: "
                                       "it replaces it when complete); nothing was written")


def tracked_blocks(reader, bar, blocks=None):
    """blocks (by default reader.frame_blocks()), advancing a bytes progress bar by the
    reader's input consumed."""
    done = 0
    for block in reader.frame_blocks() if blocks is None else blocks:
        yield block
        at = reader.input_offset
        if at is not None:
            bar.update(at - done)
            done = at
    at = reader.input_offset
    if at is not None:
        bar.update(max(at - done, 0))


def split(input: PathLike, num_shards: int, prefix: PathLike | None = None, *, suffix: str = DEFAULT_SUFFIX,
          compression: Compression = None, input_compression: Compression = "auto", verify: bool = False,
          index: bool = False, fsync: bool = False, progress: Progress = None,
          storage_options: StorageOptions = None, on_corrupt: str = "raise",
          max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, compression_level: int | None = None) -> list[ShardInfo]:
    """Split ``input`` into ``num_shards`` files of contiguous records; return a ShardInfo
    per shard.

    Shard 0 gets the first records, shard 1 the next, and so on, so reading the shards in
    order gives the input's order back. Counts differ by at most one; the first
    ``records % num_shards`` shards get the extra record. Shards with no records are written
    empty. Names are ShardedWriter's: ``f"{prefix}-{i:05d}-of-{num_shards:05d}{suffix}"``;
    prefix defaults to the input path without its TFRecord/compression extensions; a prefix
    ending in ``/`` is a directory, where the shards get that name too. suffix
    stays ``.tfrecord`` whatever ``compression`` is (readers here detect compression from the
    bytes, and TensorFlow needs ``compression_type`` whatever the name); pass
    ``suffix=".tfrecord.gz"`` to mark gzip shards.

    The input is read twice (once to count, once to copy). compression (with
    compression_level, as in TFRecordWriter) is the outputs'; with
    uncompressed input and output, verify=False and no index, byte ranges are copied without
    being parsed a second time. verify=True checks every data CRC first; all shards are
    committed together, or none if anything fails. Shards are written one after another and
    closed as they fill, so any number of them fits under the open-file limit. The input and
    prefix may be fsspec URLs (with ``storage_options``).
    on_corrupt: as in merge; "skip" or "stop" splits the good records of a damaged input
    (frames are then streamed in both reads, and each dropped record is logged by both).
    max_record_bytes: as in TFRecordReader.
    """
    path = os.fspath(input)
    num_shards = positive_int("num_shards", num_shards)
    check_shard_index(index)
    if prefix is None:
        prefix = _strip_extensions(path)
    elif os.fspath(prefix).endswith(("/", os.sep)):  # a directory: the shards keep the input's name there
        prefix = os.fspath(prefix) + os.path.basename(_strip_extensions(path))
    input_compression = normalize_compression(input_compression, allow_auto=True)
    with _fs.open_input(path, storage_options) as f:
        check_tfrecord(f, path, input_compression)
        if input_compression == "auto":
            input_compression = detect_compression(f.read(_native.framing.HEADER_BYTES))
    options = writer_options(compression, compression_level, index=index, fsync=fsync,
                             storage_options=storage_options, path=path)
    out_compression = normalize_compression(options["compression"])

    ranges = input_compression is None and on_corrupt == "raise"  # a dropped record would break a range
    # The first read is as long as the copy (longer with verify): it has a bar of its own.
    with _progress(_fs.size(path, storage_options), desc="split: count", enabled=progress, unit="B") as bar:
        if ranges:
            offsets, lengths = scan_index(path, check_crc=verify, max_record_bytes=max_record_bytes,
                                          progress=bar, storage_options=storage_options)
            n = len(offsets)
        else:
            with TFRecordReader(path, input_compression, check_crc=verify, on_corrupt=on_corrupt,
                                max_record_bytes=max_record_bytes, storage_options=storage_options) as r:
                n = sum(len(offsets) for offsets, _ in tracked_blocks(r, bar, r.record_spans()))
    sizes = [n // num_shards + (i < n % num_shards) for i in range(num_shards)]
    writers = []

    def shard(i):
        """Shard i's writer, opened as the one before it is parked: shards are written one
        after another, so a thousand shards need no thousand descriptors."""
        while len(writers) <= i:
            if writers:
                writers[-1]._park()
            writers.append(TFRecordWriter(shard_path(prefix, len(writers), num_shards, suffix), **options))
        return writers[i]

    try:
        with _progress(n, desc="split", enabled=progress) as bar:
            if ranges and out_compression is None and not index:
                _split_ranges(path, shard, sizes, offsets, lengths, bar, storage_options)
            else:  # the second read drops what the first did: verified, and only then, alike
                _split_stream(path, input_compression, shard, sizes, bar, storage_options,
                              verify and on_corrupt != "raise", on_corrupt, max_record_bytes)
        shard(num_shards - 1)  # the empty shards at the end
        if [w.records_written for w in writers] != sizes:
            raise _changed(path, f"{n} records were counted but {sum(w.records_written for w in writers)} copied")
        close_group(writers)
    except BaseException:
        abort_group(writers)
        raise
    return [ShardInfo(w.path, w.records_written) for w in writers]


def _split_ranges(path, shard, sizes, offsets, lengths, bar, storage_options):
    with _fs.open_input(path, storage_options) as f:
        first = 0
        for i, size in enumerate(sizes):
            if size:
                start = int(offsets[first])
                end = int(offsets[first + size - 1] + lengths[first + size - 1])
                f.seek(start)
                if shard(i)._copy_raw(f, end - start, size) != end - start:
                    raise _changed(path, f"it ends before byte {end}, where record {first + size - 1} ends")
            first += size
            bar.update(size)
        f.seek(int(offsets[-1] + lengths[-1]) if len(offsets) else 0)
        if f.read(1):
            raise _changed(path, f"it has more than the {len(offsets)} records counted")


def _split_stream(path, compression, shard_writer, sizes, bar, storage_options, check_crc, on_corrupt,
                  max_record_bytes):
    """Deal the frame blocks out in order, cutting a block where a shard fills up."""
    shard, room = 0, sizes[0]
    with TFRecordReader(path, compression, check_crc, on_corrupt, max_record_bytes=max_record_bytes,
                        storage_options=storage_options) as r:
        for frames, starts, lengths in r.frame_blocks():
            start = done = 0  # byte and record where the block's next cut begins
            while done < len(starts):
                while not room:
                    shard += 1
                    if shard == len(sizes):
                        raise _changed(path, f"it has more than the {sum(sizes)} records counted")
                    room = sizes[shard]
                take = min(len(starts) - done, room)
                last = done + take - 1
                end = int(starts[last] + lengths[last]) + _native.framing.FOOTER_BYTES  # past its footer
                shard_writer(shard)._write_frames(memoryview(frames)[start:end], lengths=lengths[done:done + take])
                start, done, room = end, done + take, room - take
                bar.update(take)


def _changed(path, what, merging=False) -> TFRecordError:
    """The error for an input that changed between two reads of it (split's, or merge's
    header walk and copy)."""
    done, op, nothing = ("merged", "merge", "nothing was written") if merging else (
        "split", "split", "no shard was written")
    return TFRecordError(f"the input changed while it was {done}: {what}", path=path,
                         hint=f"{op} it again once nothing writes to it; {nothing}")


def _strip_extensions(path: str) -> str:
    stem = path
    while True:
        base, ext = os.path.splitext(stem)
        if ext.lower() not in _EXTENSIONS or not os.path.basename(base):
            return stem
        stem = base
