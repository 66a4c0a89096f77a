"""Records of several read pieces in an interleave's output order, held as index arrays.

The interleave of ``TFRecordDataset`` alternates between files ``block_length`` records at
a time, and by default that is one record: handled one Python object per record, the
consumer's thread (which holds the GIL) became the bottleneck, and more threads made it
slower. ``Gathered`` keeps a batch in the making as the buffers its records lie in plus,
per record, which buffer, where and how long. Slicing, joining and interleaving whole rounds
of blocks are a few NumPy operations on those arrays, whatever the number of records.

``shuffle`` is TensorFlow's shuffle buffer on the same arrays (or on an object array of
the records, for the paths that hand out ``bytes``).

The core's decoders read a Gathered's records where they lie, in any order. For raw
output, ``to_batch()`` makes it a RecordBatch without a copy: of the buffers' own runs
when the records come in long runs, else holding the Gathered as it is.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import _native
from .batch import BlockOrigin, RecordBatch, RecordOrigins, copied, mapped
from .batch import _sliced as sliced_origin

__all__ = ["Gathered", "object_array", "shuffle"]

_EMPTY = np.empty(0, np.int64)
# to_batch() lists a batch's runs as segments when they average at least this many records
# (a segment costs a tuple and three array views); shorter runs stay index arrays. They were
# copied into one new block before: a W2 pass took 40% more CPU at 2 threads than at 1, and
# large records, kept as a segment each, cost a Python tuple and origin apiece.
_RUN_MIN = 64
_BLOCKS_MAX = 64  # blocks a join may list before those without records are dropped
_SHUFFLE_STEP = 4096  # records a shuffle buffer takes in at a time


class Gathered:
    __slots__ = ("buffers", "which", "starts", "lengths", "framed", "places", "index")

    def __init__(self, buffers, which, starts, lengths, framed, places=None, index=None):
        self.buffers = buffers  # list of blocks (bytes-likes)
        self.which = which      # int64 per record: its block in buffers
        self.starts = starts    # int64 per record: where its data starts in that block
        self.lengths = lengths  # int64 per record: its data length
        self.framed = framed    # every record sits in a checked frame of its block
        # Where the records came from, when known: per block (file path, file offset of its
        # byte 0), and per record its index in its file (see batch.BlockOrigin).
        self.places = places
        self.index = index

    @classmethod
    def of(cls, batch: RecordBatch) -> Gathered:
        """The records of a RecordBatch (or an empty list), in order."""
        gathered = getattr(batch, "_gathered", None)
        if gathered is not None:
            return gathered
        segments = getattr(batch, "segments", ())
        if not segments:
            return cls([], _EMPTY, _EMPTY, _EMPTY, False)
        origins = batch.origins
        if origins is None or not all(type(o) is BlockOrigin for o in origins):
            origins = [None] * len(segments)
        return cls.joined([(*s, o) for s, o in zip(segments, origins)], batch.framed)

    @classmethod
    def joined(cls, runs, framed) -> Gathered:
        """Runs of records one after the other: per run (block, its records' data starts,
        their lengths, its BlockOrigin or None), the records' origins kept where every run's
        is known. One core pass writes the index arrays: NumPy's concatenations and aranges
        each released and retook the GIL, and retaking it waits behind the workers."""
        known = all(r[3] is not None for r in runs)
        which, starts, lengths, index = _native.spans.join_runs(
            [r[1] for r in runs], [r[2] for r in runs],
            [r[3].first if known else 0 for r in runs], [r[3].step if known else 0 for r in runs])
        return cls([r[0] for r in runs], which, starts, lengths, framed,
                   [(r[3].path, r[3].base) for r in runs] if known else None, index if known else None)

    def __len__(self) -> int:
        return len(self.which)

    def __getitem__(self, i):
        """A slice: a Gathered of those records; an index: that record's bytes (as a
        RecordBatch gives them: the parsers take a Gathered as a sequence of records)."""
        if isinstance(i, slice):
            return self._pick(i)
        b, start = int(self.which[i]), int(self.starts[i])
        if mapped(self.buffers[b]):
            i = int(i) % len(self.which)
            return RecordBatch._of_gathered(self._pick(slice(i, i + 1))).to_numpy()[0]
        with memoryview(self.buffers[b]) as view:
            return bytes(view[start:start + int(self.lengths[i])])

    def __iter__(self):
        return copied(self)

    def _pick(self, idx) -> Gathered:
        """The records at positions idx (a slice or an int array), in that order."""
        return Gathered(self.buffers, self.which[idx], self.starts[idx], self.lengths[idx], self.framed,
                        self.places, None if self.index is None else self.index[idx])

    def take(self, idx) -> Gathered:
        """The records at positions idx (an int array), in that order, holding only the
        blocks they lie in."""
        return self._pick(idx)._compact()

    def _compact(self) -> Gathered:
        """Drop the blocks no record lies in and list a block met under several numbers
        (joins of slices of one block) once, so that what a shuffle buffer keeps, or a batch
        joined of many slices, holds no more memory than its records need. O(records)."""
        used = np.zeros(len(self.buffers), bool)
        used[self.which] = True
        remap = np.zeros(len(self.buffers), np.int64)
        first: dict = {}
        kept = []
        for b in np.flatnonzero(used).tolist():
            key = (id(self.buffers[b]), None if self.places is None else self.places[b])
            remap[b] = j = first.setdefault(key, len(kept))
            if j == len(kept):
                kept.append(b)
        if len(kept) < len(self.buffers):
            self.buffers = [self.buffers[b] for b in kept]
            if self.places is not None:
                self.places = [self.places[b] for b in kept]
            self.which = remap[self.which]
        return self

    @classmethod
    def join(cls, parts) -> Gathered:
        """Parts one after the other."""
        parts = [p for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls([], _EMPTY, _EMPTY, _EMPTY, False)
        buffers, bases, columns, known = _columns(parts)
        return cls._made(parts, buffers, known, *_native.spans.concat(columns, bases))

    @classmethod
    def rounds(cls, parts, block: int, rounds: int, extra: int) -> Gathered:
        """Interleave whole blocks: ``rounds`` rounds of ``block`` records from each part in
        turn, then one more block from each of the first ``extra`` parts. Each part holds
        exactly the records it gives."""
        if not rounds or len(parts) < 2:
            return cls.join(parts)
        # Each array is written once, in output order, by one core call.
        buffers, bases, columns, known = _columns(parts)
        return cls._made(parts, buffers, known, *_native.spans.interleave(columns, block, rounds, extra, bases))

    @classmethod
    def _made(cls, parts, buffers, known, which, starts, lengths, index=None) -> Gathered:
        """The Gathered of parts' records in a new order (join, rounds): the joined columns."""
        out = cls(buffers, which, starts, lengths, all(p.framed for p in parts),
                  [place for p in parts for place in p.places] if known else None, index)
        return out._compact() if len(buffers) > _BLOCKS_MAX else out

    def to_batch(self) -> RecordBatch:
        """The records as a RecordBatch, in place: as segments when they come in long runs
        of one block, else as index arrays (see RecordBatch)."""
        n = len(self.which)
        # Runs of _RUN_MIN records on average: at most n // _RUN_MIN - 1 cuts between them.
        cuts = _native.spans.run_starts(self.which, n // _RUN_MIN - 1) if n >= _RUN_MIN else None
        if cuts is not None:
            return RecordBatch._of(*self.runs(cuts), self.framed)
        return RecordBatch._of_gathered(self)

    def runs(self, cuts=None) -> tuple[list, list | None]:
        """(segments, origins) of the records, one segment per run of one block (cuts: where
        the runs start, after the first, when known); origins None when unknown."""
        if cuts is None:
            cuts = _native.spans.run_starts(self.which)
        n = len(self.which)
        at = np.concatenate(([0], cuts, [n])) if n else np.zeros(1, np.int64)
        bounds = at.tolist()
        blocks = self.which[at[:-1]].tolist()
        segments = [(self.buffers[b], self.starts[a:z], self.lengths[a:z])
                    for b, a, z in zip(blocks, bounds, bounds[1:])]
        if self.index is None:
            return segments, None
        # A run of every step-th record of its block's file (a file read in order, sharded or
        # not) is a BlockOrigin; others slice the per-record origins, made only for them.
        steps = _native.spans.run_steps(self.index, at).tolist()
        firsts = self.index[at[:-1]].tolist()
        every = None
        origins = []
        for b, a, z, first, step in zip(blocks, bounds, bounds[1:], firsts, steps):
            if step:
                origins.append(BlockOrigin(*self.places[b], first, step))
            else:
                if every is None:
                    every = self.origins()
                origins.append(sliced_origin(every, slice(a, z, 1)))
        return segments, origins

    def locate(self, i: int):
        """``(path, frame offset, record index in that file)`` of record i, or None when its
        origin is unknown (``batch.locate_error`` asks)."""
        b = int(self.which[i])  # IndexError out of range, as RecordBatch.locate
        if self.index is None:
            return None
        path, base = self.places[b]
        return path, base + int(self.starts[i]) - _native.framing.HEADER_BYTES, int(self.index[i])

    def origins(self):
        """Every record's origin (batch.RecordOrigins), or None when unknown."""
        if self.index is None:
            return None
        bases = np.array([base for _, base in self.places], np.int64)
        return RecordOrigins([path for path, _ in self.places], self.which,
                             bases[self.which] + self.starts - _native.framing.HEADER_BYTES, self.index)

    def __repr__(self):
        return f"Gathered({len(self)} records in {len(self.buffers)} blocks)"


def _columns(parts):
    """(buffers, each part's first block number in them, index-array columns, whether every
    record's origin is known) of Gathereds to be joined or interleaved."""
    buffers, bases = [], np.empty(len(parts), np.int64)
    for j, p in enumerate(parts):
        bases[j] = len(buffers)
        buffers.extend(p.buffers)
    known = all(p.index is not None for p in parts)
    columns = [[p.which for p in parts], [p.starts for p in parts], [p.lengths for p in parts]]
    return buffers, bases, columns + [[p.index for p in parts]] if known else columns, known


def shuffle(chunks, size, rng, join):
    """TensorFlow's shuffle: fill a buffer of ``size``, then for each next record emit a
    random element of the buffer and put the record in its place; drain in random order at
    the end. Done on index arrays a few thousand records at a time (a list's records as an
    object array, a Gathered's as its arrays): each record's slot is drawn from a stream of
    draws in fixed blocks, so the order does not depend on how the input was chunked."""
    draws = _Draws(rng, size)
    buf, incoming, have = None, [], 0
    step = max(_SHUFFLE_STEP, size // 4)
    for chunk in itertools.chain(chunks, (None,)):
        if chunk is not None:
            incoming.append(chunk)
            have += len(chunk)
            if have < step:
                continue
        if not have:
            continue
        records, incoming, have = join(incoming), [], 0
        if buf is None or len(buf) < size:  # filling
            filled = 0 if buf is None else len(buf)
            take = min(size - filled, len(records))
            buf = records[:take] if buf is None else join([buf, records[:take]])
            records = records[take:]
            if not len(records):
                continue
        out, buf = _shuffle_step(buf, records, draws.take(len(records)), join)
        yield out
    if buf is not None and len(buf):
        yield _take(buf, draws.permutation(len(buf)))


class _Draws:
    """Buffer slots in [0, size), drawn in fixed blocks."""

    def __init__(self, rng, size):
        self._gen = np.random.Generator(np.random.PCG64(rng.getrandbits(128)))
        self._size, self._pool = size, np.empty(0, np.int64)

    def take(self, n):
        while len(self._pool) < n:
            self._pool = np.concatenate([self._pool, self._gen.integers(0, self._size, _SHUFFLE_STEP)])
        out, self._pool = self._pool[:n], self._pool[n:]
        return out

    def permutation(self, n):
        return self._gen.permutation(n)


def _shuffle_step(buf, records, slots, join):
    """(emitted, new buffer) after records enter a full buffer at the given slots in turn:
    record j emits what slot[j] holds, the last record put there or its buffer element."""
    size, n = len(buf), len(records)
    order = np.argsort(slots, kind="stable")  # by slot, then by time
    ranked = slots[order]
    first = np.ones(n, bool)
    first[1:] = ranked[1:] != ranked[:-1]
    prev = np.empty(n, np.int64)  # per record: the record before it in its slot, else -1
    prev[order] = np.where(first, -1, np.roll(order, 1))
    emitted = np.where(prev < 0, slots, size + prev)  # into [buffer; records]
    last = np.ones(n, bool)
    last[:-1] = ranked[1:] != ranked[:-1]
    keep = np.arange(size)
    keep[ranked[last]] = size + order[last]
    both = join([buf, records])
    return _take(both, emitted), _take(both, keep)


def object_array(parts):
    """Lists or object arrays of records joined as one object array (for shuffle)."""
    out = np.empty(sum(map(len, parts)), object)
    at = 0
    for p in parts:
        out[at:at + len(p)] = p
        at += len(p)
    return out


def _take(records, idx):
    if type(records) is Gathered:
        return records.take(idx)
    return records[idx]
