"""The pipeline with features= (tfrecord_lite.parse_example) and the to_numpy/to_npy sinks,
with the real Example codec and with a stand-in that returns parse_example's documented
output (dict of name -> ndarray, leading batch dimension)."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ._records import record, write_files

import tfrecord_lite
from tfrecord_lite import TFRecordDataset, TFRecordWriter, to_npy, to_numpy

def _example(i):
    return tfrecord_lite.encode_example({"x": [float(i), i + 0.5], "y": i})


@pytest.fixture
def example_files(tmp_path):
    paths = []
    for f in range(3):
        path = str(tmp_path / f"ex{f}.tfrecord")
        with TFRecordWriter(path) as w:
            for j in range(7):
                w.write(_example(f * 7 + j))
        paths.append(path)
    return paths


def _spec():
    from tfrecord_lite.features import FixedLenFeature

    return {"x": FixedLenFeature([2], np.float32), "y": FixedLenFeature([], np.int64)}


def test_features_batches(backend, example_files):
    batches = list(TFRecordDataset(example_files, _spec(), batch_size=5, num_threads=2, cycle_length=1))
    ys = np.concatenate([b["y"] for b in batches])
    assert ys.tolist() == list(range(21)) and batches[0]["x"].shape == (5, 2)


def test_features_unbatched(backend, example_files):
    items = list(TFRecordDataset(example_files, _spec()))
    assert [int(i["y"]) for i in items] == list(range(21)) and items[3]["x"].shape == (2,)


def _plain(value):
    """A parsed value as nested lists and types, so that results compare with ==."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):  # SparseTensorValue
        return (type(value).__name__, [_plain(v) for v in value])
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tolist())
    return (type(value).__name__, value)


_PER_RECORD_SPECS = [
    {"id": tfrecord_lite.FixedLenFeature([], np.int64), "v": tfrecord_lite.VarLenFeature(np.int64)},
    {"v": tfrecord_lite.RaggedFeature(np.int64), "s": tfrecord_lite.VarLenFeature(bytes)},
    {"v": tfrecord_lite.FixedLenSequenceFeature([], np.int64, allow_missing=True, default_value=-1)},
]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(0, 3), min_size=1, max_size=7), which=st.integers(0, len(_PER_RECORD_SPECS) - 1),
       picks=st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_unbatched_records_are_parse_single_example(backend, tmp_path_factory, lengths, which, picks):
    # Unbatched records of sparse, ragged and sequence features used to be split by position
    # from their group's parse: a group of 3 gave a VarLenFeature's indices, values and
    # dense_shape as the 3 records' values, a RaggedFeature raised TypeError, a sequence came
    # padded to the group's longest, others kept the batch dimension ({"id": array([3])}).
    spec = _PER_RECORD_SPECS[which]
    path = str(tmp_path_factory.mktemp("single") / "a.tfrecord")
    records = [tfrecord_lite.encode_example({"id": i, "v": list(range(n)), "s": [b"s"] * (n % 2)})
               for i, n in enumerate(lengths)]
    with TFRecordWriter(path, index=True) as w:
        w.write_many(records)
    want = [_plain(tfrecord_lite.parse_single_example(r, spec)) for r in records]
    assert [_plain(x) for x in TFRecordDataset(path, spec)] == want
    source = tfrecord_lite.IndexedDataset(path, spec)  # a Grain source: ds[i] and batched reads
    picks = [i % len(records) for i in picks]
    assert [_plain(source[i]) for i in picks] == [want[i] for i in picks]
    assert [_plain(x) for x in source._getitems(picks)] == [want[i] for i in picks]



@pytest.mark.parametrize("count", [1, 3, 5])
def test_unbatched_records_of_a_parse_function_giving_sparse_or_ragged_values(backend, tmp_path, count):
    """A parse function returning parse_example's output was unbatched by position: in a group
    of 3 records (a file of 3) a VarLenFeature's indices, values and dense_shape became the
    three records' values, a RaggedValue raised TypeError ('not subscriptable') in groups of
    any size, and a single record kept the batch dimension of every feature ({"id": array([0])}).
    Each record is now what parse_single_example gives; nested ragged values split by row."""
    import functools

    path = str(tmp_path / "a.tfrecord")
    records = [tfrecord_lite.encode_example({"id": i, "v": list(range(i + 1))}) for i in range(count)]
    with TFRecordWriter(path, index=True) as w:
        w.write_many(records)
    for spec in ({"id": tfrecord_lite.FixedLenFeature([], np.int64), "v": tfrecord_lite.VarLenFeature(np.int64)},
                 {"id": tfrecord_lite.FixedLenFeature([], np.int64), "v": tfrecord_lite.RaggedFeature(np.int64)}):
        want = [_plain(tfrecord_lite.parse_single_example(r, spec)) for r in records]
        parse = functools.partial(tfrecord_lite.parse_example, features=spec)
        assert [_plain(x) for x in TFRecordDataset(path, parse=parse)] == want
        source = tfrecord_lite.IndexedDataset(path, parse=parse)
        assert [_plain(source[i]) for i in range(count)] == want
        assert [_plain(x) for x in source._getitems(range(count))] == want  # Grain's batched read

    def nested(batch):  # record i: i + 1 rows of [j, j] for j in range(i + 1)
        lengths = [n + 1 for n in range(len(batch))]
        inner = tfrecord_lite.RaggedValue(np.repeat(np.concatenate([np.arange(n) for n in lengths]), 2),
                                          np.arange(0, 2 * sum(lengths) + 1, 2))
        return {"r": tfrecord_lite.RaggedValue(inner, np.cumsum([0] + lengths))}

    got = [x["r"].to_list() for x in TFRecordDataset(path, parse=nested)]
    assert got == [[[j, j] for j in range(i + 1)] for i in range(count)]
    assert backend.name == tfrecord_lite.implementation


@pytest.mark.parametrize("count", [1, 2, 66])
def test_unbatched_records_of_a_parse_function_giving_a_tuple_of_arrays(backend, tmp_path, count):
    """A tuple of arrays (x, y) was taken for a sequence of records: a group of 2 records (a
    file of 2, or the last 2 of 66 read 64 at a time) gave x and y as the two records, other
    groups parsed each record alone and kept its batch dimension ((array([0]), array([0]))).
    Each record is now (x[i], y[i]), as tf.data's unbatch() splits a tuple."""
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path) as w:
        w.write_many(b"%d" % i for i in range(count))
    calls = []

    def parse(records):
        calls.append(len(records))
        ids = np.array([int(r) for r in records])
        return ids, np.stack([ids, -ids], axis=1)

    got = [(int(x), y.tolist()) for x, y in TFRecordDataset(path, parse=parse)]
    assert got == [(i, [i, -i]) for i in range(count)]
    assert sorted(calls) == sorted([64, 2] if count == 66 else [count])  # one call per group
    assert backend.name == tfrecord_lite.implementation

def _mixed_example(f, j):
    data = {"y": j, "x": [float(f), j / 4], "s": [f"{f}:{j}".encode()]}
    if j % 3:
        data["v"] = list(range(j % 4))
    return tfrecord_lite.encode_example(data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=4), batch=st.integers(1, 9),
       drop=st.booleans(), cycle=st.integers(1, 3), block=st.sampled_from([1, 3, 300]),
       threads=st.sampled_from([1, 2, 8, 16]), task_records=st.sampled_from([1, 5, 16]),
       task_bytes=st.sampled_from([40, 1 << 20]))
def test_batches_parsed_together_equal_batches_parsed_alone(backend, tmp_path_factory, monkeypatch, counts, batch,
                                                            drop, cycle, block, threads, task_records, task_bytes):
    # Small batches of a dense spec are parsed several at a time and split: each must be
    # exactly parse_example of its own records, whatever the grouping limits.
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_TASK_RECORDS", task_records)
    monkeypatch.setattr(_pipeline, "_TASK_BYTES", task_bytes)
    d = tmp_path_factory.mktemp("mixed")
    paths = []
    for f, n in enumerate(counts):
        paths.append(str(d / f"m{f}.tfrecord"))
        with TFRecordWriter(paths[-1]) as w:
            w.write_many(_mixed_example(f, j) for j in range(n))
    dense = {"x": tfrecord_lite.FixedLenFeature([2], np.float32), "y": tfrecord_lite.FixedLenFeature([], np.int64),
             "s": tfrecord_lite.FixedLenFeature([], bytes), "r": tfrecord_lite.RawTensorFeature([3], np.uint8)}
    dense_raw = {k: v for k, v in dense.items() if k != "r"}  # every record lacks "r": not all present
    sparse = {**dense_raw, "v": tfrecord_lite.VarLenFeature(np.int64)}
    options = dict(batch_size=batch, drop_remainder=drop, cycle_length=cycle, block_length=block,
                   num_threads=threads, max_open_files=4)
    raw = list(TFRecordDataset(paths, **options))
    # Raw batches are cut in groups too: each is the next batch_size records of the
    # unbatched stream, the last one short unless drop_remainder.
    flat = list(TFRecordDataset(paths, **{**options, "batch_size": None, "drop_remainder": False}))
    ends = range(batch, len(flat) + (1 if drop else batch), batch)
    assert [list(b) for b in raw] == [flat[end - batch:end] for end in ends]
    for spec in (dense_raw, sparse):
        got = list(TFRecordDataset(paths, spec, **options))
        assert len(got) == len(raw)
        for parsed, records in zip(got, raw):
            want = tfrecord_lite.parse_example(records, spec)
            assert parsed.keys() == want.keys()
            for key in want:
                if isinstance(want[key], np.ndarray):
                    assert parsed[key].dtype == want[key].dtype and parsed[key].tolist() == want[key].tolist()
                else:
                    assert all(np.array_equal(a, b) for a, b in zip(parsed[key], want[key]))
    if raw:
        with pytest.raises(tfrecord_lite.FeatureSpecError, match="'r'"):
            list(TFRecordDataset(paths, dense, **options))


def test_parse_tasks_grow_with_the_threads(backend, tmp_path, monkeypatch):
    # Batches of a dense spec are parsed in tasks of about _TASK_RECORDS records, times one
    # per 4 threads (at most 4 times); each batch is still parse_example of its records.
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_TASK_RECORDS", 40)
    tasks = []
    parse_task = _pipeline._parse_task

    def counted(parse, records, sizes):
        tasks.append(len(sizes))
        return parse_task(parse, records, sizes)

    monkeypatch.setattr(_pipeline, "_parse_task", counted)
    paths = []
    for f in range(2):
        paths.append(str(tmp_path / f"t{f}.tfrecord"))
        with TFRecordWriter(paths[-1]) as w:
            w.write_many(_example(f * 500 + j) for j in range(500))
    want = None
    for threads, per_task in ((1, 4), (7, 4), (8, 8), (12, 12), (16, 16), (40, 16)):
        tasks.clear()
        got = list(TFRecordDataset(paths, _spec(), batch_size=10, num_threads=threads, cycle_length=2))
        assert max(tasks) == per_task and sum(tasks) == 100
        ys = [b["y"].tolist() for b in got]
        want = want or ys
        assert ys == want and all(b["x"].shape == (10, 2) for b in got)


def test_a_bad_record_in_a_group_fails_at_its_own_batch(backend, tmp_path):
    path = str(tmp_path / "g.tfrecord")
    with TFRecordWriter(path) as w:
        w.write_many(_example(i) if i != 13 else tfrecord_lite.encode_example({"x": [1.0, 2.0]})
                     for i in range(40))
    got = []
    with pytest.raises(tfrecord_lite.FeatureSpecError) as info:
        for b in TFRecordDataset([path], _spec(), batch_size=4, num_threads=2):
            got.append(b["y"].tolist())
    # Records 0-11 parse in three batches; record 13 is the second of the fourth batch, and
    # the error names it by its file, frame offset and index in the file.
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    e = info.value
    assert (e.path, e.index, e.batch_index) == (path, 13, 1)
    assert e.offset == tfrecord_lite.index.scan_index(path)[0][13]


def test_to_numpy_with_codec(backend, example_files, tmp_path):
    arrays = to_numpy(example_files, _spec())
    assert arrays["y"].tolist() == list(range(21))
    mm = to_npy(example_files, _spec(), tmp_path / "out", batch_size=4)
    assert np.array_equal(mm["x"], arrays["x"])


# -- sinks with a stand-in codec --------------------------------------------------------


def stand_in_parse_example(records, features):
    """parse_example's documented output shape for FixedLenFeature specs."""
    return {
        "length": np.array([len(r) for r in records], np.int64),
        "pair": np.array([[r[0], r[-1]] for r in records], np.uint8),
    }


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(tfrecord_lite.example, "parse_example", stand_in_parse_example)


def test_features_call_parse_example_per_batch(stand_in, tmp_path):
    paths = write_files(tmp_path, [4, 6])
    batches = list(TFRecordDataset(paths, {"any": "spec"}, batch_size=4))
    assert [len(b["length"]) for b in batches] == [4, 4, 2]
    items = list(TFRecordDataset(paths, {"any": "spec"}))
    assert len(items) == 10 and items[0]["pair"].shape == (2,) and int(items[0]["length"]) == 4


def test_to_numpy_and_to_npy(stand_in, backend, tmp_path):
    paths = write_files(tmp_path, [30, 0, 45], size=5)
    lengths = [len(record(f, j, 5)) for f, n in enumerate([30, 0, 45]) for j in range(n)]
    arrays = to_numpy(paths, {"any": "spec"}, batch_size=8)
    assert arrays["length"].tolist() == lengths and arrays["pair"].shape == (75, 2)
    out = tmp_path / "npy"
    mm = to_npy(paths, {"any": "spec"}, out, batch_size=8, progress=False)
    assert isinstance(mm["pair"], np.memmap) and np.array_equal(mm["pair"], arrays["pair"])
    assert np.load(out / "length.npy").tolist() == lengths
    assert backend.name == tfrecord_lite.implementation


_RSS_SCRIPT = """
import os, sys
import os

import numpy as np
import tfrecord_lite as tfl

def status(field):
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith(field))

d = sys.argv[1]
n, shape = 4000, (32, 256)  # 32 KiB per row: 128 MiB of output
with tfl.TFRecordWriter(d + '/a.tfrecord') as w:
    for i in range(0, n, 250):
        x = np.full((250,) + shape, i, np.float32)
        w.write_many(tfl.encode_examples({'x': x, 'y': np.arange(i, i + 250)}, raw=('x',)))
del x
with open('/proc/self/clear_refs', 'w') as f:  # restart the peak (VmHWM) from here
    f.write('5')
base = status('VmRSS')
out = tfl.to_npy(d + '/a.tfrecord', {'x': tfl.RawTensorFeature(shape, np.float32),
                 'y': tfl.FixedLenFeature([], np.int64)}, d + '/npy', batch_size=64, progress=False)
peak = status('VmHWM')
assert (out['y'] == np.arange(n)).all() and float(out['x'][-1, 0, 0]) == 3750.0
print(peak - base)
"""


def test_to_npy_memory_stays_at_about_a_batch(backend, tmp_path):
    # 128 MiB of output in 2 MiB batches: the written pages must not pile up in the process.
    import subprocess
    import sys

    env = dict(os.environ, TFRECORD_LITE_PURE_PYTHON="1" if backend.name == "python" else "0")
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(tmp_path)], env=env,
                         capture_output=True, text=True, check=True)
    assert int(out.stdout) < 48, f"to_npy grew the resident set by {out.stdout.strip()} MiB"


def test_to_npy_rejects_bytes_features_clearly(backend, example_files, tmp_path):
    spec = {"y": _spec()["y"], "name": tfrecord_lite.FixedLenFeature([], bytes, default_value=b"")}
    with pytest.raises(tfrecord_lite.FeatureSpecError, match="'name'.*RawTensorFeature"):
        to_npy(example_files, spec, tmp_path / "out", progress=False)


def test_to_npy_leaves_the_files_of_a_failed_conversion_as_they_were(backend, tmp_path):
    """A conversion that fails part way (record 13 of 21 lacks a feature) used to leave each
    array filled up to the failure under its final name, over the file of an earlier one."""
    good, bad = str(tmp_path / "good.tfrecord"), str(tmp_path / "bad.tfrecord")
    with TFRecordWriter(good) as w:
        w.write_many(_example(i) for i in range(21))
    with TFRecordWriter(bad) as w:
        w.write_many(_example(i) if i != 13 else tfrecord_lite.encode_example({"x": [1.0, 2.0]}) for i in range(21))
    out = tmp_path / "out"
    first = to_npy([good], _spec(), out, batch_size=4, progress=False)
    assert first["y"].tolist() == list(range(21))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"x.npy", "y.npy"}
    with pytest.raises(tfrecord_lite.FeatureSpecError):
        to_npy([bad], _spec(), out, batch_size=4, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary file left either
    with pytest.raises(tfrecord_lite.FeatureSpecError, match="'name'"):  # after one array was created
        to_npy([good], {"y": _spec()["y"], "name": tfrecord_lite.FixedLenFeature([], bytes, default_value=b"")},
               tmp_path / "fresh", progress=False)
    assert list((tmp_path / "fresh").iterdir()) == []
    again = to_npy([good], _spec(), out, batch_size=8, progress=False)
    assert np.array_equal(again["x"], first["x"])
    assert os.stat(out / "x.npy").st_mode & 0o777 == 0o666 & ~_umask()  # as open() would make it


def test_no_records_give_empty_arrays_of_every_feature(backend, example_files, tmp_path):
    """Files holding no record gave {} and no .npy file: arrays["x"] was a KeyError where a
    non-empty shard gave (n, 2) floats. With a spec, each feature is an empty array of its
    shape and dtype, as parse_example gives for no records (a parse function is never called
    without records: {} still)."""
    empty = str(tmp_path / "empty.tfrecord")
    TFRecordWriter(empty).close()
    arrays = to_numpy([empty, empty], _spec())
    assert {k: (v.shape, v.dtype) for k, v in arrays.items()} == {"x": ((0, 2), np.float32), "y": ((0,), np.int64)}
    out = to_npy(empty, _spec(), tmp_path / "npy", progress=False)
    assert sorted(os.listdir(tmp_path / "npy")) == ["x.npy", "y.npy"] and out["x"].shape == (0, 2)
    assert np.load(tmp_path / "npy" / "y.npy").dtype == np.int64
    assert to_numpy(empty, parse=lambda records: {"n": np.array([len(records)])}) == {}
    full = to_numpy(example_files, _spec())  # records present: unchanged
    assert full["x"].shape == (21, 2) and full["y"].tolist() == list(range(21))
    assert backend.name == tfrecord_lite.implementation


def test_without_a_spec_the_error_says_to_pass_one(backend, example_files, tmp_path):
    """Without a spec or parse function the first batch, raw records, failed as 'expected a
    dict of arrays from the parse step, got RecordBatch', with no word of what to pass."""
    for name, convert in (("to_numpy", lambda: to_numpy(example_files)),
                          ("to_npy", lambda: to_npy(example_files, out_dir=tmp_path / "no", progress=False))):
        with pytest.raises(tfrecord_lite.FeatureSpecError, match=f"{name} needs a feature spec") as info:
            convert()
        assert "infer_schema" in info.value.hint and not os.path.exists(tmp_path / "no")
    assert backend.name == tfrecord_lite.implementation


def test_to_npy_refuses_a_remote_output_directory(tmp_path):
    """Memory-mapped files need a local directory: s3://bucket/out made a local directory 's3:'."""
    with pytest.raises(tfrecord_lite.InvalidArgumentError, match="s3://bucket/out: .*local directory"):
        to_npy([], {}, "s3://bucket/out", progress=False)
    assert not os.path.exists("s3:")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
