"""Where records come from: RecordBatch origins through slicing, concatenation and
rebatching, and errors raised while parsing that name the record's file, frame offset and
index in that file, from parse_example, IndexedDataset, TFRecordDataset and to_numpy/to_npy."""

import os
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.batch import BlockOrigin, RecordBatch, RecordOrigins, join_records, rebatch
from tfrecord_lite.index import scan_index

SPEC = {"x": tfl.FixedLenFeature([1], np.float32)}
GOOD = tfl.encode_example({"x": np.array([1.0], np.float32)})
TOO_LONG = tfl.encode_example({"x": np.array([1.0, 2.0], np.float32)})  # the spec wants 1 value
MALFORMED = b"\x0a\x7f\x0a\x01"  # an Example whose features field claims 127 bytes: 2 remain


def write(path, records):
    with tfl.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    return str(path)


def frame_offsets(path):
    return scan_index(path)[0].tolist()


def truth(path):
    """(path, frame offset, index) of each record of a file."""
    return [(path, o, j) for j, o in enumerate(frame_offsets(path))]


# -- RecordBatch.locate through slicing, concat, rebatch --------------------------------------

def _read(path, chunk):
    """The file's records as RecordBatches of the reader's blocks, chunk bytes at a time."""
    return list(tfl.TFRecordReader(path, chunk_size=chunk).record_batches())


@given(
    sizes=st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=30), min_size=1, max_size=3),
    chunk=st.integers(64, 300),
    ops=st.lists(st.tuples(st.sampled_from(["slice", "concat", "rebatch", "join"]),
                           st.integers(-40, 80), st.integers(-40, 80), st.integers(1, 4)), max_size=6),
    gathered=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_locate_survives_slicing_concat_and_rebatching(tmp_path_factory, backend, sizes, chunk, ops, gathered, seed):
    directory = tmp_path_factory.mktemp("origins")
    paths = [write(directory / f"f{k}.tfrecord", [bytes([k, j]) * n for j, n in enumerate(lens)])
             for k, lens in enumerate(sizes)]
    parts, want = [], []
    for path in paths:
        for block in _read(path, chunk):
            parts.append(block)
        want.append(truth(path))
    if gathered:
        # Records of every file in one segment, in a shuffled order, each with its own origin:
        # what an interleave gathering records of several files into one batch builds.
        frames, starts, lengths, ids, offsets, indices, expect = bytearray(), [], [], [], [], [], []
        for k, path in enumerate(paths):
            data = open(path, "rb").read()
            base = len(frames)
            frames += data
            for (_, offset, j), record in zip(want[k], tfl.TFRecordReader(path)):
                starts.append(base + offset + 12)
                lengths.append(len(record))
                ids.append(k)
                offsets.append(offset)
                indices.append(j)
                expect.append((path, offset, j))
        order = np.random.default_rng(seed).permutation(len(starts))
        arr = lambda v: np.asarray(v, np.int64)[order]  # noqa: E731
        batch = RecordBatch(bytes(frames), arr(starts), arr(lengths),
                            origin=RecordOrigins(paths, arr(ids), arr(offsets), arr(indices)))
        expected = [expect[i] for i in order]
        parts = parts + [batch]
        flat = [w for per_file in want for w in per_file] + expected
    else:
        flat = [w for per_file in want for w in per_file]
    batch = RecordBatch.concat(parts)
    records = list(batch)
    assert [batch.locate(i) for i in range(len(batch))] == flat
    for op, a, b, c in ops:
        if op == "slice":
            batch, records, flat = batch[a:b:c], records[a:b:c], flat[a:b:c]
        elif op == "concat":
            batch, records, flat = batch + batch[a:b], records + records[a:b], flat + flat[a:b]
        elif op == "rebatch":
            pieces = list(rebatch([batch[:c], batch[c:]], max(1, abs(a)), drop_remainder=False))
            batch = join_records(pieces) if pieces else RecordBatch()
        else:
            batch = join_records([batch[:a], batch[a:]])
        assert list(batch) == records
        assert [batch.locate(i) for i in range(len(batch))] == flat
        if len(batch):
            assert batch.locate(-1) == flat[-1]


@given(chunks=st.lists(st.integers(0, 9), max_size=8), sizes=st.lists(st.integers(1, 7), min_size=1, max_size=5),
       drop=st.booleans())
def test_rebatch_takes_each_batch_size_from_its_first_chunk(chunks, sizes, drop):
    # A callable size is asked at each batch's start, with the first chunk that batch takes
    # records of; the batches follow one another with no record lost or repeated.
    parts, at = [], 0
    for n in chunks:
        parts.append(list(range(at, at + n)))
        at += n
    asked = []

    def size_of(chunk):
        asked.append(chunk[0])
        return sizes[chunk[0] % len(sizes)]

    got = list(rebatch(parts, size_of, drop_remainder=drop))
    want, starts, start = [], [], 0
    while start < at:
        starts.append(start)
        n = sizes[start % len(sizes)]
        if start + n <= at or not drop:
            want.append(list(range(start, min(start + n, at))))
        start += n
    assert got == want
    assert asked == starts  # a short last batch is begun, then dropped


def test_locate_is_none_without_origins_and_checks_its_index():
    frames = b"\x00" * 12 + b"abc"
    batch = RecordBatch(frames, np.array([12]), np.array([3]))
    assert batch.locate(0) is None and batch.locate(-1) is None
    with pytest.raises(IndexError):
        batch.locate(1)
    mixed = batch + RecordBatch(frames, np.array([12]), np.array([3]), origin=BlockOrigin("f", 100, 7))
    assert [mixed.locate(i) for i in range(2)] == [None, ("f", 100, 7)]
    assert mixed[1:].locate(0) == ("f", 100, 7)


def test_record_origins_must_match_the_segment():
    frames = b"\x00" * 12 + b"abc"
    with pytest.raises(tfl.InvalidArgumentError, match="one path id, offset and index per record"):
        RecordBatch(frames, np.array([12]), np.array([3]),
                    origin=RecordOrigins(["f"], np.array([0, 0]), np.array([0]), np.array([0])))
    with pytest.raises(tfl.InvalidArgumentError, match="origins for"):
        RecordBatch(segments=[(frames, np.array([12]), np.array([3]))], origins=[])


def test_reader_blocks_after_a_skipped_record_keep_their_indices(tmp_path, backend):
    path = write(tmp_path / "d.tfrecord", [b"r%d" % j * 5 for j in range(12)])
    offsets = frame_offsets(path)
    data = bytearray(open(path, "rb").read())
    data[offsets[4] + 14] ^= 1  # record 4's data: its data CRC fails, the frame stays intact
    open(path, "wb").write(bytes(data))
    reader = tfl.TFRecordReader(path, on_corrupt="skip", chunk_size=64)
    batch = RecordBatch.concat(list(reader.record_batches()))
    assert [batch.locate(i) for i in range(len(batch))] == [(path, offsets[j], j) for j in range(12) if j != 4]


# -- errors from parse_example and parse_sequence_example on a RecordBatch -------------------

@pytest.fixture
def bad_file(tmp_path):
    def make(bad, at=13, count=20, name="g.tfrecord"):
        records = [GOOD] * count
        records[at] = bad
        return write(tmp_path / name, records)
    return make


@pytest.mark.parametrize("bad, error", [(TOO_LONG, tfl.FeatureSpecError), (MALFORMED, tfl.ExampleDecodeError)])
@pytest.mark.parametrize("output", ["numpy", "arrow"])
def test_parse_example_on_a_read_batch_names_file_offset_and_index(bad_file, backend, bad, error, output):
    path = bad_file(bad)
    offset = frame_offsets(path)[13]
    for batch in tfl.TFRecordReader(path).record_batches(5):
        if len(batch) and batch.locate(0)[2] == 10:
            with pytest.raises(error) as info:
                tfl.parse_example(batch, SPEC, output=output)
            e = info.value
            assert (e.path, e.offset, e.index, e.batch_index) == (path, offset, 13, 3)
            assert f"{path}, record 13, byte offset {offset}" in str(e)
            again = pickle.loads(pickle.dumps(e))
            assert (again.path, again.offset, again.index, again.batch_index) == (path, offset, 13, 3)
        else:
            tfl.parse_example(batch, SPEC, output=output)


def test_parse_example_on_a_list_names_the_position_in_the_batch(backend):
    with pytest.raises(tfl.FeatureSpecError) as info:
        tfl.parse_example([GOOD, GOOD, TOO_LONG], SPEC)
    assert (info.value.path, info.value.index, info.value.batch_index) == (None, 2, None)


def test_parse_sequence_example_on_a_read_batch_names_file_offset_and_index(tmp_path, backend):
    good = tfl.encode_sequence_example({}, {"s": [np.array([1], np.int64)]})
    bad = tfl.encode_sequence_example({}, {"s": [np.array([1, 2], np.int64)]})
    path = write(tmp_path / "s.tfrecord", [good] * 6 + [bad] + [good] * 3)
    batch = RecordBatch.concat(list(tfl.TFRecordReader(path, chunk_size=64).record_batches()))[2::2]
    with pytest.raises(tfl.FeatureSpecError) as info:
        tfl.parse_sequence_example(batch, None, {"s": tfl.FixedLenSequenceFeature([1], np.int64)})
    e = info.value
    assert (e.path, e.offset, e.index, e.batch_index) == (path, frame_offsets(path)[6], 6, 2)


# -- random access -----------------------------------------------------------------------------

@pytest.mark.parametrize("bad, error", [(TOO_LONG, tfl.FeatureSpecError), (MALFORMED, tfl.ExampleDecodeError)])
def test_indexed_dataset_errors_name_file_offset_and_index(tmp_path, backend, bad, error):
    paths = [write(tmp_path / "a.tfrecord", [GOOD] * 20),
             write(tmp_path / "g.tfrecord", [GOOD] * 13 + [bad] + [GOOD] * 6)]
    ds = tfl.IndexedDataset(paths, SPEC)
    where = (paths[1], frame_offsets(paths[1])[13], 13)
    for key, position in [(33, 0), (slice(30, 40), 3), ([1, 33], 1), (np.array([5, 2, 33]), 2)]:
        with pytest.raises(error) as info:
            ds[key]
        e = info.value
        assert (e.path, e.offset, e.index, e.batch_index) == (*where, position)
    with pytest.raises(error) as info:
        ds._getitems([2, 33])
    assert (info.value.path, info.value.index, info.value.batch_index) == (paths[1], 13, 1)
    assert len(ds[30:33]["x"]) == 3


# -- TFRecordDataset workers and the NumPy export --------------------------------------------

DATASET_OPTIONS = {
    "cycle_length=1": {"cycle_length": 1},
    "block_length=1024": {"cycle_length": 3, "block_length": 1024, "num_threads": 2},
    # block_length=1 over several open files (num_threads=3 gives cycle_length=3)
    "defaults": {"num_threads": 3},
}


def _files(tmp_path, bad):
    """Three files; record 13 of the second is bad."""
    paths = []
    for k, name in enumerate(["a.tfrecord", "g.tfrecord", "z.tfrecord"]):
        records = [GOOD] * 20
        if k == 1:
            records[13] = bad
        paths.append(write(tmp_path / name, records))
    return paths, (paths[1], frame_offsets(paths[1])[13], 13)


@pytest.mark.parametrize("options", list(DATASET_OPTIONS.values()), ids=list(DATASET_OPTIONS))
@pytest.mark.parametrize("bad, error", [(TOO_LONG, tfl.FeatureSpecError), (MALFORMED, tfl.ExampleDecodeError)],
                         ids=["FeatureSpecError", "ExampleDecodeError"])
@pytest.mark.parametrize("batch_size", [4, None])
def test_dataset_errors_name_file_offset_and_index(tmp_path, backend, options, bad, error, batch_size):
    paths, where = _files(tmp_path, bad)
    ds = tfl.TFRecordDataset(paths, SPEC, batch_size=batch_size, **options)
    with pytest.raises(error) as info:
        for _ in ds:
            pass
    e = info.value
    assert (e.path, e.offset, e.index) == where, str(e)
    assert f"{where[0]}, record 13, byte offset {where[1]}" in str(e)


@pytest.mark.parametrize("export", ["to_numpy", "to_npy"])
def test_numpy_export_errors_name_file_offset_and_index(tmp_path, backend, export):
    paths, where = _files(tmp_path, TOO_LONG)
    with pytest.raises(tfl.FeatureSpecError) as info:
        if export == "to_numpy":
            tfl.to_numpy(paths, SPEC, batch_size=8, cycle_length=1)
        else:
            tfl.to_npy(paths, SPEC, os.fspath(tmp_path / "out"), batch_size=8, cycle_length=1, progress=False)
    e = info.value
    assert (e.path, e.offset, e.index) == where
