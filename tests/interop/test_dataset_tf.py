"""Interleave order against live TensorFlow: TFRecordDataset(deterministic=True) must yield
exactly what Dataset.from_tensor_slices(files).interleave(TFRecordDataset, cycle_length,
block_length) yields."""

import pytest

from tfrecord_lite import TFRecordDataset, TFRecordWriter

from .._records import interleave

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
    import numpy as np
    import tensorflow as tf

    import tfrecord_lite as tfl
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
