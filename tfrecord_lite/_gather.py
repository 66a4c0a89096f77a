"""Records of several read pieces in an interleave's output order, held as index arrays.

The interleave of ``TFRecordDataset`` alternates between files ``block_length`` records at
a time, and by default that is one record: handled one Python object per record, the
consumer's thread (which holds the GIL) became the bottleneck, and more threads made it
slower. ``Gathered`` keeps a batch in the making as the buffers its records lie in plus,
per record, which buffer, where and how long. Slicing, joining and interleaving whole rounds
of blocks are a few NumPy operations on those arrays, whatever the number of records.

``to_batch()`` runs in the parse worker and turns it into a RecordBatch: the buffers' own
runs when the records come in long runs (no copy), else one copy of the records' bytes into
a new block, made by the core without the GIL.
"""

from __future__ import annotations

import numpy as np

from . import _native
from .reader import RecordBatch

__all__ = ["Gathered"]

_EMPTY = np.empty(0, np.int64)
_RUN_MIN = 64  # average records per buffer run from which a batch keeps its buffers' runs
_BLOCKS_MAX = 64  # blocks a join may list before those without records are dropped


class Gathered:
    __slots__ = ("buffers", "which", "starts", "lengths", "framed")

    def __init__(self, buffers, which, starts, lengths, framed):
        self.buffers = buffers  # list of blocks (bytes-likes)
        self.which = which      # int64 per record: its block in buffers
        self.starts = starts    # int64 per record: where its data starts in that block
        self.lengths = lengths  # int64 per record: its data length
        self.framed = framed    # every record sits in a checked frame of its block

    @classmethod
    def of(cls, batch: RecordBatch) -> Gathered:
        """The records of a RecordBatch (or an empty list), in order."""
        segments = getattr(batch, "segments", ())
        if not segments:
            return cls([], _EMPTY, _EMPTY, _EMPTY, False)
        if len(segments) == 1:
            frames, starts, lengths = segments[0]
            return cls([frames], np.zeros(len(starts), np.int64), starts, lengths, batch.framed)
        sizes = [len(s[1]) for s in segments]
        return cls([s[0] for s in segments], np.repeat(np.arange(len(segments), dtype=np.int64), sizes),
                   np.concatenate([s[1] for s in segments]), np.concatenate([s[2] for s in segments]),
                   batch.framed)

    def __len__(self) -> int:
        return len(self.which)

    def __getitem__(self, i):
        if not isinstance(i, slice):
            raise TypeError("Gathered records are sliced, not indexed")
        return Gathered(self.buffers, self.which[i], self.starts[i], self.lengths[i], self.framed)

    def take(self, idx) -> Gathered:
        """The records at positions idx (an int array), in that order, holding only the
        blocks they lie in."""
        return Gathered(self.buffers, self.which[idx], self.starts[idx], self.lengths[idx], self.framed)._compact()

    def _compact(self) -> Gathered:
        """Drop the blocks no record lies in, so that what a shuffle buffer keeps, or a
        batch joined of many slices, holds no more memory than its records need."""
        used = np.unique(self.which)
        if len(used) < len(self.buffers):
            self.buffers = [self.buffers[b] for b in used.tolist()]
            self.which = np.searchsorted(used, self.which)
        return self

    @classmethod
    def join(cls, parts) -> Gathered:
        """Parts one after the other."""
        parts = [p for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls([], _EMPTY, _EMPTY, _EMPTY, False)
        buffers, which, base = [], [], 0
        for p in parts:
            buffers.extend(p.buffers)
            which.append(p.which + base if base else p.which)
            base += len(p.buffers)
        out = cls(buffers, np.concatenate(which), np.concatenate([p.starts for p in parts]),
                  np.concatenate([p.lengths for p in parts]), all(p.framed for p in parts))
        return out._compact() if len(buffers) > _BLOCKS_MAX else out

    @classmethod
    def rounds(cls, parts, block: int, rounds: int, extra: int) -> Gathered:
        """Interleave whole blocks: ``rounds`` rounds of ``block`` records from each part in
        turn, then one more block from each of the first ``extra`` parts. Each part holds
        exactly the records it gives."""
        whole = cls.join(parts)  # part j's records are whole[offset_j:offset_j + len_j]
        sizes = np.array([len(p) for p in parts])
        if rounds and len(parts) > 1:
            m, span = len(parts), rounds * block
            firsts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            # (part, round, record in block) -> (round, part, record in block)
            order = (firsts[:, None] + np.arange(span)).reshape(m, rounds, block).transpose(1, 0, 2).ravel()
            if extra:
                order = np.concatenate([order, (firsts[:extra, None] + span + np.arange(block)).ravel()])
            return Gathered(whole.buffers, whole.which[order], whole.starts[order], whole.lengths[order],
                            whole.framed)
        return whole

    def to_batch(self) -> RecordBatch:
        """The records as a RecordBatch: runs of one block stay in it, unless the runs are
        short, when the records are copied into one new block."""
        n = len(self.which)
        if not n:
            return RecordBatch()
        which = self.which
        cuts = np.flatnonzero(which[1:] != which[:-1]) + 1
        if len(cuts) * _RUN_MIN <= n:
            bounds = [0, *cuts.tolist(), n]
            blocks = which[bounds[:-1]].tolist()
            return RecordBatch(segments=[(self.buffers[b], self.starts[a:z], self.lengths[a:z])
                                         for b, a, z in zip(blocks, bounds, bounds[1:])],
                               framed=self.framed)
        data, starts = _native.framing.gather(self.buffers, which, self.starts, self.lengths)
        return RecordBatch(data, starts, self.lengths)

    def __repr__(self):
        return f"Gathered({len(self)} records in {len(self.buffers)} blocks)"
