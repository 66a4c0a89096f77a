"""Bad arguments raise a TFRecordError that is also the ValueError or TypeError Python's
convention asks for: InvalidArgumentError (a value out of range or an impossible
combination) and ArgumentTypeError (a value of the wrong type)."""

import os
import pickle

import numpy as np
import pytest

import tfrecord_lite as tfl
from tfrecord_lite.bytes_column import BytesColumn
from tfrecord_lite.index import build_index, load_index


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(p) as w:
        w.write_many([tfl.encode_example({"x": [1.0]})] * 3)
    return p


VALUE_ERRORS = {
    "on_corrupt": lambda p: tfl.TFRecordReader(p, on_corrupt="ignore"),
    "batch_size": lambda p: tfl.TFRecordReader(p).record_batches(0),
    "compression": lambda p: tfl.TFRecordReader(p, compression="lz4"),
    "dataset num_threads": lambda p: tfl.TFRecordDataset([p], num_threads=0),
    "dataset features and parse": lambda p: tfl.TFRecordDataset([p], {"x": tfl.FixedLenFeature([], np.float32)},
                                                                parse=len),
    "dataset cycle_length": lambda p: tfl.TFRecordDataset([p], cycle_length=4, max_open_files=2),
    "dataset shard": lambda p: tfl.TFRecordDataset([p], shard=(3, 2)),
    "dataset shuffle_buffer": lambda p: tfl.TFRecordDataset([p], shuffle_buffer=-1),
    "dataset output": lambda p: tfl.TFRecordDataset([p], output="pandas"),
    "dataset state": lambda p: tfl.TFRecordDataset([p]).load_state_dict({"version": 99}),
    "dataset state of another kind": lambda p: tfl.TFRecordDataset([p]).load_state_dict({"version": 2}),
    "dataset state not a dict": lambda p: tfl.TFRecordDataset([p]).load_state_dict(5),
    "indexed features and parse": lambda p: tfl.IndexedDataset([p], {"x": tfl.FixedLenFeature([], np.float32)},
                                                               parse=len),
    "BytesColumn offsets": lambda p: BytesColumn(np.zeros(3, np.uint8), np.zeros(0, np.int64)),
    "RecordBatch origins": lambda p: tfl.RecordBatch(segments=[], origins=[None]),
    "writer index on a compressed file": lambda p: tfl.TFRecordWriter(p + ".gz", compression="gzip", index=True),
    "sharded writer without a shard rule": lambda p: tfl.ShardedWriter(p + "-out"),
    "sharded writer max_records_per_shard": lambda p: tfl.ShardedWriter(p + "-out", max_records_per_shard=0),
    "write_parallel chunk_size": lambda p: tfl.write_parallel([b"x"], bytes, p + "-par", 2, chunk_size=0),
    "write_parallel executor": lambda p: tfl.write_parallel([b"x"], bytes, p + "-par", 2, executor="fork"),
    # A bare ValueError and TypeError from the thread pool before.
    "write_parallel num_workers": lambda p: tfl.write_parallel([b"x"], bytes, p + "-par", 2, num_workers=-1),
    "write_parallel num_workers str": lambda p: tfl.write_parallel([b"x"], bytes, p + "-par", 2, num_workers="2"),
    "split num_shards": lambda p: tfl.split(p, 0),
}


@pytest.mark.parametrize("call", list(VALUE_ERRORS.values()), ids=list(VALUE_ERRORS))
def test_out_of_range_arguments_are_invalid_argument_errors(path, call):
    with pytest.raises(tfl.InvalidArgumentError) as info:
        call(path)
    assert isinstance(info.value, ValueError) and isinstance(info.value, tfl.TFRecordError)


TYPE_ERRORS = {
    "record index": lambda p: tfl.TFRecordFile(p)["0"],
    "indexed record index": lambda p: tfl.IndexedDataset([p])[1.5],
    "0-d BytesColumn len": lambda p: len(BytesColumn(np.zeros(1, np.uint8), np.array([0, 1]), ())),
    "writer target": lambda p: tfl.TFRecordWriter(123),
    "routing key": lambda p: _route(p, 1.5),
    # Taken silently before: 0.5 and 2.7 truncated, "01" read as (0, 1); or raw Python errors.
    "dataset shard float": lambda p: tfl.TFRecordDataset([p], shard=(0.5, 2)),
    "dataset shard str": lambda p: tfl.TFRecordDataset([p], shard="01"),
    "dataset shard of one": lambda p: tfl.TFRecordDataset([p], shard=(0,)),
    "dataset shuffle_buffer float": lambda p: tfl.TFRecordDataset([p], shuffle_buffer=2.7),
    "dataset seed str": lambda p: tfl.TFRecordDataset([p], seed="abc"),
    "dataset features list": lambda p: tfl.TFRecordDataset([p], ["x"]),
    "dataset parse not callable": lambda p: tfl.TFRecordDataset([p], parse=5),
    "dataset files int": lambda p: tfl.TFRecordDataset(5),
    "dataset files item": lambda p: tfl.TFRecordDataset([p, 3]),
}


def _route(path, key):
    with tfl.ShardedWriter(path + "-keyed", num_shards=2) as w:
        w.write(b"x", key=key)


@pytest.mark.parametrize("call", list(TYPE_ERRORS.values()), ids=list(TYPE_ERRORS))
def test_arguments_of_the_wrong_type_are_argument_type_errors(path, call):
    with pytest.raises(tfl.ArgumentTypeError) as info:
        call(path)
    assert isinstance(info.value, TypeError) and isinstance(info.value, tfl.TFRecordError)
    assert not isinstance(info.value, ValueError)


@pytest.mark.parametrize("cls", [tfl.ArgumentTypeError, tfl.FeatureSpecError, tfl.ExampleDecodeError, tfl.EncodeError])
def test_errors_keep_their_batch_position_through_pickling(cls):
    err = cls("bad", index=3)
    err._relocate("g.tfrecord", 429, 13)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls and str(clone) == str(err) == "g.tfrecord, record 13, byte offset 429: bad"
    assert (clone.path, clone.offset, clone.index, clone.batch_index) == ("g.tfrecord", 429, 13, 3)


MAX_RECORD_BYTES_ENTRIES = {
    "reader": lambda p, v: list(tfl.TFRecordReader(p, max_record_bytes=v)),
    "dataset": lambda p, v: list(tfl.TFRecordDataset([p], max_record_bytes=v)),
    "file": lambda p, v: tfl.TFRecordFile(p, max_record_bytes=v)[0],
    "indexed": lambda p, v: tfl.IndexedDataset([p], max_record_bytes=v)[0],
}

MAX_RECORD_BYTES_REFUSERS = {
    **MAX_RECORD_BYTES_ENTRIES,
    "merge": lambda p, v: tfl.merge([p], p + "-merged", max_record_bytes=v),
    "load_index": lambda p, v: load_index(build_index(p) and p, max_record_bytes=v),  # from the sidecar
}



# A raw OverflowError (compiled scan) for -1 before; "3" parsed, 3.5 truncated, True taken as 1.
@pytest.mark.parametrize("value, error", [(-1, tfl.InvalidArgumentError), (np.int64(-5), tfl.InvalidArgumentError),
                                          ("3", tfl.ArgumentTypeError), (3.5, tfl.ArgumentTypeError),
                                          (True, tfl.ArgumentTypeError), (np.bool_(True), tfl.ArgumentTypeError),
                                          (None, tfl.ArgumentTypeError)])
@pytest.mark.parametrize("call", list(MAX_RECORD_BYTES_REFUSERS.values()), ids=list(MAX_RECORD_BYTES_REFUSERS))
def test_max_record_bytes_must_be_a_non_negative_integer(backend, path, call, value, error):
    with pytest.raises(error, match="max_record_bytes must be"):
        call(path, value)
    assert not os.path.exists(path + "-merged")


@pytest.mark.parametrize("call", list(MAX_RECORD_BYTES_ENTRIES.values()), ids=list(MAX_RECORD_BYTES_ENTRIES))
def test_max_record_bytes_takes_numpy_and_huge_integers(backend, path, call):
    record = tfl.encode_example({"x": [1.0]})
    for limit in (np.int64(len(record)), np.uint64(2**64 - 1), 2**80):
        got = call(path, limit)
        assert got == [record] * 3 if isinstance(got, list) else got == record
    with pytest.raises(tfl.RecordTooLargeError, match="max_record_bytes"):
        call(path, np.int32(len(record) - 1))


@pytest.mark.parametrize("value", [True, 2.0, "2", np.float64(2)])
@pytest.mark.parametrize("make", [
    lambda p, v: tfl.TFRecordDataset([p], batch_size=v),
    lambda p, v: tfl.TFRecordDataset([p], num_threads=v),
    lambda p, v: tfl.IndexedDataset([p], max_open_files=v),
    lambda p, v: tfl.ShardedWriter(p + "-out", num_shards=v),
    lambda p, v: tfl.write_parallel([b"r"], bytes, p + "-out", 2, num_workers=v),
], ids=["dataset batch_size", "dataset num_threads", "IndexedDataset max_open_files", "ShardedWriter num_shards",
        "write_parallel num_workers"])
def test_counts_are_integers_everywhere(path, make, value):
    """One check of counts: the dataset took True as 1 and 2.0 as 2, where the sharded
    writers refused both; every count now refuses them alike, and takes numpy integers."""
    with pytest.raises(tfl.InvalidArgumentError, match=r"must be a positive integer, not "):
        make(path, value)
    made = make(path, np.int64(2))  # accepted
    getattr(made, "close", lambda: None)()
