"""RecordBatch: records left in place in the blocks they were read or encoded into,
regrouped into batches without copies (slicing, ``+``, :func:`rebatch`,
:func:`join_records`), and where each record came from (its origin), so that an error
about the n-th record of a batch can name the record's file, byte offset and index.

Origins cost nothing while records flow: one small tuple per segment, carried along by
slicing and concatenation, looked up (``RecordBatch.locate``, ``locate_error``) only when
an error is raised.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _native
from .bytes_column import as_array
from .errors import ArgumentTypeError, InvalidArgumentError, TFRecordError

__all__ = ["RecordBatch", "BlockOrigin", "RecordOrigins", "rebatch", "join_records", "locate_error"]

_HEADER = _native.framing.HEADER_BYTES  # frame bytes before a record's data: length and its masked CRC
_FOOTER = _native.framing.FOOTER_BYTES


class BlockOrigin(NamedTuple):
    """The origin of a segment read as one block of one file: record ``j`` of the segment
    is record ``first + j * step`` of ``path``, and its frame starts at byte
    ``base + starts[j] - 12`` of the file (``base``: the file offset of the block's byte 0,
    ``starts``: the segment's data offsets in the block)."""

    path: str
    base: int
    first: int
    step: int = 1


class RecordOrigins(NamedTuple):
    """The origin of each record of a segment, for records gathered from several files:
    record ``j`` is record ``indices[j]`` of ``paths[path_ids[j]]``, its frame at byte
    ``offsets[j]`` of that file. The three arrays have one entry per record."""

    paths: Sequence[str]
    path_ids: Any  # integer array
    offsets: Any  # int64 array
    indices: Any  # int64 array


Origin = BlockOrigin | RecordOrigins | None
_NO_ORIGINS = itertools.repeat(None)


class RecordBatch(Sequence):
    """A sequence of records stored in place in frame blocks: ``segments`` is a list of
    ``(frames, starts, lengths)`` with int64 arrays locating each record's data in ``frames``.

    Indexing gives ``bytes``; ``np.asarray(batch)`` an object array of them (``to_numpy``);
    slicing (positive steps) and ``+`` give new RecordBatches that
    share the blocks, so batching records costs no copy and no object per record. The
    parsers read the records straight from the blocks.

    ``framed`` says that each record lies in its block inside its own TFRecord frame, both
    CRCs checked: true for batches the reader made with ``check_crc=True`` and for
    ``encode_examples(..., as_batch=True)``. Writers then copy such frames verbatim.

    ``origin`` (with frames, starts, lengths) or ``origins`` (with ``segments``, one per
    segment) say where the records came from: a :class:`BlockOrigin`, a
    :class:`RecordOrigins`, or None when unknown. :meth:`locate` answers for one record.

    A batch of ``TFRecordDataset`` whose records alternate between files (the interleave's
    default ``block_length=1``) holds them as index arrays over the read blocks, in any
    order, rather than one segment per record or a copy: its ``segments`` (one per run of
    records in one block) are only made if asked for.
    """

    __slots__ = ("_segments", "_origins", "_gathered", "framed", "_len")

    def __init__(self, frames=None, starts=None, lengths=None, *, segments=None, framed=False,
                 origin: Origin = None, origins: Sequence[Origin] | None = None):
        if segments is None:
            segments = [] if frames is None else [(frames, starts, lengths)]
            origins = None if origin is None else [origin]
        elif origin is not None:
            raise InvalidArgumentError("pass origins= (one per segment) with segments=, not origin=")
        segments = [(f, _positions(s, "starts"), _positions(n, "lengths")) for f, s, n in segments]
        for _, seg_starts, seg_lengths in segments:
            if len(seg_starts) != len(seg_lengths):
                raise InvalidArgumentError(f"a RecordBatch segment has {len(seg_starts)} starts and "
                                           f"{len(seg_lengths)} lengths: one of each per record")
        if origins is not None:
            if len(origins) != len(segments):
                raise InvalidArgumentError(f"{len(origins)} origins for {len(segments)} segments")
            for (_, seg_starts, _), o in zip(segments, origins):
                if type(o) is RecordOrigins and not len(o.path_ids) == len(o.offsets) == len(o.indices) \
                        == len(seg_starts):
                    raise InvalidArgumentError("RecordOrigins needs one path id, offset and index per record")
            kept = [(s, o) for s, o in zip(segments, origins) if len(s[1])]
            segments = [s for s, _ in kept]
            origins = [o for _, o in kept]
            if all(o is None for o in origins):
                origins = None
        self._segments = [s for s in segments if len(s[1])] if origins is None else segments
        self._origins = origins  # None: no record's origin is known (the common case costs nothing)
        self._gathered = None
        self.framed = bool(framed)
        self._len = sum(len(s[1]) for s in self._segments)

    @classmethod
    def _of_gathered(cls, gathered) -> RecordBatch:
        """The records of a ``_gather.Gathered`` (blocks, and per record its block, start and
        length), held as they are."""
        batch = cls.__new__(cls)
        batch._segments = batch._origins = None
        batch._gathered, batch.framed, batch._len = gathered, gathered.framed, len(gathered.which)
        return batch

    @property
    def segments(self) -> list:
        """``(frames, starts, lengths)`` per run of records in one block."""
        if self._segments is None:
            self._runs()
        return self._segments

    @property
    def origins(self) -> list | None:
        """The origin of each segment, or None when no record's origin is known."""
        if self._segments is None:
            self._runs()
        return self._origins

    def _runs(self) -> None:
        """Segments (and their origins) of a gathered batch: one per run of one block."""
        self._segments, self._origins = self._gathered.runs()

    def locate(self, i: int) -> tuple[str, int, int] | None:
        """``(path, frame offset, record index in that file)`` of record i, or None when
        its origin is unknown."""
        n, i = self._len, operator.index(i)
        if not -n <= i < n:
            raise IndexError(f"record index {i} is out of range for a RecordBatch of {n} records")
        if self._gathered is not None:
            return self._gathered.locate(i % n)
        if self.origins is None:
            return None
        i %= n
        for (_, starts, _), o in zip(self.segments, self.origins):
            if i < len(starts):
                if type(o) is BlockOrigin:
                    return o.path, o.base + int(starts[i]) - _HEADER, o.first + i * o.step
                if type(o) is RecordOrigins:
                    return str(o.paths[int(o.path_ids[i])]), int(o.offsets[i]), int(o.indices[i])
                return None
            i -= len(starts)
        return None

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            if i.step is not None and i.step < 0:
                return list(self)[i]
            if self._gathered is not None:
                return RecordBatch._of_gathered(self._gathered[i])
            return self._slice(*i.indices(self._len))
        n, i = self._len, operator.index(i)
        if not -n <= i < n:
            raise IndexError(f"record index {i} is out of range for a RecordBatch of {n} records")
        i %= n
        if self._gathered is not None:
            return self._gathered[i]
        for frames, starts, lengths in self.segments:
            if i < len(starts):
                if mapped(frames):
                    return self[i:i + 1].to_numpy()[0]
                start, n = int(starts[i]), int(lengths[i])
                with memoryview(frames) as view:
                    if start < 0 or n < 0 or start + n > view.nbytes:  # a slice would clip it silently
                        raise InvalidArgumentError(f"a RecordBatch record ({start}, {n}) lies outside its "
                                                   f"{view.nbytes}-byte block")
                    return bytes(view[start:start + n])
            i -= len(starts)

    def __iter__(self):
        return copied(self)

    def __copy__(self):  # sharing the blocks, as slicing does (__reduce__ would copy the records)
        return self[:]

    def __reduce__(self):
        # Only the records, framed anew into one buffer: a slice took its whole read block
        # along (1 MiB for one record), and a mapped file's batch the whole file.
        records = self.to_numpy().tolist()
        lengths = np.fromiter(map(len, records), np.int64, len(records))
        frames = bytes(_native.framing.encode_frames(records))
        starts = np.cumsum(lengths + (_HEADER + _FOOTER)) - lengths - _FOOTER
        if self.origins is None:
            return _rebuilt, ([(frames, starts, lengths)], None, self.framed)
        parts = [(_record_origins(o, s) if o is not None else None, len(s)) for (_, s, _), o in
                 zip(self.segments, self.origins)]
        if all(o is not None for o, _ in parts):  # one segment, its records' origins joined
            return _rebuilt, ([(frames, starts, lengths)], [_joined([o for o, _ in parts])], self.framed)
        bounds = np.cumsum([0] + [m for _, m in parts]).tolist()
        segments = [(frames, starts[lo:hi], lengths[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
        return _rebuilt, (segments, [o for o, _ in parts], self.framed)

    def to_numpy(self) -> np.ndarray:
        """The records as a 1-D object array of ``bytes``, made by the core."""
        from ._gather import Gathered  # it builds on this module

        g = Gathered.of(self)
        try:
            return _native.spans.split_records(g.buffers, g.which, g.starts, g.lengths)
        except TFRecordError as exc:  # a mapped file cut short: name the record
            raise locate_error(exc, self) from None

    def __array__(self, dtype=None, copy=None):
        # numpy's own conversion of a sequence of bytes makes an "S" array, which drops the
        # trailing NUL bytes of every record (an Example often ends in one).
        return as_array(self, dtype, copy)

    @property
    def nbytes(self) -> int:
        """Total bytes of the records' data."""
        if self._gathered is not None:
            return int(self._gathered.lengths.sum())
        return sum(int(lengths.sum()) for _, _, lengths in self.segments)

    def __add__(self, other):
        if isinstance(other, RecordBatch):
            return RecordBatch.concat((self, other))
        if isinstance(other, list):
            return list(self) + other
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, list):  # sum(batches, []) and list + batch give lists
            return other + list(self)
        return NotImplemented

    def __eq__(self, other):
        """Equal to a RecordBatch, list or tuple of the same records, as bytes."""
        if isinstance(other, (RecordBatch, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # equal to lists, and as unhashable as they are

    def _slice(self, start, stop, step):
        out, origins, base = [], [], 0
        known = self.origins or _NO_ORIGINS
        for (frames, starts, lengths), o in zip(self.segments, known):
            m = len(starts)
            lo = max(start, base)
            lo += (start - lo) % step  # the first index >= lo on the slice's grid
            if lo < min(stop, base + m):
                cut = slice(lo - base, min(stop, base + m) - base, step)
                out.append((frames, starts[cut], lengths[cut]))
                origins.append(None if o is None else _sliced(o, cut))
            base += m
            if base >= stop:
                break
        return RecordBatch._of(out, None if self.origins is None else origins, self.framed)

    @classmethod
    def concat(cls, parts):
        """One RecordBatch of several, in order."""
        if any(p._gathered is not None for p in parts):
            from ._gather import Gathered  # it builds on this module

            return cls._of_gathered(Gathered.join([Gathered.of(p) for p in parts]))
        segments = [s for p in parts for s in p.segments]
        origins = None
        if any(p.origins is not None for p in parts):
            origins = [o for p in parts for o in (p.origins or [None] * len(p.segments))]
        return cls._of(segments, origins, all(p.framed for p in parts))

    @classmethod
    def _of(cls, segments, origins, framed):
        """A batch of segments already checked (none empty, origins aligned or None): the
        constructor's checks are skipped where batches are regrouped, once per chunk."""
        batch = cls.__new__(cls)
        batch._segments, batch._origins, batch._gathered, batch.framed = segments, origins, None, framed
        batch._len = sum(len(s[1]) for s in segments)
        return batch

    def append_frames(self, out) -> None:
        """Append the records as TFRecord frames to out, a ``FrameBuffer`` whose lock the
        caller holds. A ``framed`` batch's frames that lie back to back in a block are copied
        verbatim; others are framed anew."""
        if self._gathered is not None:  # records in any order: no run of frames to copy
            out.write_many(self._gathered)
            return
        for frames, starts, lengths in self.segments:
            if self.framed and _native.spans.frames_tile(starts, lengths):
                end = int(starts[-1]) + int(lengths[-1]) + _FOOTER
                out.write_frames(memoryview(frames)[int(starts[0]) - _HEADER:end], lengths)
            else:
                out.write_many(RecordBatch(frames, starts, lengths))

    def __repr__(self):
        blocks = len(self.segments) if self._gathered is None else len(self._gathered.buffers)
        return f"RecordBatch({self._len} records in {blocks} blocks)"


def _positions(values, what):
    """starts or lengths as the int64 array the core reads (a list is taken as one)."""
    array = np.asarray(values)
    if array.dtype != np.int64:
        if array.ndim != 1 or array.size and array.dtype.kind not in "iu":
            raise ArgumentTypeError(f"a RecordBatch's {what} must be 1-D integers, not {array.dtype} "
                                    f"with shape {array.shape}")
        array = array.astype(np.int64)
    elif array.ndim != 1:
        raise ArgumentTypeError(f"a RecordBatch's {what} must be 1-D, not of shape {array.shape}")
    return array


def _rebuilt(segments, origins, framed) -> RecordBatch:
    """A pickled RecordBatch (RecordBatch.__reduce__)."""
    return RecordBatch(segments=segments, origins=origins, framed=framed)


def _record_origins(origin, starts) -> RecordOrigins:
    """The origin of each record of a segment (starts: its records' data offsets in its block)."""
    if type(origin) is RecordOrigins:
        return origin
    m = len(starts)
    return RecordOrigins([origin.path], np.zeros(m, np.int64), origin.base + starts - _HEADER,
                         origin.first + np.arange(m, dtype=np.int64) * origin.step)


def _joined(origins) -> RecordOrigins:
    """RecordOrigins of several segments as one, over one list of paths."""
    paths: dict = {}
    ids = [np.array([paths.setdefault(str(p), len(paths)) for p in o.paths], np.int64)[np.asarray(o.path_ids)]
           for o in origins]
    return RecordOrigins(list(paths), np.concatenate(ids), np.concatenate([o.offsets for o in origins]),
                         np.concatenate([o.indices for o in origins]))


def _sliced(origin, cut):
    """The origin of segment[cut] (cut: a slice with a positive step)."""
    if type(origin) is BlockOrigin:
        return BlockOrigin(origin.path, origin.base, origin.first + cut.start * origin.step, origin.step * cut.step)
    return RecordOrigins(origin.paths, origin.path_ids[cut], origin.offsets[cut], origin.indices[cut])


def mapped(block) -> bool:
    """Whether block is a file's mapping (memory_map): its records are copied out by the core,
    whose reads of it are guarded against the file being cut short (csrc/guard.h)."""
    return type(block) is _native.framing._MappedFile


_COPIED_RECORDS = 1024  # what copied() copies out at a time, at most
_COPIED_BYTES = 4 << 20


def copied(records):
    """The records of a RecordBatch or Gathered as bytes, copied out by the core about 4 MiB
    at a time (to_numpy): with no Python work per record (W2 records of a gathered batch:
    113-120 ns each, against 0.93-1.01 µs one by one), and guarded, so that a mapped file
    cut short raises TruncatedRecordError."""
    n = len(records)
    if not n:
        return
    # The record size from three lengths, not a sum: a numpy reduction of 500+ values releases
    # the GIL, and retaking it waits for a worker (as _pipeline._held_bytes says).
    lengths = (records.lengths if type(records) is not RecordBatch else records._gathered.lengths
               if records._gathered is not None else records.segments[0][2])
    size = (int(lengths[0]) + int(lengths[len(lengths) // 2]) + int(lengths[-1])) // 3
    step = max(1, min(_COPIED_RECORDS, _COPIED_BYTES // max(size, 1)))
    for start in range(0, n, step):
        part = records[start:start + step]
        yield from (part if type(part) is RecordBatch else RecordBatch._of_gathered(part)).to_numpy()


def locate_error(exc: TFRecordError, where) -> TFRecordError:
    """exc, an error raised while parsing a batch, made to name its record by its file,
    frame offset and index in that file instead of its position in the batch (kept in
    ``exc.batch_index``), when the batch knows them. where: the batch (one with a
    ``locate`` method, as RecordBatch has; a list knows nothing), or a callable from
    position to ``(path, offset, index)`` or None. Only errors that name a position (an
    ``index``, no ``path``) change. Called from ``except`` clauses, so nothing is looked up
    unless an error was raised::

        try:
            return parse(records)
        except TFRecordError as exc:
            locate_error(exc, records)
            raise
    """
    if exc.path is not None or exc.index is None:
        return exc
    if not callable(where):
        where = getattr(where, "locate", None)  # a RecordBatch, or a dataset's gathered records
        if where is None:
            return exc
    try:
        place = where(exc.index)
    except IndexError:
        return exc
    if place is not None:
        exc._relocate(*place)
    return exc


def parse_in_order(parse, records):
    """parse(records) (a batch parser), an error of it naming the batch's first bad record,
    as TensorFlow's parsers do, which check each record whole in turn: the core decodes
    every record before the spec's shape checks run, so an error at record k is checked
    against the records before it, and an earlier one wins. The error is then located
    (locate_error). Costs nothing unless an error was raised."""
    try:
        return parse(records)
    except TFRecordError as exc:
        first = exc
        while first.path is None and first.index:
            try:
                parse(records[:first.index])
                break
            except TFRecordError as earlier:
                if earlier.path is not None or earlier.index is None or earlier.index >= first.index:
                    break
                earlier.__suppress_context__ = True  # the later record's error is not its cause
                first = earlier
        raise locate_error(first, records)


def join_records(parts):
    """Chunks of records as one: a RecordBatch of RecordBatches, else a list."""
    if parts and all(type(p) is RecordBatch for p in parts):
        return RecordBatch.concat(parts)
    return list(itertools.chain.from_iterable(parts))


def rebatch(chunks, size, drop_remainder=False, join=join_records):
    """Chunks of records (lists or RecordBatches, or what ``join`` joins) regrouped into
    batches of ``size``, the last one shorter unless drop_remainder; chunks are sliced, never
    copied record by record. ``size`` may be a callable that gives each batch's size from
    the first chunk it takes records of."""
    size_of = size if callable(size) else None
    if size_of is None:
        _check_size(size)
    parts, have = [], 0
    for chunk in chunks:
        if not len(chunk):
            continue
        if size_of is not None and not have:
            size = _check_size(size_of(chunk))
        parts.append(chunk)
        have += len(chunk)
        while have >= size:
            last = parts[-1]
            extra = have - size  # records of the last chunk that go to the next batch
            if extra:
                parts[-1] = last[:len(last) - extra]
            yield join(parts)
            parts, have = ([last[len(last) - extra:]] if extra else []), extra
            if size_of is not None and have:
                size = _check_size(size_of(parts[0]))
    if parts and not drop_remainder:
        yield join(parts)


def _check_size(size):
    """size, a batch size: one below 1 would make empty batches forever."""
    if size < 1:
        raise InvalidArgumentError(f"a batch size must be a positive integer, not {size!r}")
    return size
