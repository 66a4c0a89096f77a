"""One iteration of ``TFRecordDataset`` (``Run``): its thread pool, its open files and their
pieces of records, the interleave, the shuffle buffer, batching and the parse tasks.

Stages, in order: files (resolved, sharded, optionally shuffled per epoch) -> interleave of
``cycle_length`` open files, ``block_length`` records at a time -> shuffle buffer -> batch
-> parse. Reading (file I/O and CRC checks, which the core does without the GIL) and parsing
run in a pool of ``num_threads`` worker threads (a file's reads follow one another on one
thread while the consumer waits for each); the interleave, shuffle and batch stages are
bookkeeping done on the consumer's thread, so the output order is a pure function of the
files, the options, the seed and the epoch when ``deterministic=True``. When parsing with a
feature spec, and for batched raw output, records stay in their read blocks from the reader
to the decoder: a piece's blocks become index arrays in one core call, the stages move index
arrays (``_gather.Gathered``; whole rounds of the interleave at a time, the shuffle buffer a
few thousand records at a time), the decoder reads each batch's records where they lie, and
a raw batch is a RecordBatch over the read blocks (in any order: index arrays again), made on
the consumer's thread as it is taken, so no stage handles a Python object per record and
none copies the records.

Bounds: at most ``max_open_files`` descriptors (files open as slots of the cycle come free for
them, close at their end), per open file at most one piece being read and one waiting (a
piece is up to 4,096 records times one per 4 threads, up to 4 times, and the pieces share a
read-ahead of 8 MiB per thread, twice that from 8 threads; 32 MiB for mapped files, whose
pieces are views of the page cache), and once an open file is on its last piece, the first
piece of the file whose turn comes next (while fewer than ``max_open_files`` are open), at most
``prefetch`` parse tasks ahead (a task is a batch, or several small batches of a dense spec
parsed together: about 4,096 records or 4 MiB, times one per 4 threads up to 4 times), and
only as many as hold 128 MiB of records. Nothing scales with the dataset size. Between
iterations the dataset keeps the read buffers nothing else refers to (no more than one
iteration used at once) and, with ``memory_map``, up to 1,024 files' mappings (address
space; the kernel may reclaim their pages as any page cache).
"""

from __future__ import annotations

import collections
import functools
import itertools
import os
import threading
import weakref
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

import numpy as np

from . import _native
from .features import FixedLenFeature, RawTensorFeature
from ._resume import ROUNDS, Cursor, piece_segment, start_state
from ._gather import Gathered, object_array, shuffle
from .batch import BlockOrigin, RecordBatch, join_records, rebatch
from .parsing import LocatedParse, unbatch
from .reader import BLOCK_CHUNK_BYTES, CHUNK_BYTES, BufferPool, MappedFiles, TFRecordReader

if TYPE_CHECKING:
    from .dataset import TFRecordDataset

__all__ = ["Run"]

_PIECE_RECORDS = 4096  # times the scale
_PIECE_BYTES_PER_THREAD = 8 << 20  # read-ahead budget, shared by the open files
_PIECE_BYTES_MIN = 64 << 10
_PIECE_BYTES_SCALE_MAX = 2  # the read-ahead grows with the scale up to this
_MAPPED_PIECE_SCALE = 4  # a mapped file's pieces hold no read buffers: larger ones, fewer
_MAPPED_CHUNK_BYTES = 4 << 20  # a mapped file's scan chunk, at most
_PREFETCH_BYTES = 128 << 20  # records held by the parse tasks ahead, beyond the first
_READ_POOL_BYTES = 512 << 20  # read buffers a run keeps for reuse, at most
_MAPS_KEPT = 1024  # mapped files a dataset keeps for its next epoch, at most
_UNBATCHED_GROUP = 64  # records parsed together when the output is unbatched
_TASK_RECORDS = 4096  # small batches of a dense spec are parsed together up to about this,
_TASK_BYTES = 4 << 20  # times the scale
_SCALE_MAX = 4  # tasks, pieces and read chunks grow by one per 4 threads, up to this
_LOG_COMMIT = 1024  # interleave log entries kept before the consumed ones are applied
_HEADER = _native.framing.HEADER_BYTES


class _Position:
    """What the consumer has received: epoch, elements of it, and whether all epochs ended."""

    __slots__ = ("epoch", "elements", "stop", "exhausted", "cursor")

    def __init__(self, epoch, elements, stop):
        self.epoch, self.elements, self.stop, self.exhausted = epoch, elements, stop, False
        self.cursor = None  # the epoch's _resume.Cursor while the interleave tracks one


class _PieceFuture(Future):
    """The future of a file's next piece; ``next``: the read it started as it ended, if any."""

    next = None


class _Slot:
    """One open file of the interleave: its reader (touched only by the worker running its
    read) and its pieces of records."""

    __slots__ = ("path", "position", "keep", "reader", "iter", "index", "offset", "future", "waiting",
                 "piece", "map", "at", "ended", "error", "carry")

    def __init__(self, path, position, record_rule, index=0, offset=0):
        self.path = path
        self.position = position
        # Record sharding: keep records j with (position + j) % count == index.
        self.keep = None if record_rule is None else ((record_rule[0] - position) % record_rule[1],
                                                      record_rule[1])
        self.reader = None
        self.iter = None
        self.index = index  # the file's record number of the next record to place in a piece
        self.offset = offset  # where reading starts: a resume's byte offset
        self.future = None  # the read of the next piece (a _PieceFuture)
        self.waiting = None  # the future the consumer waits for, having taken every record before
        self.piece = []
        self.map = None  # the piece's read batches (see _resume.piece_segment)
        self.at = 0
        self.ended = False
        self.error = None  # raised by the next read, after the records before it are delivered
        self.carry = None  # the rest of a read block, and the file offset of its first frame

    def close(self):
        if self.reader is not None:
            self.reader.close()
            self.reader = self.iter = None


class Run:
    """One iteration over epochs [start, stop): owns the thread pool and the open files."""

    def __init__(self, ds: TFRecordDataset, start, stop, skip, cursor=None):
        self.ds = ds
        self.position = _Position(start, skip, stop)
        self._cursor = cursor  # file positions to start the first epoch at
        # Positions are tracked only where they place the consumer: not behind a shuffle buffer.
        self._track = ds.deterministic and not ds.shuffle_buffer
        self.finished = False
        self.records_read = 0  # raw records handed over by the workers (bounded read-ahead)
        self._stop = stop
        self._skip = skip
        self._slots: list[_Slot] = []
        self._early: dict[int, _Slot] = {}  # files of the epoch's order opened before their turn
        self._pending = collections.deque()
        self._lock = threading.Lock()
        self._unstarted = 0  # parse tasks submitted, not started
        self._pool = ThreadPoolExecutor(ds.num_threads, thread_name_prefix="tfrecord_lite")
        _open_runs.add(self)
        self._parse = ds._parse_fn()
        # Records stay in their read blocks all the way to parse_example, which reads them in
        # place, or to the RecordBatches of batched raw output: the interleave and batching
        # move index arrays (Gathered), with no Python object per record on the way. Not for
        # a custom parse or unbatched raw output: they get bytes.
        self._blocks = ds.parse is None and (ds.features is not None or ds.batch_size is not None)
        self._join = Gathered.join if self._blocks else join_records
        self._shuffle_join = Gathered.join if self._blocks else object_array
        # Tasks, pieces and read chunks grow with the threads: with many threads the GIL is
        # the bottleneck, and each holds it for a fixed part (a future, the decoder's setup,
        # output arrays, index arrays). W2 parse at 16 threads on 16 cores: 0.36-0.40 s a pass
        # with tasks of 16,384 records, 0.41-0.43 s with 4,096 (with 2 threads, tasks of
        # 8,192 were 1.16x slower); 0.213 s with pieces of 16,384 records and chunks of 2 MiB
        # against 0.246-0.253 s with 4,096 and 1 MiB, W1 raw 0.040 s against 0.064 s.
        self._scale = max(1, min(_SCALE_MAX, ds.num_threads // 4))
        self._piece_records = _PIECE_RECORDS * self._scale
        # Every piece costs Python work under the GIL (a task, its future, index arrays), so
        # the read-ahead grows with the threads: a budget shared by 16 files made pieces of
        # 8 images, and 16 threads read slower than one. It doubles with the scale too (from 8
        # threads): on 16 cores W1 raw at 16 threads took 0.025-0.044 s a pass against
        # 0.038-0.064 (five pairs), at 8 threads 0.047-0.051 against 0.056-0.059, W2 raw at
        # 16 0.076-0.083 against 0.124-0.129. The price is memory: W1 raw at 16 threads peaked at
        # 762 MiB against 434, and four times the budget at 888 MiB for no more speed.
        budget = max(_PIECE_BYTES_MIN, _PIECE_BYTES_PER_THREAD * ds.num_threads // (2 * ds.cycle_length))
        self._piece_bytes = budget * min(self._scale, _PIECE_BYTES_SCALE_MAX)
        # Records that stay in their blocks are read in chunks of up to half a piece (at most
        # BLOCK_CHUNK_BYTES, times the scale): every chunk costs Python work under the GIL (a
        # RecordBatch, its index arrays, a fresh buffer), and a piece stays under 1.5 times
        # its budget. Records copied out into bytes keep the reader's cache-sized chunks.
        self._chunk = (min(BLOCK_CHUNK_BYTES * self._scale, max(CHUNK_BYTES, self._piece_bytes // 2))
                       if self._blocks else CHUNK_BYTES)
        # A mapped file's pieces are views of the page cache, holding no read buffer, so the
        # read-ahead budget does not bound them: pieces 4 times as large, scanned in chunks of
        # up to 4 MiB. On 16 cores W1 raw with memory_map took 0.031-0.035 s a pass at 4 and
        # 8 threads against 0.045-0.048 s.
        # (The budget before the doubling above, which was measured on read files only.)
        self._mapped_piece_bytes = budget * _MAPPED_PIECE_SCALE
        self._mapped_chunk = min(_MAPPED_CHUNK_BYTES, max(self._chunk, self._mapped_piece_bytes // 2))
        # Read buffers reused once what was read into them is gone: as many as are in use at
        # once, up to _READ_POOL_BYTES: records left in their read buffers keep them for as long
        # as their batch lives, and with large records the batches in flight (prefetch, and the
        # one the consumer holds) span dozens of buffers each (33 for a batch of 1,024 32 KiB
        # images). A pool no larger than the read-ahead missed every time there, and each fresh
        # buffer faulted its pages in again. The pool only keeps a new buffer when all it holds
        # are in use, so it never holds more than the pipeline used at once. The dataset keeps
        # the pool for its next iteration (the buffers nothing else holds as this one ends):
        # each epoch's first buffers were fresh, on W1 77 of them a pass at one thread (19,700
        # page faults), and the pass took 1.4x the time.
        if ds._buffers is None:
            ds._buffers = BufferPool(_READ_POOL_BYTES, _READ_POOL_BYTES // self._chunk)
        self._buffers = ds._buffers
        # Mapped files likewise (MappedFiles): on 2 cores, mapped epochs of W1 images took 0.59x
        # the time at one thread and 0.43x at two, of W2 records 0.5x raw and 0.8x parsed.
        # Not where each mapping keeps a descriptor while it lives (the pure-Python backend's
        # before Python 3.13): the records of a batch, a parse task or the shuffle buffer keep
        # their files' mappings, and batches spanning many small files held one descriptor each,
        # past max_open_files (EMFILE under a ulimit of 64). Those files are read instead.
        self._memory_map = ds.memory_map and not _maps_hold_descriptors()
        if self._memory_map and ds._maps is None:
            ds._maps = MappedFiles(_MAPS_KEPT)
        if self._blocks and self._parse is None:
            self._parse = _raw_batch
        # Small batches of a dense spec, or of raw records, are made several at a time and
        # split after: every task costs GIL handoffs and future traffic, which with batches
        # of 1,024 small records held 2 threads to about 1.5x of one. Other outputs cannot
        # be split (sparse indices, padding to the longest list).
        self._group = (ds.batch_size is not None and ds.parse is None
                       and (ds.features is None or all(type(s) in (FixedLenFeature, RawTensorFeature)
                                                       for s in ds.features.values())))

    def close(self) -> None:
        if self.finished:
            return
        self.finished = True
        _open_runs.discard(self)
        cursor = self.position.cursor
        if cursor is not None and cursor.epoch == self.position.epoch:
            cursor.freeze(self.position.elements * (self.ds.batch_size or 1))
        pending, self._pending = self._pending, collections.deque()
        for fut in pending:
            fut.cancel()
        for slot in self._open_slots():
            if slot.future is not None:
                slot.future.cancel()  # reads start others only while the consumer waits for them
        self._pool.shutdown(wait=True, cancel_futures=True)
        for slot in self._open_slots():
            slot.close()
        self._slots, self._early = [], {}
        self._buffers.drop_held()

    def in_worker(self) -> bool:
        """Whether the calling thread is one of the run's workers."""
        return threading.current_thread() in self._pool._threads

    def _open_slots(self):
        return [s for s in (*self._slots, *self._early.values()) if s is not None]

    # -- stages ------------------------------------------------------------------------

    def generate(self):
        ds = self.ds
        epoch = self.position.epoch
        while self._stop is None or epoch < self._stop:
            self.position.epoch = epoch
            fresh = self.position.elements == 0  # not resumed within the epoch
            start, self._cursor = self._cursor, None
            chunks = self._interleave(ds._epoch_files(epoch), start)
            if ds.shuffle_buffer:
                chunks = shuffle(chunks, ds.shuffle_buffer, ds._rng(epoch, 1), self._shuffle_join)
            if start is not None:
                self._skip = 0  # the files are opened where the position is
            if self._skip:
                chunks = _skip(chunks, self._skip * (ds.batch_size or 1))
                self._skip = 0
            # A read error ends the records there, and is raised once every record before it is
            # delivered, as TensorFlow does: whole batches (parsed), no short one after them.
            failed = []
            chunks = _until_error(chunks, failed)
            size = ds.batch_size or (_UNBATCHED_GROUP if self._parse else None)
            drop = ds.drop_remainder and ds.batch_size is not None
            if self._group:
                chunks = _groups(chunks, size, drop, self._join, self._scale, failed)
            elif size is not None:
                chunks = rebatch(chunks, size, drop, self._join)
                if ds.batch_size is not None:
                    chunks = _whole(chunks, size, failed)
            if self._parse is None:
                if ds.batch_size is None:
                    for chunk in chunks:
                        yield from chunk
                else:
                    yield from chunks
            else:
                yield from self._parsed(chunks)
            if failed:
                raise failed[0]
            if fresh and self.position.elements == 0 and self._stop is None:
                break  # nothing to repeat: tf.data's repeat() ends here too, where looping would hang
            epoch += 1
            self.position.epoch, self.position.elements = epoch, 0
        self.position.exhausted = True
        self.position.cursor = None
        self.close()  # the run's one ending: pool, files, read buffers

    def _parsed(self, batches):
        """Parse batches in the pool, ``prefetch`` tasks ahead; unbatch when batch_size is None.
        Raw batches are made here, as they are needed."""
        ds = self.ds
        pending = self._pending
        tasks = self._tasks(batches)
        if self._parse is _raw_batch:
            # A raw batch is a few index arrays: in the pool, its handoffs cost more than making
            # it, and the batches queued ahead kept their read buffers from reuse. On 2 cores,
            # W1 raw at 2 threads went from 0.097 to 0.067 s a pass, W2 raw from 0.130 to 0.124.
            for task in tasks:
                outputs, error = _parse_task(self._parse, *task)
                yield from outputs
                if error is not None:
                    raise error
            return
        exhausted = False
        # Large records fill _PREFETCH_BYTES before prefetch tasks: 32 batches of 1,024 images
        # ahead held a whole 500 MB file set, so no read buffer was ever free for reuse and
        # every read faulted fresh pages in.
        held = {}  # pending task -> bytes of its records
        while True:
            while not exhausted and len(pending) < ds.prefetch and (not held or sum(held.values()) < _PREFETCH_BYTES):
                task = next(tasks, None)
                if task is None:
                    exhausted = True
                else:
                    with self._lock:
                        self._unstarted += 1
                    fut = self._pool.submit(self._parse_started, *task)
                    pending.append(fut)
                    held[fut] = _held_bytes(task[0])
            if not pending:
                return
            if ds.deterministic or pending[0].done():
                fut = pending.popleft()
            else:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                fut = next(f for f in pending if f in done)
                pending.remove(fut)
            del held[fut]
            outputs, error = fut.result()
            yield from outputs
            if error is not None:
                raise error

    def _parse_started(self, records, sizes):
        """Worker: a parse task, counted off as it starts (see _read_pieces)."""
        with self._lock:
            self._unstarted -= 1
        return _parse_task(self._parse, records, sizes)

    def _tasks(self, batches):
        """(records, batch sizes) per parse task; sizes None: unbatch the output."""
        if self._group:
            return batches  # cut as tasks already (_groups)
        if self.ds.batch_size is None:
            return ((group, None) for group in batches)
        return ((batch, [len(batch)]) for batch in batches)

    def _interleave(self, positions, start=None):
        """Chunks (lists) of records in interleave order; see TFRecordDataset. start: the
        state (``_resume.Cursor.snapshot``) to begin at, else the epoch's beginning."""
        ds = self.ds
        files, rule = ds.files, ds._record_rule
        cycle, block = ds.cycle_length, ds.block_length
        # Records before this point of the epoch: those of a resumed position, else none.
        produced = 0 if start is None else self.position.elements * (ds.batch_size or 1)
        if start is None:
            start = start_state(cycle)
        todo = collections.deque(positions[start["opened"]:])
        try:
            if not ds.deterministic:
                yield from self._interleave_any(todo)
                return
            slots = self._slots = [None] * cycle
            for c, s in enumerate(start["slots"]):
                if s is not None:
                    slots[c] = self._open(_Slot(files[s[0]], s[0], rule, s[1], s[2]))
            num_open = cycle - slots.count(None)
            self._open_ahead(todo, cycle - num_open)  # the files the free slots take next
            index, taken = start["index"], start["taken"]
            # Blocks shorter than a batch: take whole rounds of them at once, as index arrays.
            gather = self._blocks and cycle > 1 and block < (ds.batch_size or _UNBATCHED_GROUP)
            log = None
            if self._track and ds._track_positions:
                cursor = self.position.cursor = Cursor(self.position.epoch, start)
                log = cursor.log.append
                per_element = ds.batch_size or 1
            while todo or num_open:
                if log is not None and len(cursor.log) > _LOG_COMMIT:
                    cursor.commit(self.position.elements * per_element)  # what the consumer passed
                if gather and taken == 0 and num_open > 1 and (not todo or num_open == cycle):
                    # Files at the end of their piece move to the next one first, so that whole
                    # rounds go on across piece ends instead of a block at a time until every
                    # file has moved (a file at its end is left to the path below to close, a
                    # failed read to raise at its turn: other files' blocks may come first).
                    for s in slots:
                        if s is not None and s.at == len(s.piece):
                            self._advance(s, todo, num_open, ahead=True)
                    stretch = _rounds(slots, index, block)
                    if stretch is not None:
                        chunk, moved, index = stretch
                        if log is not None:
                            log((produced, len(chunk), index, 0, ROUNDS, (block, [
                                (c, (slots[c].position, slots[c].map, slots[c].at, None), n) for c, n in moved]), 0))
                            produced += len(chunk)
                        for c, n in moved:
                            slots[c].at += n
                        yield chunk
                        continue
                slot = slots[index]
                if slot is None:
                    if todo:
                        p = todo.popleft()
                        early = self._early.pop(p, None)
                        slots[index] = early if early is not None else self._open(_Slot(files[p], p, rule))
                        num_open += 1
                        if log is not None:
                            log((produced, 0, index, taken, index, (p, None, 0, (0, 0)), 1))
                        continue
                    index, taken = (index + 1) % cycle, 0
                    if log is not None:
                        log((produced, 0, index, 0, -1, None, 0))
                    continue
                if slot.at == len(slot.piece) and not self._advance(slot, todo, num_open):
                    slot.close()
                    slots[index] = None
                    num_open -= 1
                    self._open_ahead(todo, cycle - num_open)
                    if log is not None:
                        log((produced, 0, (index + 1) % cycle, 0, index, None, 0))
                    index, taken = (index + 1) % cycle, 0
                    continue
                # With one file left the cycle always comes back to it: take whole pieces.
                alone = cycle == 1 or (num_open == 1 and not todo)
                want = len(slot.piece) - slot.at if alone else block - taken
                chunk = slot.piece[slot.at:slot.at + want]
                slot.at += len(chunk)
                taken += len(chunk)
                at_slot = index
                if taken == block and cycle > 1:
                    index, taken = (index + 1) % cycle, 0
                if log is not None:
                    log((produced, len(chunk), index, taken, at_slot, (slot.position, slot.map, slot.at, None), 0))
                    produced += len(chunk)
                yield chunk
        finally:
            self._drain_slots()

    def _interleave_any(self, todo):
        """Nondeterministic interleave: whole pieces from whichever open file is ready."""
        ds = self.ds
        files, rule = ds.files, ds._record_rule
        slots = self._slots = []
        while todo or slots:
            while todo and len(slots) < ds.cycle_length:
                p = todo.popleft()
                slots.append(self._open(_Slot(files[p], p, rule)))
            wait([s.future for s in slots], return_when=FIRST_COMPLETED)
            for slot in [s for s in slots if s.future.done()]:
                piece, _ = slot.future.result()
                if slot.ended:
                    slot.future = None
                    slot.close()
                    slots.remove(slot)
                else:
                    slot.future = self._read(slot)
                if piece:
                    yield piece

    def _open(self, slot):
        slot.future = self._read(slot)
        return slot

    def _read(self, slot) -> _PieceFuture:
        """The future of the slot's next piece, read in the pool (_read_pieces)."""
        fut = _PieceFuture()
        # In a list the worker empties: the pool's work item holds its arguments while the
        # reads go on, and would keep each piece read since through the futures' next.
        self._pool.submit(self._read_pieces, slot, [fut])
        return fut

    def _read_pieces(self, slot, box):
        """Worker: read the slot's next piece into the future in box, and while the consumer
        already waits for it (so it has taken every record before), go on with the piece
        after, on this thread, within the same bound: the piece handed over and the one being
        read. Started by the consumer once it had the piece, each read cost a round trip of
        two thread wake-ups, the worker idle meanwhile: about 50 µs on a 2-core VM, where W2
        raw at one thread spent a sixth of a pass in them."""
        fut = box.pop()
        while fut.set_running_or_notify_cancel():  # cancelled before it started: nothing read
            try:
                result = self._read_piece(slot)
            except BaseException as exc:
                fut.set_exception(exc)
                return
            chained = None
            # Not ahead of parse tasks waiting to start: they would wait for every piece the
            # consumer asks for meanwhile (W1 parse at one thread took 1.28x the time).
            if slot.waiting is fut and not slot.ended and not self._unstarted:
                chained = fut.next = _PieceFuture()  # before fut ends, so the consumer finds it
            fut.set_result(result)
            if chained is None:
                return
            fut = chained

    def _open_ahead(self, todo, upto):
        """Start reading the first ``upto`` files of todo (the order) before their turns
        come, those not started yet. Opened as the interleave reached each, a file's first
        piece was read only once the one before it had been handed over: on 16 cores W1 with
        memory_map read 1.4 pieces at a time with 16 threads and the consumer waited out each.
        At most ``max_open_files`` stay open: upto is at most the cycle's free slots, or one
        more where that stays within it (_advance)."""
        for p in itertools.islice(todo, len(self._early), upto):
            self._early[p] = self._open(_Slot(self.ds.files[p], p, self.ds._record_rule))

    def _advance(self, slot, todo, num_open, ahead=False) -> bool:
        """Move the slot to its next piece; False at the file's end. Once that is the file's
        last piece, start reading the next file of the order (todo), or the consumer waits for
        its first piece when its turn comes. ahead: before the slot's turn (see _next_piece)."""
        if not self._next_piece(slot, ahead):
            return False
        if slot.future is None and num_open + len(self._early) < self.ds.max_open_files:
            self._open_ahead(todo, len(self._early) + 1)
        return True

    def _next_piece(self, slot, ahead=False) -> bool:
        """Move the slot to its next piece (waiting for it); False at the file's end. ahead:
        the slot's turn has not come, so a failed read stays where it is, to be raised when
        the turn comes, as TensorFlow raises it (False then too)."""
        while True:
            if slot.future is None:
                return False
            fut = slot.waiting = slot.future
            try:
                if ahead and fut.exception() is not None:
                    return False
                piece, piece_map = fut.result()
            finally:
                slot.waiting = None
            # The read that fut started as it ended runs already (so the file has more); else
            # no read of this file runs, and slot.ended is the finished read's word.
            slot.future = fut.next or (None if slot.ended else self._read(slot))
            if piece:
                slot.piece, slot.map, slot.at = piece, piece_map, 0
                return True

    def _read_piece(self, slot):
        """Worker: the next piece of the slot's file; opens it first, closes it at its end."""
        ds = self.ds
        if slot.reader is None:
            slot.reader = TFRecordReader(slot.path, ds.compression, ds.check_crc, ds.on_corrupt,
                                         max_record_bytes=ds.max_record_bytes, storage_options=ds.storage_options,
                                         start_offset=slot.offset, start_index=slot.index, chunk_size=self._chunk,
                                         buffers=self._buffers, memory_map=self._memory_map, maps=ds._maps)
            if slot.reader.mapped and self._blocks:
                slot.reader.chunk_size = self._mapped_chunk
            slot.iter = slot.reader.blocks_in_place() if self._blocks else slot.reader.batches()
        reader = slot.reader
        path, framed = reader.path, reader.check_crc
        limit = self._mapped_piece_bytes if reader.mapped and self._blocks else self._piece_bytes
        parts, piece_map, count, nbytes = [], [], 0, 0
        try:
            # Whole scanned blocks at a time (no Python work per record, so the GIL is free for
            # the other workers' parsing), the last one cut at the piece's records and its rest
            # carried over to the next piece: the files of an interleave then change pieces
            # together, and whole rounds of them are taken at once (_rounds).
            while True:
                if slot.carry is not None:
                    records, offset = slot.carry
                    slot.carry = None
                else:
                    if slot.error is not None:
                        raise slot.error
                    records = next(slot.iter, None)
                    if records is None:
                        slot.ended = True
                        slot.close()
                        break
                    # The reader's count: records it skipped (on_corrupt="skip") are numbered
                    # too, so sharding and resumed positions go by each record's index in its file.
                    offset, slot.index = reader.batch_offset, reader.batch_index
                first = slot.index
                keep = None if slot.keep is None else ((slot.keep[0] - first) % slot.keep[1], slot.keep[1])
                if not self._blocks:  # bytes, as read
                    slot.index += len(records)
                    lengths = np.fromiter(map(len, records), np.int64, len(records))
                    piece_map.append(piece_segment(count, offset, first, keep, lengths))
                    if keep is not None:
                        records = records[keep[0]::keep[1]]
                    parts.append(records)
                    count += len(records)
                    nbytes += _held_bytes(records)
                else:
                    # A scanned block, with no RecordBatch made of it: one core call joins
                    # the piece's index arrays (_gather.Gathered.joined).
                    frames, starts, lengths = records
                    base = offset + _HEADER - int(starts[0])  # the file offset of frames[0]
                    cut = _cut(len(starts), self._piece_records - count, keep)
                    if cut < len(starts):
                        slot.carry = (frames, starts[cut:], lengths[cut:]), base + int(starts[cut]) - _HEADER
                        starts, lengths = starts[:cut], lengths[:cut]
                    slot.index += cut
                    piece_map.append(piece_segment(count, offset, first, keep, lengths))
                    nbytes += int(starts[-1]) + int(lengths[-1]) - int(starts[0])
                    k, step = keep or (0, 1)
                    if keep is not None:
                        starts, lengths = starts[k::step], lengths[k::step]
                    if len(starts):
                        parts.append((frames, starts, lengths, BlockOrigin(path, base, first + k, step)))
                        count += len(starts)
                if nbytes >= limit or count >= self._piece_records:
                    break
        except Exception as exc:
            if not count:
                raise
            slot.error = exc  # as TensorFlow does, the good records come first
        with self._lock:
            self.records_read += count
        return (Gathered.joined(parts, framed) if self._blocks else join_records(parts)), piece_map

    def _drain_slots(self):
        for slot in self._open_slots():
            fut = slot.future
            while fut is not None:  # each read may start the next as it ends
                if not fut.cancel():
                    try:
                        fut.result()
                    except BaseException:
                        pass
                fut = fut.next
            slot.close()
        self._slots, self._early = [], {}


_open_runs = weakref.WeakSet()


def _drop_queued_work():
    """As the interpreter exits, before concurrent.futures joins the pools' threads (which run
    every task queued first): cancel what the runs still open queued (an iterator held as
    Ctrl-C ends the program kept it 10 s running 40 queued parses). Running tasks finish."""
    for run in list(_open_runs):
        run._pool.shutdown(wait=False, cancel_futures=True)


# Run before concurrent.futures' own hook, registered as it was imported above (last in, first
# run). A private hook of threading's (3.9+): without it, exit only waits longer.
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_drop_queued_work)
if hasattr(os, "register_at_fork"):  # a child has none of the runs' threads, and their locks may be held
    os.register_at_fork(after_in_child=_open_runs.clear)


def _rounds(slots, index, block):
    """Whole blocks of the interleave from cycle position ``index`` on while the open files'
    pieces still hold them: (Gathered records, [(position, records taken)], position after),
    or None when the file at ``index`` has less than a block in its piece."""
    order = [c for c in range(index, len(slots)) if slots[c] is not None]
    order += [c for c in range(index) if slots[c] is not None]
    left = [len(slots[c].piece) - slots[c].at for c in order]
    rounds = min(left) // block
    extra = 0
    while extra < len(order) and left[extra] - rounds * block >= block:
        extra += 1
    if rounds == 0 and extra == 0:
        return None  # the normal path moves the file at ``index`` to its next piece
    moved = [(c, rounds * block + (block if j < extra else 0)) for j, c in enumerate(order)]
    if not rounds:
        # Only the files that give records: one past them may have no piece (a read that
        # failed ahead of its turn), so no position to log for it.
        moved = moved[:extra]
    chunk = Gathered.rounds([slots[c].piece[slots[c].at:slots[c].at + n] for c, n in moved], block, rounds, extra)
    last = order[extra - 1] if extra else order[-1]
    return chunk, moved, (last + 1) % len(slots)


def _maps_hold_descriptors() -> bool:
    """Whether the active backend's mappings each keep a duplicate descriptor while they live."""
    return getattr(getattr(_native.framing, "_MappedFile", None), "holds_descriptor", False)


def _cut(n, want, keep) -> int:
    """Records of a read batch of n to take for ``want`` kept ones (keep: the record sharding
    rule's (first kept, step) in the batch, or None for every record)."""
    if keep is None:
        return min(n, want)
    return min(n, keep[0] + (want - 1) * keep[1] + 1)


def _raw_batch(records):
    """Batched raw output: a RecordBatch of the records, left in their read blocks."""
    return records.to_batch() if type(records) is Gathered else records


def _held_bytes(records) -> int:
    """About the memory records hold: for a RecordBatch the stretch of its blocks it spans
    (frame headers and any records a strided slice skips included), for a Gathered its
    records times the mean of its first and last lengths. Not a sum over the lengths: a
    numpy reduction of 500+ values releases the GIL, and retaking it waits for a worker."""
    if type(records) is RecordBatch and records._gathered is not None:
        records = records._gathered
    if type(records) is Gathered:
        n = len(records)
        return n and n * (int(records.lengths[0]) + int(records.lengths[-1])) // 2
    if type(records) is RecordBatch:
        return sum(int(starts[-1]) + int(lengths[-1]) - int(starts[0]) for _, starts, lengths in records.segments)
    return sum(map(len, records))


def _parse_task(parse, records, sizes):
    """Worker: parse records into (outputs, error): one output per record when sizes is
    None, else one batch per size, split from one parse of them all (as views). When that
    parse fails, the batches (unbatched: the records) are parsed one by one so that the good
    ones before the bad one are delivered, then its error, which names the record's file,
    offset and index where the records know them (RecordBatch, Gathered), else its position
    in its batch."""
    parse = LocatedParse(parse)
    if sizes is None:
        try:
            return unbatch(parse(records), len(records), parse, records), None
        except Exception:  # the records before the bad one are delivered first, one by one
            outputs = []
        for a in range(len(records)):
            try:
                outputs += unbatch(parse(records[a:a + 1]), 1, parse, records[a:a + 1])
            except Exception as exc:
                return outputs, exc
        return outputs, None
    if len(sizes) == 1:
        return [parse(records)], None
    starts = list(itertools.accumulate(sizes, initial=0))
    try:
        parsed = parse(records)
        if type(parsed) is RecordBatch:  # raw output
            return [parsed[a:a + n] for a, n in zip(starts, sizes)], None
        if not isinstance(parsed, dict):  # a pyarrow.RecordBatch
            return [parsed.slice(a, n) for a, n in zip(starts, sizes)], None
        return [{key: value[a:a + n] for key, value in parsed.items()} for a, n in zip(starts, sizes)], None
    except Exception:
        outputs = []
    for a, n in zip(starts, sizes):
        try:
            outputs.append(parse(records[a:a + n]))
        except Exception as exc:
            return outputs, exc
    return outputs, None  # only the group was too much (MemoryError)


def _until_error(chunks, failed):
    """The chunks up to an error, which is appended to failed instead of raised."""
    try:
        yield from chunks
    except Exception as exc:
        failed.append(exc)


def _whole(batches, size, failed):
    """The batches, but not a short one cut by an error (failed)."""
    for batch in batches:
        if failed and len(batch) < size:
            return
        yield batch


def _groups(chunks, size, drop_remainder, join, scale=1, failed=()):
    """(records, batch sizes) per parse task: whole batches of ``size`` records cut from
    the chunks as one slice, as many as fit in scale times _TASK_RECORDS and _TASK_BYTES (at
    least one), the last batch short unless drop_remainder or an error cut it (failed).
    Cutting batches and joining them into a task again cost the consumer's thread, under the
    GIL, more than the batch itself."""
    for group in rebatch(chunks, functools.partial(_task_records, size=size, scale=scale), join=join):
        n = len(group)
        tail = n % size  # only the last group has one
        if tail and (drop_remainder or failed):
            n, tail = n - tail, 0
            group = group[:n]
        if n:
            yield group, [size] * (n // size) + ([tail] if tail else [])


def _task_records(chunk, size, scale=1) -> int:
    """Records a task of size-record batches takes, judged by the record size in chunk."""
    per_batch = max(1, _held_bytes(chunk) * size // len(chunk))
    return size * max(1, min(scale * _TASK_RECORDS // size, scale * _TASK_BYTES // per_batch))


def _skip(chunks, n):
    for chunk in chunks:
        if n >= len(chunk):
            n -= len(chunk)
            continue
        if n:
            chunk, n = chunk[n:], 0
        yield chunk
