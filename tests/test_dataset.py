"""TFRecordDataset: file resolution, interleave order, threads, batching, parse step,
shuffling, sharding, errors from workers, resume (its pipeline: test_dataset_pipeline)."""

import gc
import os
import sys
import threading
import time

import numpy as np
import pytest
from ._records import interleave, record, write_files
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
