"""TFRecordDataset: file resolution, interleave order, threads, batching, parse step,
shuffling, sharding, errors from workers, early shutdown, bounded read-ahead, resume."""

import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from ._records import fresh_buffers, interleave, record, records_of, write_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset, TFRecordReader, TFRecordWriter
from tfrecord_lite.errors import CorruptRecordError, TFRecordError

COUNTS = [3, 0, 7, 1, 12, 5]


@pytest.fixture
def files(tmp_path):
    return write_files(tmp_path, COUNTS)


def expected(counts, cycle=1, block=1):
    return interleave([[record(f, j) for j in range(n)] for f, n in enumerate(counts)], cycle, block)


def test_sources_list_glob_directory(backend, tmp_path, files):
    want = expected(COUNTS)
    assert list(TFRecordDataset(files)) == want
    assert list(TFRecordDataset(str(tmp_path / "part-*.tfrecord"))) == want
    (tmp_path / "part-00000.tfrecord.index").write_text("")  # sidecars are not data files
    assert list(TFRecordDataset(tmp_path)) == want
    assert list(TFRecordDataset(files[2])) == [record(2, j) for j in range(7)]
    assert backend.framing is not None and backend.name in ("cython", "python")
    with pytest.raises(TFRecordError, match="no TFRecord files"):
        TFRecordDataset(str(tmp_path / "nothing-*"))


def test_a_file_named_like_a_glob_is_itself(tmp_path):
    """A path that names an existing file is that file, glob characters and all (the CLI
    reads it so too); a pattern that names no file still globs."""
    for name, data in (("a[1].tfrecord", b"literal"), ("a1.tfrecord", b"match"), ("b*?.tfrecord", b"star")):
        with TFRecordWriter(str(tmp_path / name)) as w:
            w.write(data)
    assert list(TFRecordDataset(str(tmp_path / "a[1].tfrecord"))) == [b"literal"]
    assert list(TFRecordDataset("file://" + str(tmp_path / "a[1].tfrecord"))) == [b"literal"]
    assert list(TFRecordDataset(str(tmp_path / "b*?.tfrecord"))) == [b"star"]
    assert list(TFRecordDataset(str(tmp_path / "a[0-9].tfrecord"))) == [b"match"]
    assert list(TFRecordDataset(str(tmp_path / "a*.tfrecord"))) == [b"match", b"literal"]  # sorted
    assert len(tfl.IndexedDataset(str(tmp_path / "a[1].tfrecord"))) == 1


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cycle,block", [(1, 1), (2, 1), (3, 2), (4, 3), (6, 1), (8, 5)])
def test_interleave_order_matches_tf_model(backend, files, threads, cycle, block):
    ds = TFRecordDataset(files, cycle_length=cycle, block_length=block, num_threads=threads, max_open_files=8)
    assert list(ds) == expected(COUNTS, cycle, block)


def test_nondeterministic_keeps_every_record(backend, files):
    got = list(TFRecordDataset(files, deterministic=False, num_threads=2, cycle_length=3))
    assert sorted(got) == sorted(expected(COUNTS))
    with pytest.raises(TFRecordError, match="deterministic"):
        TFRecordDataset(files, deterministic=False).state_dict()


def test_batches_and_remainder(files):
    flat = expected(COUNTS)
    batches = list(TFRecordDataset(files, batch_size=5))
    assert [len(b) for b in batches] == [5] * 5 + [3]
    assert sum(batches, []) == flat
    assert [len(b) for b in TFRecordDataset(files, batch_size=5, drop_remainder=True)] == [5] * 5


def test_parse_step_runs_in_workers(files):
    seen = set()

    def parse(records):
        seen.add(threading.current_thread().name)
        return {"n": [len(r) for r in records], "first": [r[:1] for r in records]}

    batches = list(TFRecordDataset(files, parse=parse, batch_size=4, num_threads=2))
    assert sum(len(b["n"]) for b in batches) == sum(COUNTS)
    assert all(name.startswith("tfrecord_lite") for name in seen)
    # Unbatched: one dict per record, in order.
    items = list(TFRecordDataset(files, parse=parse))
    assert [i["first"] for i in items] == [r[:1] for r in expected(COUNTS)]


def test_raw_batches_are_made_as_the_consumer_takes_them(backend, tmp_path, monkeypatch):
    """Batched raw output is index arrays over the read blocks, made on the consumer's thread
    when it asks for a batch: no batch waits in the pool's queue holding read buffers."""
    from tfrecord_lite import _pipeline

    made, real = [], _pipeline._parse_task

    def logged(parse, records, sizes):
        made.append(threading.current_thread())
        return real(parse, records, sizes)

    monkeypatch.setattr(_pipeline, "_parse_task", logged)
    monkeypatch.setattr(_pipeline, "_TASK_RECORDS", 8)  # a task per batch
    counts = [40, 0, 75, 33]
    paths = write_files(tmp_path, counts, size=50)
    want = interleave([[record(f, j, 50) for j in range(n)] for f, n in enumerate(counts)], 3, 1)
    it = iter(TFRecordDataset(paths, batch_size=8, num_threads=3))
    first = next(it)
    time.sleep(0.2)  # workers read ahead; no batch is made ahead of the consumer
    assert len(made) == 1 and isinstance(first, tfl.RecordBatch)
    batches = [first, *it]
    assert sum((list(b) for b in batches), []) == want and len(made) == len(batches) == 19
    assert set(made) == {threading.main_thread()}
    # A spec's batches are still parsed in the pool.
    made.clear()
    spec = {"x": tfl.FixedLenFeature([], np.int64, default_value=0)}
    paths = write_files(tmp_path / "ex", [30, 30], make=lambda f, j: tfl.encode_example({"x": 100 * f + j}))
    assert sum(len(b["x"]) for b in TFRecordDataset(paths, spec, batch_size=8, num_threads=2)) == 60
    assert made and threading.main_thread() not in made


def test_compressed_files(backend, tmp_path):
    paths = write_files(tmp_path, [4, 6], compression="gzip") + write_files(
        tmp_path, [0, 0, 3], compression="zlib", name="z-{:02d}.tfrecord")
    got = list(TFRecordDataset(paths, num_threads=2, cycle_length=2))
    assert sorted(got) == sorted([record(f, j) for f, n in enumerate([4, 6]) for j in range(n)]
                                 + [record(2, j) for j in range(3)])


def test_worker_error_carries_location(backend, tmp_path, files):
    bad = tmp_path / "bad.tfrecord"
    data = bytearray(open(files[4], "rb").read())
    data[16 * 3 + 6 * 3 + 12] ^= 0xFF  # inside record 3's data
    bad.write_bytes(bytes(data))
    ds = TFRecordDataset([files[0], str(bad)], num_threads=2, cycle_length=2)
    got = []
    with pytest.raises(CorruptRecordError) as info:
        for r in ds:
            got.append(r)
    assert info.value.path == str(bad) and info.value.index == 3 and info.value.offset is not None
    # Records before the bad one are delivered first, in interleave order.
    assert got == [record(f, j) for j in range(3) for f in (0, 4)]
    skipped = list(TFRecordDataset([str(bad)], on_corrupt="skip"))
    assert len(skipped) == 11 and record(4, 3) not in skipped
    assert len(list(TFRecordDataset([str(bad)], on_corrupt="stop"))) == 3


@pytest.mark.parametrize("piece", [2, 4, 5, 4096])
def test_records_before_a_bad_one_come_first_in_every_output(backend, tmp_path, monkeypatch, piece):
    # As TensorFlow does: every record before the bad one is delivered (whole batches only,
    # parsed or raw, grouped into tasks or not), then its error; skipping keeps the others.
    # piece: records a file's pieces are cut at (read batches split, the rest carried over).
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_PIECE_RECORDS", piece)
    paths = write_files(tmp_path, [3, 12], make=lambda f, j: tfl.encode_example({"id": 100 * f + j}))
    frames = tfl.index.scan_index(paths[1])[0]
    data = bytearray(open(paths[1], "rb").read())
    data[frames[7] + 13] ^= 0xFF  # inside record 7's data
    open(paths[1], "wb").write(bytes(data))
    good = [0, 100, 1, 101, 2, 102] + [100 + j for j in range(3, 7)]  # interleave order, up to the bad one
    spec = {"id": tfl.FixedLenFeature([], np.int64)}
    ids = {"raw": lambda b: [int(tfl.parse_example([r], spec)["id"][0]) for r in (b if isinstance(b, list) else [b])],
           "parsed": lambda b: np.atleast_1d(b["id"]).tolist()}
    for kind, options in [("raw", {}), ("raw", {"batch_size": 1}), ("raw", {"batch_size": 3}),
                          ("parsed", {}), ("parsed", {"batch_size": 3}),
                          ("parsed", {"batch_size": 3, "parse": None, "features": {
                              "id": tfl.VarLenFeature(np.int64)}})]:
        opts = {"num_threads": 2, "cycle_length": 2, **options}
        features = opts.pop("features", spec if kind == "parsed" else None)
        got = []
        with pytest.raises(CorruptRecordError) as info:
            for item in TFRecordDataset(paths, features, **opts):
                if "features" in options:
                    got.extend(item["id"].values.tolist())
                else:
                    got.extend(ids[kind](list(item) if kind == "raw" and opts.get("batch_size") else item))
        assert (info.value.path, info.value.index) == (paths[1], 7)
        batch = opts.get("batch_size") or 1
        assert got == good[:len(good) // batch * batch], (kind, options)
    skipped = [i for b in TFRecordDataset(paths, spec, on_corrupt="skip", cycle_length=2, batch_size=3)
               for i in b["id"].tolist()]
    assert skipped == good + [100 + j for j in range(8, 12)]


@pytest.mark.parametrize("batch", [None, 4])
def test_skipped_records_keep_their_numbers_for_sharding_and_resume(backend, tmp_path, batch):
    # A record dropped by on_corrupt="skip" still has its number in the file: record sharding
    # keeps records by their index in the file, and a resumed run numbers records as a fresh
    # one does (its errors name the right index).
    path = write_files(tmp_path, [20])[0]
    frames = tfl.index.scan_index(path)[0]
    data = bytearray(open(path, "rb").read())
    for bad in (3, 12):
        data[frames[bad] + 13] ^= 0xFF
    open(path, "wb").write(bytes(data))
    good = [record(0, j) for j in range(20) if j not in (3, 12)]
    shards = [[r for b in TFRecordDataset(path, shard=(i, 2), on_corrupt="skip", batch_size=batch)
               for r in (b if batch else [b])] for i in range(2)]
    assert shards == [[r for r in good if int(r.split(b":")[1]) % 2 == i] for i in range(2)]
    ds = TFRecordDataset(path, on_corrupt="skip", batch_size=2)
    ds.state_dict()  # positions are tracked from here on
    it = iter(ds)
    head = [list(next(it)) for _ in range(3)]  # past the skipped record 3
    state = ds.state_dict()
    it.close()
    assert [r for b in head for r in b] == good[:6]
    fresh = TFRecordDataset(path, on_corrupt="raise", batch_size=2)
    fresh.load_state_dict(state)
    with pytest.raises(CorruptRecordError) as info:
        list(fresh)
    assert (info.value.index, info.value.offset) == (12, frames[12])


def _good_records(path, on_corrupt):
    """(index in the file, record) of what a reader of the file alone keeps: its skipped
    records keep their numbers."""
    reader = TFRecordReader(path, compression=None, on_corrupt=on_corrupt)
    records, bad = list(reader), {e.index for e in reader.skipped}
    numbers = (j for j in range(len(records) + len(bad)) if j not in bad)
    return list(zip(numbers, records))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(0, 9), min_size=1, max_size=6), data=st.data(),
       on_corrupt=st.sampled_from(["skip", "stop"]), count=st.integers(1, 4), deterministic=st.booleans(),
       threads=st.integers(1, 3), cycle=st.integers(1, 3), batch=st.sampled_from([None, 2]))
def test_shards_of_damaged_files_split_the_good_records(backend, tmp_path_factory, counts, data, on_corrupt, count,
                                                        deterministic, threads, cycle, batch):
    # Whether by file or by record, in any order, the shards of damaged files hold exactly the
    # records that readers of each file alone keep, split by shard_plan's rule.
    paths = write_files(tmp_path_factory.mktemp("shards"), counts)
    for f, where, flip in data.draw(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 1), st.integers(1, 255)),
                                             max_size=3)):
        if f < len(paths) and os.path.getsize(paths[f]):
            damaged = bytearray(open(paths[f], "rb").read())
            damaged[int(where * (len(damaged) - 1))] ^= flip
            open(paths[f], "wb").write(bytes(damaged))
    good = [_good_records(p, on_corrupt) for p in paths]
    for i in range(count):
        positions, rule = tfl.files.shard_plan(len(paths), (i, count))
        want = [r for f in positions for j, r in good[f] if rule is None or (f + j) % count == i]
        ds = TFRecordDataset(paths, shard=(i, count), on_corrupt=on_corrupt, deterministic=deterministic,
                             num_threads=threads, cycle_length=cycle, batch_size=batch)
        got = []
        reading = threading.Thread(target=lambda: got.extend(r for b in ds for r in (b if batch else [b])),
                                   daemon=True)
        reading.start()
        reading.join(60)
        assert not reading.is_alive(), "the read never ended"
        assert sorted(got) == sorted(want), (i, count)
    assert backend.name in ("cython", "python")


def test_missing_file_raises(tmp_path, files):
    with pytest.raises(FileNotFoundError):
        list(TFRecordDataset(files + [str(tmp_path / "gone.tfrecord")]))


def test_a_directory_given_as_a_file_says_what_to_pass_instead(backend, tmp_path, files):
    # It was open()'s bare "Is a directory".
    says = "names a directory, not a file: give a file in it, or read all of its files with TFRecordDataset"
    for read in (lambda: list(TFRecordReader(tmp_path)), lambda: list(TFRecordDataset([files[0], tmp_path]))):
        with pytest.raises(IsADirectoryError, match=says) as info:
            read()
        assert info.value.filename == str(tmp_path)


def test_a_reader_of_something_unreadable_says_what_to_pass(backend, files):
    # None or a number failed at the first read with AttributeError, a text-mode file with
    # UnicodeDecodeError.
    with open(files[2]) as text:
        for source in (None, 5, text):
            with pytest.raises(tfl.ArgumentTypeError, match="not a path, a binary file or bytes. Pass a path, or a "
                               r"file opened with open\(path, 'rb'\)"):
                TFRecordReader(source)


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


def test_shuffle_reproducible_and_differs_per_epoch(files):
    def run(seed, **kw):
        return list(TFRecordDataset(files, shuffle_buffer=8, shuffle_files=True, seed=seed, **kw))

    a, b = run(7), run(7)
    assert a == b and sorted(a) == sorted(expected(COUNTS)) and a != expected(COUNTS)
    assert run(8) != a
    two = run(7, num_epochs=2)
    assert two[: len(a)] == a and two[len(a):] != a and sorted(two[len(a):]) == sorted(a)
    ds = TFRecordDataset(files, shuffle_buffer=8, seed=3)
    first, second = list(ds), list(ds)  # each iter() is the next epoch
    assert first != second
    ds.set_epoch(0)
    assert list(ds) == first
    # Epochs count from 0: set_epoch(-1) was taken, and the iter() after it raised numpy's
    # ValueError; set_epoch(1.5) was truncated to 1.
    with pytest.raises(tfl.InvalidArgumentError, match="epoch must be >= 0"):
        ds.set_epoch(-1)
    with pytest.raises(tfl.ArgumentTypeError, match="epoch must be an integer"):
        ds.set_epoch(1.5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(0, 9), min_size=1, max_size=7), count=st.integers(1, 9),
       shuffle=st.booleans())
def test_shards_partition_records(tmp_path_factory, counts, count, shuffle):
    paths = write_files(tmp_path_factory.mktemp("shard"), counts)
    everything = sorted(expected(counts))
    union = []
    for index in range(count):
        union += list(TFRecordDataset(paths, shard=(index, count), shuffle_files=shuffle,
                                      shuffle_buffer=3 if shuffle else 0, cycle_length=2))
    assert sorted(union) == everything


def test_shard_modes(tmp_path):
    paths = write_files(tmp_path, [4, 4, 4, 4])
    assert list(TFRecordDataset(paths, shard=(1, 2))) == [record(f, j) for f in (1, 3) for j in range(4)]
    # Fewer files than shards: split by record.
    assert list(TFRecordDataset(paths[:1], shard=(1, 3))) == [record(0, 1)]
    with pytest.raises(TFRecordError):
        TFRecordDataset(paths, shard=(2, 2))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, 40), batch=st.sampled_from([None, 3]), buffer=st.sampled_from([0, 5]),
       epochs=st.sampled_from([1, 2]), cycle=st.sampled_from([1, 3]))
def test_resume_continues_exactly(files, k, batch, buffer, epochs, cycle):
    opts = dict(batch_size=batch, shuffle_buffer=buffer, shuffle_files=bool(buffer), num_epochs=epochs,
                cycle_length=cycle, max_open_files=4, seed=11)
    full = list(TFRecordDataset(files, **opts))
    k = min(k, len(full))
    ds = TFRecordDataset(files, **opts)
    it = iter(ds)
    head = [next(it) for _ in range(k)]
    state = ds.state_dict()
    it.close()
    fresh = TFRecordDataset(files, **{**opts, "seed": None})
    fresh.load_state_dict(state)
    assert head + list(fresh) == full


def test_resume_rejects_other_dataset(files):
    state = TFRecordDataset(files, batch_size=2).state_dict()
    with pytest.raises(TFRecordError, match=r"different batch_size \(2 then, 3 now\)"):
        TFRecordDataset(files, batch_size=3).load_state_dict(state)


def test_option_validation(files):
    for bad in (dict(batch_size=0), dict(num_threads=0), dict(cycle_length=5, max_open_files=4),
                dict(on_corrupt="ignore"), dict(features={}, parse=len), dict(block_length=1.5)):
        with pytest.raises(TFRecordError):
            TFRecordDataset(files, **bad)


def test_many_records_in_one_file_match_reader(backend, tmp_path):
    path = str(tmp_path / "big.tfrecord")
    with TFRecordWriter(path) as w:
        w.write_many(os.urandom(n % 700) for n in range(5000))
    want = list(TFRecordReader(path))
    assert list(TFRecordDataset([path], num_threads=2)) == want
    assert sum(TFRecordDataset([path], batch_size=999), []) == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(0, 8), min_size=2, max_size=5), cycle=st.integers(2, 4),
       block=st.integers(1, 3), batch=st.integers(2, 5), threads=st.sampled_from([1, 2]),
       piece=st.sampled_from([2, 3, 4096]), data=st.data())
def test_a_bad_record_stops_the_interleave_where_tensorflow_does(backend, tmp_path_factory, monkeypatch, counts,
                                                                cycle, block, batch, threads, piece, data):
    # As TensorFlow: every record the interleave reaches before a bad one, then that record's
    # error. Not the error of a bad record next in its own file but later in the interleave,
    # nor any error before the other files' blocks that come first: parsed and batched output
    # take whole rounds of blocks at a time, reading each file's next piece ahead of its turn.
    # Batched output stops at the last whole batch. A position saved on the way resumes to
    # the same records and error.
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_PIECE_RECORDS", piece)
    bad = [data.draw(st.none() | st.integers(0, n - 1)) if n else None for n in counts]
    paths = write_files(tmp_path_factory.mktemp("bad"), counts,
                        make=lambda f, j: tfl.encode_example({"id": 100 * f + j}))
    for path, b in zip(paths, bad):
        if b is not None:
            frames = tfl.index.scan_index(path)[0]
            raw = bytearray(open(path, "rb").read())
            raw[frames[b] + 13] ^= 0xFF  # inside the record's data
            open(path, "wb").write(bytes(raw))
    order = interleave([[100 * f + j for j in range(n if b is None else b)] + ([(paths[f], b)] if b is not None else [])
                        for f, (n, b) in enumerate(zip(counts, bad))], cycle, block)
    cut = next((i for i, x in enumerate(order) if type(x) is tuple), len(order))
    good, error = order[:cut], order[cut:cut + 1]
    spec = {"id": tfl.FixedLenFeature([], np.int64)}
    opts = dict(cycle_length=cycle, block_length=block, num_threads=threads, max_open_files=cycle + 1)

    def ids(item):
        if isinstance(item, tfl.RecordBatch):
            return tfl.parse_example(list(item), spec)["id"].tolist()
        return np.atleast_1d(item["id"]).tolist()

    def run(it):
        got = []
        try:
            for item in it:
                got += ids(item)
        except CorruptRecordError as exc:
            return got, [(exc.path, exc.index)]
        return got, []

    for features, size in [(spec, None), (None, batch), (spec, batch)]:
        want = good if size is None or not error else good[:len(good) // size * size]
        assert run(TFRecordDataset(paths, features, batch_size=size, **opts)) == (want, error), (features, size)
        ds = TFRecordDataset(paths, features, batch_size=size, **opts)
        ds.state_dict()  # positions are tracked from here on
        it = iter(ds)
        k = data.draw(st.integers(0, len(want) // (size or 1)))
        head = [x for _ in range(k) for x in ids(next(it))]
        state = ds.state_dict()
        it.close()
        fresh = TFRecordDataset(paths, features, batch_size=size, **opts)
        fresh.load_state_dict(state)
        rest, raised = run(fresh)
        assert (head + rest, raised) == (want, error), (features, size, k)


@pytest.mark.parametrize("threads", [1, 2])
def test_unbatched_parse_error_comes_after_the_records_before_it(backend, tmp_path, threads):
    # Unbatched output is parsed in groups of records: an error in a group lost the group's
    # records before the bad one (up to 63), where TensorFlow's map(parse_single_example)
    # delivers each of them first.
    paths = write_files(tmp_path, [4, 10], make=lambda f, j: b"\xff\xff" if (f, j) == (1, 5)
                        else tfl.encode_example({"id": 100 * f + j}))
    spec = {"id": tfl.FixedLenFeature([], np.int64)}

    def custom(records):
        if b"\xff\xff" in list(records):
            raise ValueError("not an Example")
        return {"id": tfl.parse_example(records, spec)["id"]}

    want = [0, 100, 1, 101, 2, 102, 3, 103, 104]
    for parse, error in (({"features": spec}, tfl.ExampleDecodeError), ({"parse": custom}, ValueError)):
        got = []
        with pytest.raises(error) as info:
            for item in TFRecordDataset(paths, cycle_length=2, num_threads=threads, **parse):
                got.append(int(item["id"]))
        assert got == want, parse
    assert (info.type, str(info.value)) == (ValueError, "not an Example")
    exc = pytest.raises(tfl.ExampleDecodeError, list, TFRecordDataset(paths, spec, cycle_length=2)).value
    assert (exc.path, exc.index) == (paths[1], 5)


@pytest.mark.parametrize("threads", [1, 2])
def test_an_iterator_collected_in_its_own_worker_stops(backend, tmp_path, monkeypatch, threads):
    # An iterator in a reference cycle (a trainer holding itself) is freed by whichever thread
    # runs the garbage collection, one of its own workers too: close() there tried to join
    # that thread ("RuntimeError: cannot join current thread", ignored), and left the files open.
    paths = write_files(tmp_path, [5000, 5000], size=100)
    go, calls, unraisable = threading.Event(), [], []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    def parse(records):
        calls.append(threading.current_thread())
        if len(calls) > 1:
            assert go.wait(10)
            gc.collect()  # as an allocation in this worker may
        return len(records)

    def held():
        return [path for path in paths for fd in os.listdir("/proc/self/fd")
                if os.path.exists(f"/proc/self/fd/{fd}") and os.path.samefile(f"/proc/self/fd/{fd}", path)]

    class Trainer:
        def __init__(self):
            self.me = self
            self.it = iter(TFRecordDataset(paths, batch_size=2, parse=parse, num_threads=threads, cycle_length=2))

    gc.disable()
    try:
        trainer = Trainer()
        assert next(trainer.it) == 2
        del trainer
        go.set()
        deadline = time.monotonic() + 10
        while (held() or any(t.name.startswith("tfrecord_lite") for t in threading.enumerate())) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        gc.enable()
    assert len(calls) > 1 and unraisable == [] and held() == []
    assert not any(t.name.startswith("tfrecord_lite") for t in threading.enumerate())
