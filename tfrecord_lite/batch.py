"""RecordBatch: records left in place in the blocks they were read or encoded into,
regrouped into batches without copies (slicing, ``+``, :func:`rebatch`,
:func:`join_records`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _native

__all__ = ["RecordBatch", "rebatch", "join_records"]


class RecordBatch(Sequence):
    """A sequence of records stored in place in frame blocks: ``segments`` is a list of
    ``(frames, starts, lengths)`` with int64 arrays locating each record's data in ``frames``.

    Indexing gives ``bytes``; slicing (positive steps) and ``+`` give new RecordBatches that
    share the blocks, so batching records costs no copy and no object per record. The
    parsers read the records straight from the blocks.

    ``framed`` says that each record lies in its block inside its own TFRecord frame, both
    CRCs checked: true for batches the reader made with ``check_crc=True`` and for
    ``encode_examples(..., as_batch=True)``. Writers then copy such frames verbatim.
    """

    __slots__ = ("segments", "framed", "_len")

    def __init__(self, frames=None, starts=None, lengths=None, *, segments=None, framed=False):
        if segments is None:
            segments = [] if frames is None else [(frames, starts, lengths)]
        self.segments = [s for s in segments if len(s[1])]
        self.framed = bool(framed)
        self._len = sum(len(s[1]) for s in self.segments)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            if i.step is not None and i.step < 0:
                return list(self)[i]
            return self._slice(*i.indices(self._len))
        n, i = self._len, operator.index(i)
        if not -n <= i < n:
            raise IndexError("record index out of range")
        i %= n
        for frames, starts, lengths in self.segments:
            if i < len(starts):
                start = int(starts[i])
                return bytes(memoryview(frames)[start:start + int(lengths[i])])
            i -= len(starts)

    def __iter__(self):
        for frames, starts, lengths in self.segments:
            view = memoryview(frames)
            for start, length in zip(starts.tolist(), lengths.tolist()):
                yield bytes(view[start:start + length])

    @property
    def nbytes(self) -> int:
        """Total bytes of the records' data."""
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
        out, base = [], 0
        for frames, starts, lengths in self.segments:
            m = len(starts)
            lo = max(start, base)
            lo += (start - lo) % step  # the first index >= lo on the slice's grid
            if lo < min(stop, base + m):
                cut = slice(lo - base, min(stop, base + m) - base, step)
                out.append((frames, starts[cut], lengths[cut]))
            base += m
            if base >= stop:
                break
        return RecordBatch(segments=out, framed=self.framed)

    @classmethod
    def concat(cls, parts):
        """One RecordBatch of several, in order."""
        return cls(segments=[s for p in parts for s in p.segments], framed=all(p.framed for p in parts))

    def append_frames(self, out: bytearray) -> None:
        """Append the records to out as TFRecord frames. A ``framed`` batch's frames that
        lie back to back in a block are copied verbatim; others are framed anew."""
        for frames, starts, lengths in self.segments:
            ends = starts + lengths + 4  # each frame's end: its data, then the 4-byte CRC
            if self.framed and np.array_equal(starts[1:], ends[:-1] + 12):  # header follows
                out += memoryview(frames)[int(starts[0]) - 12:int(ends[-1])]
            else:
                _native.framing.encode_frames(RecordBatch(frames, starts, lengths), out)

    def __repr__(self):
        return f"RecordBatch({self._len} records in {len(self.segments)} blocks)"


def join_records(parts):
    """Chunks of records as one: a RecordBatch of RecordBatches, else a list."""
    if parts and all(type(p) is RecordBatch for p in parts):
        return RecordBatch.concat(parts)
    return list(itertools.chain.from_iterable(parts))


def rebatch(chunks, size, drop_remainder=False, join=join_records):
    """Chunks of records (lists or RecordBatches, or what ``join`` joins) regrouped into
    batches of ``size``, the last one shorter unless drop_remainder; chunks are sliced, never
    copied record by record."""
    parts, have = [], 0
    for chunk in chunks:
        if not len(chunk):
            continue
        parts.append(chunk)
        have += len(chunk)
        while have >= size:
            last = parts[-1]
            extra = have - size  # records of the last chunk that go to the next batch
            if extra:
                parts[-1] = last[:len(last) - extra]
            yield join(parts)
            parts, have = ([last[len(last) - extra:]] if extra else []), extra
    if parts and not drop_remainder:
        yield join(parts)
