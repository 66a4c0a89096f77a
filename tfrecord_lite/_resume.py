"""Resumable positions of ``TFRecordDataset``: where each open file of the interleave stands
at the record the consumer has reached, as (record index, byte offset) pairs that a reader
can seek to, so that resuming costs the same wherever the position is.

The interleave runs ahead of the consumer (read-ahead, parse prefetch), so its own state is
not the consumer's. It logs what it hands downstream instead, one small tuple per chunk of
records or per file opened or closed; ``Cursor`` applies the log up to the consumer's record
count. Byte offsets are worked out only when a state is asked for: a chunk refers to its
piece's map (the read batches it came from and the offset of each batch's first frame), and
a record's offset is that batch offset plus the frames before it in the batch (the map keeps
the batch's record lengths, not its records).

Resuming opens each file at its offset: the cost does not grow with the position. A
compressed file cannot seek, so its part before the offset is decompressed again (not
scanned). Behind a shuffle buffer the interleave is ahead of the consumer by the buffer's
records, which the state does not hold: there the state has no positions and resuming reads
the epoch up to the position again (without parsing), as version 1 states do.
"""

from __future__ import annotations

import collections
import numbers
from collections.abc import Mapping

from . import _native
from .errors import InvalidArgumentError

__all__ = ["ROUNDS", "Cursor", "check_state", "start_state", "piece_segment"]

_FRAME_OVERHEAD = _native.framing.OVERHEAD_BYTES  # header and footer bytes around each record's data
ROUNDS = -2  # a log entry's "slot changed" for a chunk of whole blocks from several slots


def check_state(state: dict, version: int, fingerprint, cycle_length: int):
    """(epoch, elements, stop epoch, positions or None) of a state_dict() to resume from,
    after checking that it fits the dataset (version 1 states have no positions)."""
    not_a_state = InvalidArgumentError(f"not a dataset state: {state!r:.80}",
                                       hint="pass what TFRecordDataset.state_dict() returned")
    if not isinstance(state, Mapping):
        raise not_a_state
    if state.get("version") not in (1, version):
        raise InvalidArgumentError(f"unsupported dataset state version {state.get('version')!r}",
                                   hint=f"this tfrecord_lite reads state versions 1 to {version}; "
                                   "load it with the version that saved it")
    if not {"fingerprint", "epoch", "elements", "stop_epoch", "seed"} <= state.keys():
        raise not_a_state
    if state["fingerprint"] != fingerprint:
        differ = _differences(state["fingerprint"], fingerprint)
        raise InvalidArgumentError(f"the state was saved by a dataset with different {differ}",
                                   hint="build the dataset with the same files, shard, batching, "
                                   "interleave and shuffle options before loading its state")
    cursor = state.get("cursor")
    stop = state["stop_epoch"]
    # A state edited or damaged on the way (a JSON file) is refused here, not by a bare
    # ValueError, KeyError or TypeError of the first next().
    if not (all(_count(state[key]) for key in ("epoch", "elements")) and _integer(state["seed"])
            and (stop is None or _count(stop)) and (cursor is None or _cursor_fits(cursor))):
        raise not_a_state
    if cursor is not None and len(cursor["slots"]) != cycle_length:
        raise InvalidArgumentError("the state's file positions do not fit this dataset's cycle_length",
                                   hint="build the dataset with the cycle_length that saved the state")
    return int(state["epoch"]), int(state["elements"]), None if stop is None else int(stop), cursor


# What the entries of TFRecordDataset._fingerprint() are.
FINGERPRINT = ("files", "shard", "batch_size", "drop_remainder", "cycle_length", "block_length", "shuffle_files",
               "shuffle_buffer", "parsed")


def _differences(saved, now) -> str:
    """Which options differ, with both values: 'files or options' alone left a resume on a
    machine with more cores to guess that cycle_length follows num_threads."""
    if not isinstance(saved, list) or len(saved) != len(now):
        return "files or options"
    parts = []
    for name, a, b in zip(FINGERPRINT, saved, now):
        if a == b:
            continue
        if name == "files":
            if not isinstance(a, list):
                parts.append("files")
            elif len(a) == len(b) and all(f in b for f in a):
                parts.append("files (in another order)")
            else:
                gone = [f for f in a if f not in b]
                parts.append(f"files ({len(a)} then, {len(b)} now{f'; then, not now: {gone!r:.200}' if gone else ''})")
        elif name == "parsed":
            parts.append("parsing (features or parse given then, not now)" if a else
                         "parsing (features or parse not given then, given now)")
        else:
            default = "; by default it is min(num_threads, max_open_files)" if name == "cycle_length" else ""
            parts.append(f"{name} ({a!r:.40} then, {b!r} now{default})")
    return ", ".join(parts) or "files or options"


def _integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _count(value) -> bool:
    return _integer(value) and value >= 0


def _cursor_fits(cursor) -> bool:
    """Whether a state's "cursor" has the form Cursor.snapshot gives it."""
    if not isinstance(cursor, Mapping) or not all(_count(cursor.get(key)) for key in ("opened", "index", "taken")):
        return False
    slots = cursor.get("slots")
    return isinstance(slots, (list, tuple)) and all(
        s is None or (isinstance(s, (list, tuple)) and len(s) == 3 and all(map(_count, s))) for s in slots)


def start_state(cycle_length: int) -> dict:
    """The interleave state at the start of an epoch."""
    return {"opened": 0, "index": 0, "taken": 0, "slots": [None] * cycle_length}


def piece_segment(count_before, first_offset, first_raw, keep, lengths):
    """One read batch of a piece as the map records it.

    count_before: records of the piece before this batch; first_offset and first_raw: the
    byte offset and record number (in the file) of its first record; keep: (first kept
    index, step) of the record sharding rule, or None for every record; lengths: the data
    length of each record as read, kept or not (lengths, not records: records the consumer is
    done with must not stay alive for it)."""
    first, step = keep or (0, 1)
    return count_before, first_offset, first_raw, first, step, lengths


def _resolve(value):
    """(record number, byte offset) of the next record of a slot value
    (position, piece map, records of the piece taken, (record, offset) when no piece yet)."""
    _, piece_map, at, start = value
    if piece_map is None:
        return start
    if at == 0:
        _, offset, raw, _, _, _ = piece_map[0]
        return raw, offset
    for count_before, offset, raw, first, step, data in reversed(piece_map):
        if count_before < at:
            break
    i = first + (at - 1 - count_before) * step  # the last record taken, within its batch
    lengths = data[:i + 1]
    offset += int(lengths[:i].sum()) + _FRAME_OVERHEAD * i
    return raw + i + 1, offset + _FRAME_OVERHEAD + int(lengths[i])


class Cursor:
    """The interleave state at the consumer's position in one epoch.

    ``log`` holds events not yet consumed: (records before it, records in it, cycle index
    after, records taken from the block after, slot changed or -1, that slot's new value,
    files opened by it). A chunk of whole blocks taken in turn from several slots has slot
    ``ROUNDS`` and the value (block_length, [(slot, its value before, records taken)]) in
    the order it took them. ``commit(consumed)`` applies those the consumer has passed."""

    __slots__ = ("epoch", "opened", "index", "taken", "slots", "log", "_frozen")

    def __init__(self, epoch: int, state: dict):
        self.epoch = epoch
        self.opened, self.index, self.taken = state["opened"], state["index"], state["taken"]
        self.slots = [None if s is None else (s[0], None, 0, (s[1], s[2])) for s in state["slots"]]
        self.log = collections.deque()
        self._frozen = None

    def commit(self, consumed: int) -> None:
        log, slots = self.log, self.slots
        while log and log[0][0] + log[0][1] <= consumed:
            _, _, self.index, self.taken, changed, value, opened = log.popleft()
            if changed >= 0:
                slots[changed] = value
            elif changed == ROUNDS:
                for c, (p, piece_map, at, start), n in value[1]:
                    slots[c] = (p, piece_map, at + n, start)
            self.opened += opened

    def snapshot(self, consumed: int) -> dict:
        """The state after ``consumed`` records of the epoch: plain ints, for state_dict()."""
        if self._frozen is not None:
            return self._frozen
        self.commit(consumed)
        slots, taken = list(self.slots), self.taken
        index = self.index
        if self.log and self.log[0][0] < consumed and self.log[0][4] == ROUNDS:
            before, _, _, _, _, (block, moved), _ = self.log[0]
            k = consumed - before  # records of the chunk passed: whole rounds, then blocks
            turn = len(moved) * block
            q, taken = divmod(k % turn, block)
            for j, (c, (p, piece_map, at, start), _) in enumerate(moved):
                passed = k // turn * block + (block if j < q else taken if j == q else 0)
                slots[c] = (p, piece_map, at + passed, start)
            index = moved[q][0]
        elif self.log and self.log[0][0] < consumed:  # a chunk of one slot the consumer is inside
            before, n, _, _, changed, (p, piece_map, at, start), _ = self.log[0]
            slots[changed] = (p, piece_map, at - n + consumed - before, start)
            taken += consumed - before
        return {"opened": self.opened, "index": index, "taken": taken,
                "slots": [None if s is None else [s[0], *_resolve(s)] for s in slots]}

    def freeze(self, consumed: int) -> None:
        """Keep only the state at ``consumed`` (the iteration stopped): drop the pieces."""
        self._frozen = self.snapshot(consumed)
        self.log.clear()
        self.slots = []
