"""TFRecordDataset's pipeline: the threads and descriptors an iteration leaves behind as it
ends (early or at interpreter exit), read-ahead and its bounds, piece sizes, the order reads
and parse tasks take the pool in, read-buffer reuse."""

import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from ._records import fresh_buffers, interleave, record, records_of, write_files

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset, TFRecordReader
from tfrecord_lite.errors import TFRecordError


def _fds():
    return len(os.listdir("/proc/self/fd"))


def _tfl_threads():
    return [t for t in threading.enumerate() if t.name.startswith("tfrecord_lite")]


@pytest.mark.parametrize("how", ["break", "close", "gc", "error"])
def test_early_stop_leaks_nothing(tmp_path, how):
    paths = write_files(tmp_path, [200] * 6, size=100)
    gc.collect()  # descriptors held by earlier tests' garbage must not close mid-test
    fds = _fds()
    ds = TFRecordDataset(paths, num_threads=2, cycle_length=4, parse=(lambda r: r) if how != "error" else None)
    if how == "error":
        # Cut short before the run starts: the files of the first round, and those their ends
        # open early, may be read before anything the consumer does here.
        os.truncate(paths[5], 50)
    it = iter(ds)
    for _ in range(10):
        next(it)
    assert _tfl_threads()
    if how == "close":
        it.close()
    elif how == "gc":
        del it
        gc.collect()
    elif how == "break":
        for _ in it:
            break
        it = None
    else:
        with pytest.raises(TFRecordError):
            for _ in it:
                pass
    deadline = time.time() + 5
    while _tfl_threads() and time.time() < deadline:
        time.sleep(0.01)
    assert not _tfl_threads()
    assert _fds() == fds


_HELD_AT_EXIT = {
    "iterator": """
import sys
import torch  # its import makes the interpreter clear concurrent.futures before the iterator
from tfrecord_lite import TFRecordDataset

it = iter(TFRecordDataset(sys.argv[1:], num_threads=2, batch_size=10, parse=lambda r: r))
next(it)
print("held")
""",
    # A generator that closes the iteration as it is collected: the interpreter collects it
    # while clearing the modules, and the resume position (tracked after state_dict()) was
    # once worked out then, with a numpy method that imports as it is first used.
    "generator": """
import sys
from tfrecord_lite import TFRecordDataset

def batches(ds):
    with iter(ds) as it:
        yield from it

ds = TFRecordDataset(sys.argv[1:], batch_size=10)
ds.state_dict()
g = batches(ds)
next(g)
print("held")
""",
    "torch": """
import sys
import numpy as np
from tfrecord_lite import FixedLenFeature
from tfrecord_lite.torch import TFRecordIterableDataset

it = iter(TFRecordIterableDataset(sys.argv[1:], {"x": FixedLenFeature([], np.int64)}, batch_size=10))
next(it)
print("held")
""",
}


@pytest.mark.parametrize("held", sorted(_HELD_AT_EXIT))
def test_an_iteration_held_until_the_interpreter_ends_goes_quietly(tmp_path, held):
    """An iteration still running as the interpreter ends, held by an iterator or by a
    generator (ours for torch, or the user's), leaves no "Exception ignored" (its pool's
    shutdown once met a cleared queue module)."""
    paths = write_files(tmp_path, [2000] * 4, make=lambda f, j: tfl.encode_example({"x": np.array([j])}))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _HELD_AT_EXIT[held], *paths], capture_output=True, text=True,
                          cwd=root, timeout=120, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0 and done.stdout.strip() == "held", done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("max_open_files", [1, 2])
def test_the_next_file_is_read_ahead_within_the_descriptor_bound(tmp_path, monkeypatch, max_open_files):
    """When the open file is on its last piece, the file whose turn comes next starts reading
    (its first piece ready when the consumer gets there), unless that would hold more than
    max_open_files open; the order is the same either way."""
    from tfrecord_lite import _pipeline

    opened = []

    class Logged(TFRecordReader):
        def __init__(self, path, *args, **kwargs):
            opened.append(os.path.basename(path))
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(_pipeline, "TFRecordReader", Logged)
    paths = write_files(tmp_path, [5, 5, 5], size=10)
    it = iter(TFRecordDataset(paths, num_threads=1, max_open_files=max_open_files))
    first = next(it)  # file 0 is one piece: its last
    deadline = time.time() + (5 if max_open_files > 1 else 0.3)
    while len(opened) < 2 and time.time() < deadline:
        time.sleep(0.01)
    assert opened == [os.path.basename(p) for p in paths[:max_open_files]]
    assert [first, *it] == [r for p in paths for r in TFRecordReader(p)]


def _submitted_reads(monkeypatch):
    """The files whose next piece the consumer asks the pool to read, in order."""
    from tfrecord_lite import _pipeline

    submitted = []
    read = _pipeline.Run._read

    def logged(run, slot):
        submitted.append(os.path.basename(slot.path))
        return read(run, slot)

    monkeypatch.setattr(_pipeline.Run, "_read", logged)
    return submitted


def test_the_first_round_of_files_is_read_at_once(backend, tmp_path, monkeypatch):
    """The files the cycle starts with are all being read before the first record is handed
    over, not each as the interleave reaches it (one read at a time, the consumer waiting for
    each); and a file taking a slot that an ended file left starts reading as that file
    closes, not a round later."""
    submitted = _submitted_reads(monkeypatch)
    paths = write_files(tmp_path, [2, 10, 10, 10, 10], size=10)
    names = [os.path.basename(p) for p in paths]
    it = iter(TFRecordDataset(paths, num_threads=4, cycle_length=4, max_open_files=4))
    got = [next(it)]
    assert set(submitted) == set(names[:4])
    got += [next(it) for _ in range(8)]  # up to file 1's third record: file 0 ended before it
    assert got[-1] == record(1, 2, 10) and names[4] in submitted
    got += list(it)
    assert got == interleave([list(TFRecordReader(p)) for p in paths], 4, 1)


def _logged_reads(monkeypatch, events, seconds=0.0):
    """Log every piece read as it ends, with its thread and its records; each first waits
    seconds (so that the consumer waits for it)."""
    from tfrecord_lite import _pipeline

    read_piece = _pipeline.Run._read_piece

    def logged(run, slot):
        time.sleep(seconds)
        piece, piece_map = read_piece(run, slot)
        events.append(("read", threading.current_thread().name, len(piece)))
        return piece, piece_map

    monkeypatch.setattr(_pipeline.Run, "_read_piece", logged)
    return _pipeline


@pytest.mark.parametrize("threads, piece", [(2, 4096), (8, 8192), (16, 16384)])
def test_pieces_grow_with_the_threads(tmp_path, monkeypatch, threads, piece):
    """A piece holds 4,096 records times one per 4 threads (at most 4 times): every piece
    costs the GIL a fixed part, which many threads wait for."""
    events = []
    _logged_reads(monkeypatch, events)
    paths = write_files(tmp_path, [40000])
    got = list(TFRecordDataset(paths, batch_size=1000, num_threads=threads))
    assert sum(map(len, got)) == 40000 and max(n for *_, n in events) == piece


def _slow_reads(monkeypatch, events, seconds=0.005):
    """Pieces of 20 records, each read taking a while, logged (_logged_reads)."""
    _pipeline = _logged_reads(monkeypatch, events, seconds)
    monkeypatch.setattr(_pipeline, "_PIECE_RECORDS", 20)
    return _pipeline


def test_a_read_the_consumer_waits_for_starts_the_next(backend, tmp_path, monkeypatch):
    """While the consumer waits for a file's next piece, that read goes on with the piece
    after, on its own thread, instead of a new task per piece (a round trip of two thread
    wake-ups each); the read-ahead stays one piece handed over and one being read."""
    events = []
    _slow_reads(monkeypatch, events)
    submitted = _submitted_reads(monkeypatch)
    paths = write_files(tmp_path, [400, 300], size=2000)
    it = iter(TFRecordDataset(paths, num_threads=1))
    got = []
    for rec in it:
        got.append(rec)
        assert it.records_read - len(got) <= 2 * max(n for *_, n in events)
    assert got == [r for p in paths for r in TFRecordReader(p)]
    # A task per file, give or take a consumer late for a piece: a task per piece without.
    assert len(events) >= 8 and len(submitted) <= len(events) // 2, (len(events), submitted)
    assert {name for _, name, _ in events} == {"tfrecord_lite_0"}


def test_reads_started_by_reads_do_not_pass_parse_tasks(tmp_path, monkeypatch):
    """A read does not start the next ahead of parse tasks waiting for the thread: with one
    thread and one file, between a parse task's submission and its start at most one read
    ends (the one under way)."""
    events = []
    _pipeline = _slow_reads(monkeypatch, events)
    parse_started = _pipeline.Run._parse_started
    submit = _pipeline.ThreadPoolExecutor.submit

    def logged_submit(pool, fn, *args, **kwargs):
        if getattr(fn, "__name__", "") == "logged_start":
            events.append(("submit", None, 0))
        return submit(pool, fn, *args, **kwargs)

    def logged_start(run, *args):
        events.append(("parse", None, 0))
        return parse_started(run, *args)

    monkeypatch.setattr(_pipeline.ThreadPoolExecutor, "submit", logged_submit)
    monkeypatch.setattr(_pipeline.Run, "_parse_started", logged_start)
    paths = write_files(tmp_path, [600], make=lambda f, j: tfl.encode_example({"id": j}))
    spec = {"id": tfl.VarLenFeature(np.int64)}  # a task per batch: sparse batches are not grouped
    ids = [i for b in TFRecordDataset(paths, spec, num_threads=1, batch_size=40) for i in b["id"].values.tolist()]
    assert ids == list(range(600))
    kinds = [k for k, *_ in events]
    assert kinds.count("submit") == kinds.count("parse") == 15
    waiting = reads = 0
    for kind in kinds:
        if kind == "submit":
            waiting += 1
        elif kind == "parse":
            waiting, reads = waiting - 1, 0
        elif waiting:
            reads += 1
            assert reads <= 1, kinds


@pytest.mark.parametrize("threads", [1, 2])
def test_the_next_iteration_reuses_the_read_buffers(backend, tmp_path, monkeypatch, threads):
    """A dataset keeps the read buffers of an iteration for its next one: fresh ones fault
    their pages in (on 32 KiB images, 77 a pass at one thread, and the pass took 1.4x the
    time)."""
    paths = write_files(tmp_path, [300] * 4, size=20_000)
    ds = TFRecordDataset(paths, batch_size=50, num_threads=threads)
    made = fresh_buffers(monkeypatch)
    assert records_of(ds) == 1200
    first = len(made)
    assert first >= 4
    for _ in range(3):
        assert records_of(ds) == 1200
    # A later pass may hold a buffer or two more at once than the first did; each made all
    # of its own before.
    assert len(made) - first <= 6, (first, len(made))


def test_buffers_the_caller_keeps_are_not_kept_for_the_next_iteration(backend, tmp_path):
    """Batches kept past their iteration keep their buffers; the dataset lets go of those
    as the iteration ends, so dropping the batches frees the memory."""
    paths = write_files(tmp_path, [300] * 2, size=20_000)
    ds = TFRecordDataset(paths, batch_size=50)
    kept = list(ds)
    assert sum(map(len, kept)) == 600
    held = {id(block) for batch in kept for block, _, _ in batch.segments}
    assert held and not held & {id(b) for b in ds._buffers._buffers}
    del kept
    assert records_of(ds) == 600 and len(ds._buffers._buffers) >= len(held)  # free as it ended


def test_read_ahead_is_bounded(tmp_path):
    # 12 files x 400 records of 4 KiB: ~19 MiB in all. A paused consumer must not make the
    # workers read everything.
    paths = write_files(tmp_path, [400] * 12, size=4096)
    it = iter(TFRecordDataset(paths, batch_size=8, num_threads=2, cycle_length=4, parse=lambda r: len(r)))
    next(it)
    time.sleep(0.3)
    ahead = it.records_read
    it.close()
    # cycle_length x (piece in use + piece in flight), pieces of 2 MiB (8 MiB a thread
    # shared by 4 files, 2 pieces each) = 512 records here, but a file has 400.
    assert ahead <= 4 * 2 * 400, ahead


def test_parse_tasks_ahead_are_bounded_in_bytes(tmp_path, monkeypatch):
    """prefetch counts tasks, but tasks of large records stop at _PREFETCH_BYTES: tasks
    of 1,024 images each held a whole file set otherwise."""
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_PREFETCH_BYTES", 64 << 10)
    paths = write_files(tmp_path, [400] * 2, size=4096)
    parsed = []
    it = iter(TFRecordDataset(paths, batch_size=4, num_threads=2, prefetch=40,
                              parse=lambda r: parsed.append(len(r)) or len(r)))
    next(it)
    time.sleep(0.3)
    with TFRecordReader(paths[0]) as r:
        task = sum(len(next(r)) for _ in range(4))  # the bytes of a task's records
    # Tasks were submitted until they held 64 KiB or more; the consumer has taken one.
    assert len(parsed) == -(-(64 << 10) // task) < 40, parsed
    assert sum(1 for _ in it) == 199  # and all 200 batches come
    it = iter(TFRecordDataset(paths, batch_size=4, num_threads=2, prefetch=3, parse=len))
    next(it)
    time.sleep(0.3)
    assert len(it._run._pending) == 2  # small tasks: prefetch (3) is the bound; 1 was taken
    it.close()
