"""Interleave order against live TensorFlow: TFRecordDataset(deterministic=True) must yield
exactly what Dataset.from_tensor_slices(files).interleave(TFRecordDataset, cycle_length,
block_length) yields."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset, TFRecordWriter

from .._records import interleave
from .test_tf_example import assert_same

COUNTS = [5, 0, 9, 1, 13, 4, 7]


@pytest.mark.interop
def test_interleave_matches_tensorflow(backend, tmp_path):
    import tensorflow as tf  # missing TensorFlow must fail this test, not skip it

    files = []
    for f, n in enumerate(COUNTS):
        path = str(tmp_path / f"{f}.tfrecord")
        with TFRecordWriter(path, compression="gzip" if f % 3 == 2 else None) as w:
            for j in range(n):
                w.write(b"%d:%d" % (f, j))
        files.append(path)
    for cycle, block in [(1, 1), (2, 1), (3, 2), (4, 3), (7, 1), (9, 4)]:
        want = [
            r.numpy()
            for r in tf.data.Dataset.from_tensor_slices(files).interleave(
                lambda p: tf.data.TFRecordDataset(p, compression_type=tf.where(
                    tf.strings.regex_full_match(p, r".*/(2|5)\.tfrecord"), "GZIP", "")),
                cycle_length=cycle, block_length=block)
        ]
        got = list(TFRecordDataset(files, cycle_length=cycle, block_length=block, num_threads=2,
                                   max_open_files=9))
        assert got == want, (backend.name, cycle, block)


@pytest.mark.interop
@pytest.mark.parametrize("counts, bad, cycle, block", [
    ([5, 0, 10], {0: 4}, 2, 2),  # another file's blocks come before the bad record
    ([11, 4, 3], {1: 3, 2: 2}, 3, 1),  # the later file's bad record is reached first
    ([6, 7, 2, 9], {0: 1, 3: 5}, 2, 3),
])
def test_a_bad_record_stops_the_interleave_where_tensorflow_does(backend, tmp_path, counts, bad, cycle, block):
    # TensorFlow delivers every record its interleave reaches before a bad one, then raises
    # DataLossError; so does TFRecordDataset, in every output (whole batches when batched),
    # with the error of the bad record reached (TensorFlow's message names no file: the
    # interleave model of the other tests, checked against TensorFlow here, tells which).
    import tensorflow as tf

    from tfrecord_lite.errors import DataLossError

    files = []
    for f, n in enumerate(counts):
        path = str(tmp_path / f"{f}.tfrecord")
        with TFRecordWriter(path) as w:
            w.write_many(tfl.encode_example({"id": 100 * f + j}) for j in range(n))
        if f in bad:
            frames = tfl.index.scan_index(path)[0]
            data = bytearray(open(path, "rb").read())
            data[frames[bad[f]] + 13] ^= 0xFF  # inside the record's data
            open(path, "wb").write(bytes(data))
        files.append(path)
    spec = {"id": tfl.FixedLenFeature([], np.int64)}
    want = []
    with pytest.raises(tf.errors.DataLossError):
        for r in tf.data.Dataset.from_tensor_slices(files).interleave(
                tf.data.TFRecordDataset, cycle_length=cycle, block_length=block):
            want.append(int(tfl.parse_example([r.numpy()], spec)["id"][0]))
    model = interleave([[100 * f + j for j in range(bad.get(f, n))] + ([(files[f], bad[f])] if f in bad else [])
                        for f, n in enumerate(counts)], cycle, block)
    cut = next(i for i, x in enumerate(model) if type(x) is tuple)
    assert model[:cut] == want
    for features, size in [(None, None), (spec, None), (None, 4), (spec, 4)]:
        got = []
        with pytest.raises(DataLossError) as info:
            for item in TFRecordDataset(files, features, batch_size=size, cycle_length=cycle, block_length=block,
                                        num_threads=1, max_open_files=cycle):
                if features is None:
                    item = tfl.parse_example(list(item) if size else [item], spec)
                got += np.atleast_1d(item["id"]).tolist()
        whole = want if size is None else want[:len(want) // size * size]
        assert (got, (info.value.path, info.value.index)) == (whole, model[cut]), (backend.name, features, size)


def _damaged_files(rng, prefix, count):
    """count files, plain, GZIP or ZLIB, some cut short and some plain ones with a bit
    flipped (in deflate data TensorFlow also drops what its last read had decoded: README,
    deliberate differences), and their TensorFlow compression types."""
    files, types = [], []
    for f in range(count):
        compression = rng.choice([None, "gzip", "zlib"])
        path = f"{prefix}-{f}.tfrecord"
        with TFRecordWriter(path, compression=compression) as w:
            w.write_many(b"%d:%d:" % (f, j) + rng.randbytes(rng.randrange(300)) for j in range(rng.randrange(8)))
        data = bytearray(open(path, "rb").read())
        damage = rng.choice(["cut", "flip" if compression is None else "cut", None])
        if damage == "cut" and len(data) > 1:
            data = data[:rng.randrange(1, len(data))]
        elif damage == "flip" and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        open(path, "wb").write(bytes(data))
        files.append(path)
        types.append((compression or "").upper())
    return files, types


def _tf_ignoring_errors(file_list, cycle, block):
    """TensorFlow's records of (path, compression type) pairs, interleaved, ignore_errors()."""
    import tensorflow as tf

    return [r.numpy() for r in file_list.interleave(lambda p, t: tf.data.TFRecordDataset(p, compression_type=t),
                                                    cycle_length=cycle, block_length=block).ignore_errors()]


@pytest.mark.interop
@pytest.mark.parametrize("seed", range(4))
def test_stop_ends_a_damaged_compressed_file_where_tensorflow_ignore_errors_does(backend, tmp_path, seed):
    # on_corrupt="stop" is ignore_errors(): a truncated GZIP or ZLIB stream ends its file after
    # the records decompressed before the cut, and the interleave goes on with the other files
    # (the error was raised, ending the whole pass). Bit flips only in plain files: in deflate
    # data TensorFlow also drops what its last read had decoded (README, deliberate differences).
    import random

    import tensorflow as tf

    rng = random.Random(seed)
    for trial in range(12):
        files, types = _damaged_files(rng, tmp_path / f"{seed}-{trial}", rng.randrange(1, 4))
        cycle, block = rng.randrange(1, 4), rng.randrange(1, 3)
        want = _tf_ignoring_errors(tf.data.Dataset.from_tensor_slices((files, types)), cycle, block)
        got = list(TFRecordDataset(files, cycle_length=cycle, block_length=block, on_corrupt="stop", num_threads=2))
        assert got == want, (trial, files, cycle, block)


@pytest.mark.interop
@pytest.mark.parametrize("seed", range(2))
def test_file_shards_under_stop_are_tensorflows_shards_of_the_file_list(backend, tmp_path, seed):
    # shard=(i, n) over at least n files takes files i, i + n, ...: TensorFlow's
    # from_tensor_slices(files).shard(n, i) before the interleave, ignore_errors() after it.
    # The same order when deterministic, the same records in any order when not.
    import collections
    import random

    import tensorflow as tf

    rng = random.Random(seed)
    for trial in range(6):
        files, types = _damaged_files(rng, tmp_path / f"{seed}-{trial}", rng.randrange(2, 7))
        count, cycle, block = rng.randrange(2, len(files) + 1), rng.randrange(1, 4), rng.randrange(1, 3)
        for i in range(count):
            want = _tf_ignoring_errors(tf.data.Dataset.from_tensor_slices((files, types)).shard(count, i), cycle, block)
            for deterministic in (True, False):
                got = list(TFRecordDataset(files, cycle_length=cycle, block_length=block, on_corrupt="stop",
                                           num_threads=3, shard=(i, count), deterministic=deterministic))
                same = got == want if deterministic else collections.Counter(got) == collections.Counter(want)
                assert same, (trial, files, count, i, cycle, block, deterministic)


# -- generated layouts against tf.data ----------------------------------------------------

DATA = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
COMPRESSIONS = [None, "gzip", "zlib"]
layouts = st.lists(st.tuples(st.integers(0, 6), st.sampled_from(COMPRESSIONS)), min_size=1, max_size=5)
SPEC = {"id": tfl.FixedLenFeature([], np.int64), "v": tfl.VarLenFeature(np.float32), "r": tfl.RaggedFeature(bytes),
        "m": tfl.FixedLenFeature([2], np.float32, default_value=[1, 2]),
        "s": tfl.SparseFeature("si", "sv", np.int64, 6),
        "q": tfl.FixedLenSequenceFeature([], np.int64, allow_missing=True)}


def _example(f, j):
    """Record j of file f: an Example whose features vary with (f, j), some missing."""
    k = f + j
    mapping = {"id": 100 * f + j, "v": np.arange(k % 3, dtype=np.float32), "r": [b"x"] * (k % 3),
               "si": [(3 * k + i) % 6 for i in range(k % 2 * 2)], "sv": list(range(k % 2 * 2)), "q": list(range(j % 3))}
    if k % 2:
        mapping["m"] = [3.0, 4.0]
    return tfl.encode_example(mapping)


def _write(directory, layout):
    """Files of a layout [(records, compression)], and their TensorFlow compression types."""
    files = []
    for f, (n, compression) in enumerate(layout):
        path = str(directory / f"{f}.tfrecord")
        with TFRecordWriter(path, compression=compression) as w:
            w.write_many(_example(f, j) for j in range(n))
        files.append(path)
    return files, [(c or "").upper() for _, c in layout]


def _tf_records(tf, files, types, cycle, block, per_file=lambda ds, f: ds):
    """TensorFlow's interleave of the files; per_file(dataset, file position) edits each file's."""
    pairs = tf.data.Dataset.from_tensor_slices((files, types, tf.range(len(files), dtype=tf.int64)))
    return pairs.interleave(lambda p, t, f: per_file(tf.data.TFRecordDataset(p, compression_type=t), f),
                            cycle_length=cycle, block_length=block)


def _ids(records):
    return [int(i) for i in tfl.parse_example(list(records), {"id": SPEC["id"]})["id"]] if len(records) else []


@pytest.mark.interop
@DATA
@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=5), compression=st.sampled_from(COMPRESSIONS),
       reads=st.one_of(st.none(), st.integers(1, 7)), auto=st.booleans())
def test_num_parallel_reads_is_cycle_length(tf, backend, tmp_path_factory, counts, compression, reads, auto):
    # TFRecordDataset(files, num_parallel_reads=n) interleaves n files a record at a time;
    # None reads them one after the other, as our default of one thread does.
    files, types = _write(tmp_path_factory.mktemp("npr"), [(n, compression) for n in counts])
    want = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=types[0], num_parallel_reads=reads)]
    options = {} if reads is None else {"cycle_length": reads}
    got = list(TFRecordDataset(files, compression="auto" if auto else compression, **options))
    assert got == want


@pytest.mark.interop
@DATA
@given(layout=layouts, cycle=st.integers(1, 7), block=st.integers(1, 8), threads=st.integers(1, 3),
       batch=st.one_of(st.none(), st.integers(1, 5)), drop=st.booleans(), epochs=st.integers(1, 2),
       parsed=st.booleans(), memory_map=st.booleans())
def test_interleave_batch_and_epochs_match_tensorflow(tf, backend, tmp_path_factory, layout, cycle, block, threads,
                                                      batch, drop, epochs, parsed, memory_map):
    # cycle_length past the number of files and block_length past a file's records included.
    # Each epoch is batched on its own: TensorFlow's .batch(size, drop_remainder).repeat(epochs).
    files, types = _write(tmp_path_factory.mktemp("il"), layout)
    ds = _tf_records(tf, files, types, cycle, block)
    if batch is not None:
        ds = ds.batch(batch, drop_remainder=drop)
    if parsed:
        spec = {k: eval(s.to_tf(), {"tf": tf}) for k, s in SPEC.items()}
        ds = ds.map(lambda r: (tf.io.parse_example if batch else tf.io.parse_single_example)(r, spec))
    want = list(ds.repeat(epochs))
    dataset = TFRecordDataset(files, SPEC if parsed else None, batch_size=batch, drop_remainder=drop,
                              cycle_length=cycle, block_length=block, num_threads=threads, max_open_files=cycle + 1,
                              num_epochs=epochs, memory_map=memory_map)
    got = list(dataset)
    assert len(got) == len(want) == dataset.num_elements() * epochs
    for g, w in zip(got, want):
        if not parsed:
            assert _plain(g) == _plain(w.numpy())
            continue
        for name, spec in SPEC.items():
            if batch or not isinstance(spec, tfl.RaggedFeature):
                assert_same(g[name], w[name])
            else:
                assert g[name].tolist() == w[name].numpy().tolist()


@pytest.mark.interop
@DATA
@given(layout=layouts, count=st.integers(1, 7), cycle=st.integers(1, 4), block=st.integers(1, 3),
       threads=st.integers(1, 3))
def test_shards_match_tensorflow(tf, backend, tmp_path_factory, layout, count, cycle, block, threads):
    # shard=(i, n) with at least n files: Dataset.from_tensor_slices(files).shard(n, i) before
    # the interleave. With fewer: record j of file f when (f + j) % n == i, that is each
    # file's TFRecordDataset(file).shard(n, (i - f) % n) inside the interleave.
    files, types = _write(tmp_path_factory.mktemp("sh"), layout)
    every = []
    for i in range(count):
        if count <= len(files):
            pairs = tf.data.Dataset.from_tensor_slices((files, types)).shard(count, i)
            want = pairs.interleave(lambda p, t: tf.data.TFRecordDataset(p, compression_type=t),
                                    cycle_length=cycle, block_length=block)
        else:
            want = _tf_records(tf, files, types, cycle, block, lambda ds, f: ds.shard(count, (i - f) % count))
        want = [r.numpy() for r in want]
        dataset = TFRecordDataset(files, shard=(i, count), cycle_length=cycle, block_length=block,
                                  num_threads=threads, max_open_files=cycle)
        assert list(dataset) == want
        assert dataset.num_elements() == len(want)
        every += _ids(want)
    assert sorted(every) == sorted(100 * f + j for f, (n, _) in enumerate(layout) for j in range(n))


@pytest.mark.interop
@DATA
@given(layout=layouts, cycle=st.integers(1, 4), block=st.integers(1, 3), batch=st.one_of(st.none(), st.integers(1, 3)),
       tracked=st.booleans(), data=st.data())
def test_resuming_after_k_elements_is_tensorflows_skip(tf, backend, tmp_path_factory, layout, cycle, block, batch,
                                                       tracked, data):
    # No take/skip methods: take k is islice, and a state saved after k elements resumes
    # at TensorFlow's .skip(k) (a fresh dataset that loads it, as after a restart), whether
    # it holds the file positions (state_dict() called before the epoch) or reads again.
    import itertools

    files, types = _write(tmp_path_factory.mktemp("rs"), layout)
    ds = _tf_records(tf, files, types, cycle, block)
    if batch:
        ds = ds.batch(batch)
    k = data.draw(st.integers(0, len(list(ds))))

    def make():
        return TFRecordDataset(files, batch_size=batch, cycle_length=cycle, block_length=block, max_open_files=cycle)
    first = make()
    if tracked:
        first.state_dict()
    taken = list(itertools.islice(iter(first), k))
    state = first.state_dict()
    second = make()
    second.load_state_dict(state)
    rest = list(second)
    assert [_plain(x) for x in taken] == [_plain(w.numpy()) for w in ds.take(k)]
    assert [_plain(x) for x in rest] == [_plain(w.numpy()) for w in ds.skip(k)]


def _plain(element):
    """A record as bytes, a batch (RecordBatch or TensorFlow's array) as a list of them."""
    return element if isinstance(element, bytes) else list(element)
