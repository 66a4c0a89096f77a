"""Resuming TFRecordDataset: the state holds file positions, so resume seeks instead of
re-reading; every mode (raw, parsed in place, record sharding, compressed) resumes exactly."""

import json
import threading
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset, _pipeline
from tfrecord_lite.errors import TFRecordError

from ._records import record, write_files

COUNTS = [13, 0, 40, 7, 22]
SPEC = {"id": tfl.FixedLenFeature([], np.int64)}


@pytest.fixture(scope="module")
def raw_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("raw")
    return {None: write_files(d, COUNTS, size=5),
            "gzip": write_files(d, COUNTS, size=5, compression="gzip", name="gz-{:02d}.tfrecord")}


@pytest.fixture(scope="module")
def example_files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("ex"), COUNTS, name="ex-{}.tfrecord",
                       make=lambda f, j: tfl.encode_example({"id": 1000 * f + j}))


def _plain(item):
    if isinstance(item, dict):
        return {k: v.tolist() for k, v in item.items()}
    return item


@settings(max_examples=40, deadline=None)
@given(data=st.data(), compression=st.sampled_from([None, "gzip"]), parsed=st.booleans(),
       batch=st.sampled_from([None, 4]), cycle=st.sampled_from([1, 2, 3]), block=st.sampled_from([1, 3, 300]),
       shard=st.sampled_from([None, (1, 2), (2, 7)]), epochs=st.sampled_from([1, 2]), threads=st.sampled_from([1, 2]),
       piece=st.sampled_from([4096, 3]))
def test_resume_anywhere_continues_exactly(backend, raw_files, example_files, data, compression, parsed, batch,
                                           cycle, block, shard, epochs, threads, piece):
    # piece: records a file's pieces are cut at (read batches split, the rest carried over).
    files = example_files if parsed else raw_files[compression]
    opts = dict(batch_size=batch, cycle_length=cycle, block_length=block, shard=shard, num_epochs=epochs,
                shuffle_files=True, seed=4, num_threads=threads, max_open_files=3)
    spec = SPEC if parsed else None
    full = [_plain(x) for x in TFRecordDataset(files, spec, **opts)]
    k = data.draw(st.integers(0, len(full)))
    with mock.patch.object(_pipeline, "_PIECE_RECORDS", piece):
        ds = TFRecordDataset(files, spec, **opts)
        ds.state_dict()  # file positions are tracked from here on
        it = iter(ds)
        head = [_plain(next(it)) for _ in range(k)]
        state = ds.state_dict()
        it.close()
    assert state["version"] == 2
    fresh = TFRecordDataset(files, spec, **{**opts, "seed": None})
    fresh.load_state_dict(state)
    assert head + [_plain(x) for x in fresh] == full
    assert backend.name in ("cython", "python")


@pytest.mark.parametrize("cycle", [1, 3])
def test_resume_seeks_instead_of_rereading(backend, tmp_path, cycle):
    counts = [3000, 2500, 2000, 1500]
    paths = write_files(tmp_path, counts, size=20)
    opts = dict(cycle_length=cycle, block_length=2, batch_size=10, max_open_files=4)
    total = sum(counts)
    ds = TFRecordDataset(paths, **opts)
    assert ds.state_dict()["cursor"] is None  # at the start; positions are tracked from here on
    it = iter(ds)
    for _ in range((total - 100) // 10):
        next(it)
    state = ds.state_dict()
    rest_want = list(it)
    fresh = TFRecordDataset(paths, **opts)
    fresh.load_state_dict(state)
    it = iter(fresh)
    rest = list(it)
    assert rest == rest_want and sum(map(len, rest)) == 100
    assert it.records_read == 100  # only what was left: the files were opened at their offsets
    # The same position saved in the old format (version 1) replays the epoch instead.
    old = {k: v for k, v in state.items() if k != "cursor"}
    fresh = TFRecordDataset(paths, **opts)
    fresh.load_state_dict({**old, "version": 1})
    it = iter(fresh)
    assert list(it) == rest_want and it.records_read == total
    assert backend.name in ("cython", "python")


def test_resume_with_a_shuffle_buffer_replays(tmp_path):
    paths = write_files(tmp_path, [30, 30])
    opts = dict(shuffle_buffer=8, seed=3, cycle_length=2)
    ds = TFRecordDataset(paths, **opts)
    it = iter(ds)
    head = [next(it) for _ in range(41)]
    state = ds.state_dict()
    assert state["cursor"] is None
    fresh = TFRecordDataset(paths, **opts)
    fresh.load_state_dict(state)
    assert head + list(fresh) == list(TFRecordDataset(paths, **opts))


def test_state_version_and_positions_are_checked(tmp_path):
    paths = write_files(tmp_path, [5, 5])
    ds = TFRecordDataset(paths, cycle_length=2)
    it = iter(ds)
    next(it)
    assert ds.state_dict()["cursor"] is None  # an epoch that started untracked: replayed
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    assert state["cursor"]["slots"][0] == [0, 1, len(record(0, 0)) + 16]
    with pytest.raises(TFRecordError, match="state version 3") as err:
        TFRecordDataset(paths, cycle_length=2).load_state_dict({**state, "version": 3})
    assert "version" in err.value.hint
    bad = {**state, "cursor": {**state["cursor"], "slots": [None] * 3}}
    with pytest.raises(TFRecordError, match="cycle_length"):
        TFRecordDataset(paths, cycle_length=2).load_state_dict(bad)


def test_a_state_does_not_load_into_a_nondeterministic_dataset(tmp_path):
    # Its interleave took the files after the state's opened ones from their start and
    # dropped the ones the state had open at their offsets: 8 of 15 records, silently.
    paths = write_files(tmp_path, [5, 5, 5])
    ds = TFRecordDataset(paths, cycle_length=2)
    ds.state_dict()
    it = iter(ds)
    [next(it) for _ in range(3)]
    state = ds.state_dict()
    it.close()
    loose = TFRecordDataset(paths, cycle_length=2, deterministic=False)
    with pytest.raises(TFRecordError, match=r"load_state_dict\(\) needs deterministic=True") as err:
        loose.load_state_dict(state)
    assert "deterministic=True" in err.value.hint
    assert sorted(loose) == sorted(TFRecordDataset(paths))  # nothing loaded: a whole epoch


def test_reader_start_offset(backend, tmp_path):
    recs = [bytes([i]) * (i % 40) for i in range(200)]
    offsets = np.cumsum([0] + [16 + len(r) for r in recs]).tolist()
    for compression in (None, "gzip"):
        path = str(tmp_path / f"r-{compression}.tfrecord")
        with tfl.TFRecordWriter(path, compression=compression) as w:
            w.write_many(recs)
        for k in (0, 1, 77, 199, 200):
            reader = tfl.TFRecordReader(path, start_offset=offsets[k], start_index=k)
            assert list(reader) == recs[k:]
    with open(str(tmp_path / "r-None.tfrecord"), "rb") as f:
        data = f.read()
    assert list(tfl.TFRecordReader(data, start_offset=offsets[50])) == recs[50:]
    with pytest.raises(tfl.errors.TruncatedRecordError, match="start_offset"):
        list(tfl.TFRecordReader(str(tmp_path / "r-gzip.tfrecord"), start_offset=offsets[-1] + 5))
    # A compressed stream short or damaged before start_offset: the record there cannot be
    # reached. Named by start_offset and start_index, and under 'skip' and 'stop' kept in
    # .skipped as damage met while reading is (it was raised under every policy, naming
    # only the file).
    gz = open(str(tmp_path / "r-gzip.tfrecord"), "rb").read()
    for data, kind in ((gz, tfl.errors.TruncatedRecordError), (gz[:len(gz) // 2], tfl.errors.DataLossError)):
        for policy in ("raise", "skip", "stop"):
            reader = tfl.TFRecordReader(data, on_corrupt=policy, start_offset=offsets[-1] + 5, start_index=200)
            if policy == "raise":
                with pytest.raises(kind, match="while skipping to start_offset") as err:
                    list(reader)
                error = err.value
            else:
                assert list(reader) == []
                (error,) = reader.skipped
            assert type(error) is kind and (error.offset, error.index) == (offsets[-1] + 5, 200), error
    with pytest.raises(tfl.errors.CorruptRecordError) as err:  # mid-record: the error says where
        list(tfl.TFRecordReader(str(tmp_path / "r-None.tfrecord"), start_offset=offsets[3] + 1, start_index=3))
    assert err.value.offset == offsets[3] + 1 and err.value.index == 3
    assert backend.name in ("cython", "python")


@pytest.mark.parametrize("counts, opts", [
    ([0], {}),
    ([0, 0], {"shuffle_buffer": 4, "num_threads": 2}),
    ([3], {"batch_size": 4, "drop_remainder": True}),
    ([1], {"shard": (1, 2)}),
])
def test_repeating_nothing_ends(backend, tmp_path, counts, opts):
    # num_epochs=None over epochs that yield nothing ends, as tf.data's repeat() does, instead
    # of reading the empty epochs forever. Read in a thread, so that a hang fails the test.
    files = write_files(tmp_path, counts, size=5)
    got = []
    reading = threading.Thread(target=lambda: got.append(list(TFRecordDataset(files, num_epochs=None, **opts))),
                               daemon=True)
    reading.start()
    reading.join(60)
    assert not reading.is_alive(), "num_epochs=None over epochs of no records never ended"
    assert got == [[]]
    assert backend.name in ("cython", "python")


@pytest.mark.parametrize("change", [{"epoch": "1"}, {"elements": -3}, {"elements": 2.5}, {"stop_epoch": "2"},
                                    {"seed": None}, {"cursor": 5}, {"cursor": {"slots": [[0, 1]]}},
                                    {"cursor": {"opened": 1, "index": 0, "taken": 0, "slots": [[0, "7", 0]]}}])
def test_a_damaged_state_is_refused_at_load(raw_files, change):
    # A state edited or damaged on its way (a JSON file) raised ValueError, KeyError or TypeError
    # at the first next(), or (negative elements) resumed at a wrong position.
    files = raw_files[None]
    ds = TFRecordDataset(files, batch_size=4)
    ds.state_dict()
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    assert state["cursor"] is not None
    fresh = TFRecordDataset(files, batch_size=4)
    with pytest.raises(tfl.InvalidArgumentError, match="not a dataset state"):
        fresh.load_state_dict({**state, **change})
    fresh.load_state_dict(json.loads(json.dumps(state)))  # as saved to a JSON file
    assert [list(b) for b in it] == [list(b) for b in fresh]


def test_zero_epochs_read_nothing(backend, raw_files):
    # num_epochs=0 was refused ("must be a positive integer"); tf.data's repeat(0) is empty, and
    # a count of epochs left to run (total - done) reaches 0.
    ds = TFRecordDataset(raw_files[None], num_epochs=0, shuffle_buffer=4, seed=3)
    assert list(ds) == [] and list(ds) == []
    state = ds.state_dict()
    assert (state["epoch"], state["elements"], state["stop_epoch"]) == (0, 0, 0)
    fresh = TFRecordDataset(raw_files[None], num_epochs=0, shuffle_buffer=4, seed=3)
    fresh.load_state_dict(state)
    assert list(fresh) == []
    for bad in (-1, 1.5, "2"):
        with pytest.raises(tfl.InvalidArgumentError, match="num_epochs must be a non-negative integer.*None to repeat"):
            TFRecordDataset(raw_files[None], num_epochs=bad)
    assert backend.name in ("cython", "python")


@pytest.mark.parametrize("memory_map", [False, True])
def test_resuming_in_a_file_cut_shorter_since_says_so(backend, tmp_path, memory_map):
    # A start_offset past the end of an uncompressed file read as no records at all (a
    # compressed one raised): a resumed dataset silently skipped the rest of a file rewritten
    # shorter since its state was saved.
    path = write_files(tmp_path, [40], size=5)[0]
    ds = TFRecordDataset([path], batch_size=4, memory_map=memory_map)
    ds.state_dict()
    it = iter(ds)
    for _ in range(5):
        next(it)
    state = ds.state_dict()
    write_files(tmp_path, [3], size=5)
    fresh = TFRecordDataset([path], batch_size=4, memory_map=memory_map)
    fresh.load_state_dict(state)
    with pytest.raises(tfl.TruncatedRecordError, match=r"record 20, byte offset \d+: the input ends \d+ bytes early "
                       r"\(while skipping to start_offset \d+\)\. Pass an offset saved from this same file") as info:
        list(fresh)
    assert info.value.path == path and info.value.index == 20
    data = open(path, "rb").read()
    with pytest.raises(tfl.TruncatedRecordError, match="the input ends 1 bytes early"):
        list(tfl.TFRecordReader(data, start_offset=len(data) + 1))
    assert list(tfl.TFRecordReader(data, start_offset=len(data))) == []


def test_a_state_of_other_options_names_the_ones_that_differ(raw_files):
    # It said only "different files or options": resuming on a machine with more cores, a
    # user had to guess that the default cycle_length follows num_threads.
    files = raw_files[None]
    ds = TFRecordDataset(files, num_threads=2)
    next(iter(ds))
    state = ds.state_dict()
    for other, says in [({"num_threads": 4}, r"different cycle_length \(2 then, 4 now; by default it is "
                                             r"min\(num_threads, max_open_files\)\)"),
                        ({"num_threads": 2, "batch_size": 3, "shard": (0, 2)},
                         r"different shard \(None then, \[0, 2\] now\), batch_size \(None then, 3 now\)"),
                        ({"num_threads": 2, "files": files[:-1]}, r"different files \(5 then, 4 now; then, not now: "),
                        ({"num_threads": 2, "files": files[::-1]}, r"different files \(in another order\)")]:
        fresh = TFRecordDataset(other.pop("files", files), **other)
        with pytest.raises(tfl.InvalidArgumentError, match=says + ".*Build the dataset with the same files"):
            fresh.load_state_dict(state)


def test_set_epoch_of_a_loaded_states_epoch_keeps_its_position(backend, raw_files):
    # A training loop resumed with load_state_dict() and then called set_epoch(epoch) as the
    # epoch started, as it does for each: the position was dropped and the epoch's records
    # before it came again.
    files = raw_files[None]
    ds = TFRecordDataset(files, shuffle_buffer=8, seed=5)
    ds.set_epoch(1)
    it = iter(ds)
    head = [next(it) for _ in range(10)]
    state = ds.state_dict()
    rest = list(it)
    fresh = TFRecordDataset(files, shuffle_buffer=8, seed=5)
    fresh.load_state_dict(state)
    fresh.set_epoch(1)
    assert list(fresh) == rest and sorted(head + rest) == sorted(TFRecordDataset(files))
    fresh.load_state_dict(state)
    fresh.set_epoch(2)  # another epoch: from its start
    assert len(list(fresh)) == len(head + rest)
    assert backend.name in ("cython", "python")
