"""tfrecord_lite.ray on a real local Ray cluster (one for the module): read_tfrecords against
TFRecordDataset / parse_example, exactly once across files and across index-range splits of
one file, raw records, schema inference, projection, write_tfrecords shard names, round
trips, compression, atomicity when a task or the commit fails, and s3:// paths on the
loopback S3 server. The read tasks' planning is also run in-process, for both backends."""

import gzip
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import ray
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.arrow import arrow_schema
from tfrecord_lite.index import read_index
from tfrecord_lite.ray import RECORD_COLUMN, TFRecordDatasource, read_tfrecords, write_tfrecords
from ._records import Overlap

SPEC = {
    "id": tfl.FixedLenFeature([], "int64"),
    "name": tfl.FixedLenFeature([], "string"),
    "vec": tfl.FixedLenFeature([3], "float32"),
    "tags": tfl.VarLenFeature("int64"),
}


def make_records(start, n):
    """Examples with ids start..start+n-1; every third has no tags, as VarLenFeature allows."""
    rng = np.random.default_rng(start)
    out = []
    for i in range(start, start + n):
        row = {"id": i, "name": f"row{i}".encode() * (i % 4 + 1), "vec": rng.random(3, dtype=np.float32)}
        if i % 3:
            row["tags"] = rng.integers(0, 100, size=i % 5).astype(np.int64)
        out.append(tfl.encode_example(row))
    return out


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=96 << 20, log_to_driver=False,
             configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Four files of 300 records (two indexed, one GZIP) and one indexed file of 2,000."""
    d = tmp_path_factory.mktemp("ray-data")
    paths = []
    for k in range(4):
        path = str(d / f"part-{k}.tfrecord")
        with tfl.TFRecordWriter(path, compression="gzip" if k == 3 else None, index=k < 2) as w:
            w.write_many(make_records(k * 300, 300))
        paths.append(path)
    big = str(tmp_path_factory.mktemp("ray-big") / "big.tfrecord")
    with tfl.TFRecordWriter(big, index=True) as w:
        w.write_many(make_records(10_000, 2000))
    return paths, big


def _tensor_type(shape, dtype):
    from ray.data.extensions import ArrowTensorArray

    return ArrowTensorArray.from_numpy(np.empty((0, *shape), dtype)).type


def collect(ds) -> pa.Table:
    return pa.concat_tables([ray.get(ref) for ref in ds.to_arrow_refs()])


def expected(paths, spec=SPEC):
    """What TFRecordDataset + parse_example give for the files, as {column: list per row}."""
    records = list(tfl.TFRecordDataset(paths))
    parsed = tfl.parse_example(records, spec)
    cols = {}
    for name, value in parsed.items():
        if isinstance(spec[name], tfl.VarLenFeature):
            idx, vals, shape = value
            rows = [[] for _ in range(len(records))]
            for (r, _), v in zip(idx.tolist(), vals.tolist()):
                rows[r].append(v)
            cols[name] = rows
        else:
            cols[name] = np.asarray(value).tolist()
    return records, cols


def assert_rows_equal(table: pa.Table, cols, tags_null_when_absent=True):
    order = np.argsort(table.column("id").to_numpy())
    got = table.take(pa.array(order))
    want_order = np.argsort(np.asarray(cols["id"]))
    for name, values in cols.items():
        values = [values[i] for i in want_order]
        column = got.column(name).to_pylist()
        if name == "tags":  # a list column is null where the record lacks the key
            column = [v or [] for v in column]
        if name == "vec":
            np.testing.assert_array_equal(np.array(column, np.float32), np.array(values, np.float32))
        else:
            assert column == values, name


def test_read_matches_dataset_and_parse_example_exactly_once(cluster, files):
    paths, _ = files
    table = collect(read_tfrecords(paths, SPEC, override_num_blocks=3))
    records, cols = expected(paths)
    assert table.num_rows == len(records) == 1200
    assert sorted(table.column("id").to_pylist()) == list(range(1200))  # each record exactly once
    # arrow_schema(SPEC), but for vec: a tensor column (numpy batches of (n, 3) arrays)
    assert table.schema == arrow_schema(SPEC).set(2, pa.field("vec", _tensor_type((3,), np.float32), False))
    assert_rows_equal(table, cols)


def test_one_large_indexed_file_is_split_by_index_ranges_exactly_once(cluster, files):
    _, big = files
    source = TFRecordDatasource(big, SPEC)
    tasks = source.get_read_tasks(5)
    assert len(tasks) == 5 and all(t.metadata.num_rows for t in tasks)
    assert sum(t.metadata.num_rows for t in tasks) == 2000
    ds = read_tfrecords(big, SPEC, override_num_blocks=5)
    assert ds.materialize().num_blocks() >= 5
    table = collect(ds)
    assert sorted(table.column("id").to_pylist()) == list(range(10_000, 12_000))
    assert_rows_equal(table, expected([big])[1])


@settings(max_examples=25)
@given(parallelism=st.integers(1, 40), sizes=st.lists(st.integers(0, 300), min_size=1, max_size=5),
       indexed=st.lists(st.booleans(), min_size=5, max_size=5))
def test_read_tasks_cover_every_record_once_in_order(backend, tmp_path_factory, parallelism, sizes, indexed):
    """The plan, run in-process: any parallelism and mix of indexed and plain files gives every
    record once, each task's records contiguous and in file order."""
    d = tmp_path_factory.mktemp("plan")
    paths, start = [], 0
    for k, n in enumerate(sizes):
        paths.append(str(d / f"f{k}.tfrecord"))
        with tfl.TFRecordWriter(paths[-1], index=indexed[k]) as w:
            w.write_many(make_records(start, n))
        start += n
    if start == 0:
        return
    source = TFRecordDatasource(paths, {"id": SPEC["id"], "name": SPEC["name"]})
    tasks = source.get_read_tasks(parallelism)
    assert len(tasks) <= max(parallelism, len(paths))
    ids = []
    for task in tasks:
        table = pa.concat_tables([source._schema(source.features).empty_table(), *task()])
        if task.metadata.num_rows is not None:
            assert table.num_rows == task.metadata.num_rows
        ids += table.column("id").to_pylist()
        names = table.column("name").to_pylist()
        assert names == [f"row{i}".encode() * (i % 4 + 1) for i in table.column("id").to_pylist()]
    assert ids == list(range(start))


def test_raw_records_without_features(cluster, files):
    paths, big = files
    table = collect(read_tfrecords(paths + [big], raw=True, override_num_blocks=4))
    assert table.schema == pa.schema([(RECORD_COLUMN, pa.large_binary())])
    want = [r for p in paths + [big] for r in tfl.TFRecordReader(p)]
    assert sorted(table.column(RECORD_COLUMN).to_pylist()) == sorted(want)


def test_schema_is_inferred_and_columns_are_pushed_down(cluster, files):
    paths, _ = files
    ds = read_tfrecords(paths[:2])
    inferred = tfl.infer_schema(paths[0])
    want = arrow_schema(inferred)
    assert ds.schema().base_schema == want.set(3, want.field(3).with_type(_tensor_type((3,), np.float32)))
    assert ds.count() == 600
    picked = read_tfrecords(paths[:2], columns=["name", "id"])
    assert picked.schema().names == ["name", "id"]
    selected = collect(read_tfrecords(paths[:2]).select_columns(["id"]))
    assert selected.schema.names == ["id"] and sorted(selected.column("id").to_pylist()) == list(range(600))
    with pytest.raises(tfl.FeatureSpecError, match="'nope'"):
        read_tfrecords(paths, SPEC, columns=["nope"])
    for call in (lambda: read_tfrecords(paths, SPEC, columns="id"),
                 lambda: write_tfrecords(picked, "unused", columns="id")):
        with pytest.raises(tfl.ArgumentTypeError, match="columns must be a list of names"):
            call()


def test_count_reads_the_rows_of_files_without_sidecars(cluster, files):
    paths, big = files
    # Without a sidecar (one plain file, one GZIP) the rows are read, under an empty projection.
    assert read_tfrecords(paths[2:], SPEC).count() == 600
    assert read_tfrecords(paths + [big]).count() == 3200
    assert read_tfrecords(paths[2:], SPEC).select_columns(["id"]).count() == 600


def test_errors_in_an_index_range_name_the_file_offset_and_record(backend, tmp_path, monkeypatch):
    """An indexed file read in ranges (pieces of a few KiB here) reports a damaged record and
    one its spec cannot parse by their place in the file, not in the piece's buffer; so does
    the sample the datasource parses when it is made."""
    import tfrecord_lite.ray as tfl_ray

    monkeypatch.setattr(tfl_ray, "_PIECE_BYTES", 4096)
    path = str(tmp_path / "big.tfrecord")
    records = make_records(0, 2000)
    records[1200] = tfl.encode_example({"id": 1200})  # lacks "name" and "vec"
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write_many(records)
    offsets = read_index(path + ".index")[0]
    data = bytearray(open(path, "rb").read())
    data[offsets[1800] + 14] ^= 0xFF  # record 1800's data
    open(path, "wb").write(bytes(data))
    errors = []
    for task in TFRecordDatasource(path, SPEC).get_read_tasks(4):
        try:
            for _ in task():
                pass
        except tfl.TFRecordError as exc:
            errors.append((type(exc), exc.path, exc.offset, exc.index))
    assert errors == [(tfl.FeatureSpecError, path, offsets[1200], 1200),
                      (tfl.errors.CorruptRecordError, path, offsets[1800], 1800)]
    first, second = str(tmp_path / "first.tfrecord"), str(tmp_path / "second.tfrecord")
    with tfl.TFRecordWriter(first) as w:
        w.write_many(make_records(0, 10))
    with tfl.TFRecordWriter(second, index=True) as w:
        w.write_many(records[1195:1205])  # its record 5 is in the sample the datasource parses
    with pytest.raises(tfl.FeatureSpecError) as info:
        TFRecordDatasource([first, second], SPEC)
    assert (info.value.path, info.value.offset, info.value.index) == (second, read_index(second + ".index")[0][5], 5)
    assert backend.name == tfl.implementation


def test_sequence_examples_and_a_spec_that_is_no_mapping_are_refused(backend, tmp_path):
    """Inferring a spec from SequenceExamples gave a SequenceSchema, which failed with
    AttributeError ('SequenceSchema' object has no attribute 'items'); a list of specs with a
    bare TypeError from dict()."""
    path = str(tmp_path / "seq.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write_many([tfl.encode_sequence_example({"c": [i]}, {"f": [[1.0], [2.0, 3.0]]}) for i in range(3)])
    with pytest.raises(tfl.FeatureSpecError, match="SequenceExamples.*read_tfrecords") as info:
        TFRecordDatasource(path)
    assert info.value.path == path and "sequence_to_arrow" in str(info.value)
    # the hint is one a Ray user can follow (it told them to call sequence_to_arrow(records, ...))
    assert "raw=True" in info.value.hint and "map_batches" in info.value.hint
    for spec in (tfl.infer_schema(path), [SPEC["id"]]):
        with pytest.raises(tfl.ArgumentTypeError, match="must map names to feature specs"):
            TFRecordDatasource(path, spec)
    table = pa.concat_tables(b for task in TFRecordDatasource(path, raw=True).get_read_tasks(1) for b in task())
    assert table.num_rows == 3 and backend.name == tfl.implementation


def _damaged(tmp_path, name, n, bad, start=0):
    """An indexed file of n records from id start whose record bad has a flipped data byte."""
    path = str(tmp_path / name)
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write_many(make_records(start, n))
    if bad is not None:
        offsets = read_index(path + ".index")[0]
        data = bytearray(open(path, "rb").read())
        data[offsets[bad] + 14] ^= 0xFF
        open(path, "wb").write(bytes(data))
    return path


@pytest.mark.parametrize("on_corrupt", ["skip", "stop"])
def test_on_corrupt_reads_the_records_tfrecord_dataset_reads(backend, tmp_path, on_corrupt):
    """read_tfrecords(..., on_corrupt='skip') went to read_datasource, which dropped it without
    a word: the read failed at the first bad record with a message saying to pass it. Now the
    records are those TFRecordDataset(on_corrupt=...) gives, each file read whole by one task
    (a bad first record does not stop the sample either)."""
    paths = [_damaged(tmp_path, "a.tfrecord", 300, 0), _damaged(tmp_path, "b.tfrecord", 300, None, 300),
             _damaged(tmp_path, "c.tfrecord", 900, 450, 600)]
    want = sorted(tfl.parse_example(list(tfl.TFRecordDataset(paths, on_corrupt=on_corrupt)), SPEC)["id"].tolist())
    assert len(want) == (1498 if on_corrupt == "skip" else 750)
    source = TFRecordDatasource(paths, SPEC, on_corrupt=on_corrupt)
    tasks = source.get_read_tasks(8)
    assert len(tasks) == 3 and all(t.metadata.num_rows is None for t in tasks)
    assert sorted(i for t in tasks for b in t() for i in b.column("id").to_pylist()) == want
    with pytest.raises(tfl.errors.CorruptRecordError, match="on_corrupt="):
        for t in TFRecordDatasource(paths, SPEC).get_read_tasks(8):
            list(t())
    with pytest.raises(tfl.InvalidArgumentError, match="on_corrupt must be one of"):
        TFRecordDatasource(paths, SPEC, on_corrupt="ignore")
    with pytest.raises(tfl.ArgumentTypeError, match="unexpected keyword argument 'on_corupt'"):
        read_tfrecords(paths, SPEC, on_corupt="skip")  # misspelt: refused, not dropped
    assert backend.name == tfl.implementation


def test_on_corrupt_on_the_cluster(cluster, tmp_path):
    paths = [_damaged(tmp_path, "a.tfrecord", 300, 10), _damaged(tmp_path, "b.tfrecord", 300, None, 300)]
    assert read_tfrecords(paths, SPEC, on_corrupt="skip").count() == 599
    assert read_tfrecords(paths, raw=True, on_corrupt="stop").count() == 310


def test_build_index_writes_sidecars_that_split_the_file(tmp_path):
    path = str(tmp_path / "plain.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write_many(make_records(0, 900))
    assert len(TFRecordDatasource(path, SPEC).get_read_tasks(3)) == 1  # no sidecar: one task
    tasks = TFRecordDatasource(path, SPEC, build_index=True).get_read_tasks(3)
    assert os.path.exists(path + ".index")
    rows = [t.metadata.num_rows for t in tasks]
    assert len(rows) == 3 and sum(rows) == 900 and min(rows) > 200  # about equal bytes
    ids = [i for t in tasks for block in t() for i in block.column("id").to_pylist()]
    assert ids == list(range(900))


def test_planning_describes_files_concurrently_in_order(backend, memfs, monkeypatch):
    """Planning described the files one after another on the driver (size, first bytes,
    sidecar: several requests each), so thousands of s3:// files made tens of thousands of
    sequential requests. Now up to 16 files are described at once: the plan is the same, and
    the first failing file in order is the one an error names."""
    import tfrecord_lite.fs as tfl_fs
    from tfrecord_lite.index import write_index

    paths = [memfs.url(f"f{k:02d}.tfrecord") for k in range(12)]
    for k, path in enumerate(paths):  # file 0 holds the whole sample: the others are only planned
        with tfl.TFRecordWriter(path, compression="gzip" if k % 4 == 3 else None, index=k % 2 == 0) as w:
            w.write_many(make_records(0, 1000) if k == 0 else make_records(k * 10, 0 if k == 5 else 10))
    real, overlap = tfl_fs.size, Overlap(4)

    def size(path, storage_options=None):  # a slow store: calls wait here until 4 overlap
        with overlap():
            return real(path, storage_options)

    monkeypatch.setattr(tfl_fs, "size", size)
    source = TFRecordDatasource(paths, SPEC)
    assert overlap.peak >= 4
    want = [source._describe(p, False) for p in paths]
    assert [f[:3] for f in source._files] == [w[:3] for w in want]
    assert [f[2] for f in want] == [None, None, None, "gzip"] * 3
    for got, expect in zip(source._files, want):
        assert (got[3] is None) == (expect[3] is None)
        if got[3] is not None:
            assert all(np.array_equal(a, b) for a, b in zip(got[3], expect[3]))
    write_index(paths[4] + ".index", [0], [100])  # stale: file 4 fails, and file 9 is gone
    memfs.fs.rm(memfs.prefix + "/f09.tfrecord")
    with pytest.raises(tfl.TFRecordError, match="stale") as info:
        TFRecordDatasource(paths, SPEC)
    assert info.value.path == paths[4] + ".index"
    memfs.fs.rm(memfs.prefix + "/f04.tfrecord.index")
    with pytest.raises(FileNotFoundError) as missing:
        TFRecordDatasource(paths, SPEC)
    assert missing.value.filename == paths[9]
    assert backend.name == tfl.implementation


def test_stale_index_is_refused(tmp_path):
    path = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write_many(make_records(0, 10))
    with open(path, "ab") as f:
        f.write(make_records(10, 1)[0])  # the file grew behind its sidecar
    with pytest.raises(tfl.TFRecordError, match="stale"):
        TFRecordDatasource(path, SPEC)


def test_a_sidecar_with_two_frames_under_one_entry_fails_the_read(backend, tmp_path):
    """A sidecar whose entries still tile the file, with records 2 and 3 under one entry,
    passes load_index (it checks the first and last headers): a task reading the file whole
    gave 6 rows where its metadata (and count()) said 5. Its read now fails as a split
    file's does."""
    from tfrecord_lite.index import load_index, write_index

    path = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write_many(make_records(0, 6))
    offsets, lengths = read_index(path + ".index")
    lengths[2] += lengths[3]
    write_index(path + ".index", np.delete(offsets, 3), np.delete(lengths, 3))
    assert len(load_index(path)[0]) == 5
    whole = f"bytes 0..{os.path.getsize(path)} held 6 records where the index has 5"
    for parallelism, message in ((1, whole), (2, "records where the index has")):  # whole, split
        tasks = TFRecordDatasource(path, SPEC).get_read_tasks(parallelism)
        assert len(tasks) == parallelism and sum(t.metadata.num_rows for t in tasks) == 5
        with pytest.raises(tfl.errors.TruncatedRecordError, match=f"{message}.*stale") as info:
            for t in tasks:
                list(t())
        assert info.value.path == path
    assert backend.name == tfl.implementation


def test_write_then_read_round_trip_with_shard_names(cluster, files, tmp_path):
    paths, _ = files
    shards = write_tfrecords(read_tfrecords(paths, SPEC).repartition(3), str(tmp_path / "out" / "train"))
    names = [f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "out")) == names
    assert [os.path.basename(s.path) for s in shards] == names
    assert sum(s.records for s in shards) == 1200
    assert [len(list(tfl.TFRecordReader(s.path))) for s in shards] == [s.records for s in shards]
    out = sorted(str(tmp_path / "out" / n) for n in names)
    # Values survive: parse the written shards with TFRecordDataset + parse_example.
    _, got = expected(out)
    _, want = expected(paths)
    order_got, order_want = np.argsort(got["id"]), np.argsort(want["id"])
    for name in SPEC:
        assert [got[name][i] for i in order_got] == [want[name][i] for i in order_want], name


def test_numpy_batches_write_tensor_and_object_columns(cluster, files, tmp_path):
    paths, _ = files
    # A numpy map turns the shaped column into Ray's tensor extension type: it is written as
    # its flat values, as the FixedLenFeature([3]) it came from.
    dense = {k: SPEC[k] for k in ("id", "name", "vec")}
    ds = read_tfrecords(paths[:1], dense).map_batches(lambda b: b, batch_format="numpy")
    shards = write_tfrecords(ds, str(tmp_path / "np" / "part"))
    _, got = expected([s.path for s in shards], dense)
    _, want = expected(paths[:1], dense)
    assert sorted(zip(got["id"], got["name"], got["vec"])) == sorted(zip(want["id"], want["name"], want["vec"]))
    # So is a column of two dimensions, read as a tensor: numpy batches hold (n, 1, 3) arrays.
    def check(batch):
        assert batch["vec"].shape == (len(batch["id"]), 1, 3) and batch["vec"].dtype == np.float32
        return batch

    wide = {"id": SPEC["id"], "vec": tfl.FixedLenFeature([1, 3], "float32")}
    shards = write_tfrecords(read_tfrecords(paths[:1], wide).map_batches(check, batch_format="numpy"),
                             str(tmp_path / "np2" / "part"))
    _, got = expected([s.path for s in shards], {"id": SPEC["id"], "vec": SPEC["vec"]})
    assert sorted(zip(got["id"], got["vec"])) == sorted(zip(want["id"], want["vec"]))
    # Ragged lists, None where a record lacks them, are Python objects in numpy batches:
    # written as lists, the None rows without the feature.
    ds = read_tfrecords(paths[:1], SPEC).map_batches(lambda b: b, batch_format="numpy")
    shards = write_tfrecords(ds, str(tmp_path / "obj" / "part"))
    _, got = expected([s.path for s in shards])
    _, want = expected(paths[:1])
    assert sorted(zip(got["id"], got["tags"])) == sorted(zip(want["id"], want["tags"]))
    def complex_numbers(batch):
        batch["bad"] = np.empty(len(batch["id"]), object)
        batch["bad"][:] = [np.array([1j])] * len(batch["id"])
        return batch

    ds = ds.map_batches(complex_numbers, batch_format="numpy")
    with pytest.raises(Exception, match="column 'bad' holds Python objects"):
        write_tfrecords(ds, str(tmp_path / "bad" / "part"))
    assert os.listdir(tmp_path / "bad") == []


def test_numpy_batches_of_bytes_and_ragged_columns_write_back(backend, tmp_path):
    """Ray's numpy batches hold shaped bytes features and ragged features as arrays of
    arrays, None where a record lacks the feature; Ray stores them as pickled Python objects,
    ragged tensors or lists of lists, which write_tfrecords refused: 'column ... cannot be
    held by a tf.train.Example'; so was a 2-D array of numpy strings (fixed_size_binary).
    They are written as lists of each row's values, flattened, and read back as they were;
    objects that are no values are refused by column."""
    from ray.data.block import BlockAccessor

    from tfrecord_lite.ray import TFRecordDatasink

    spec = {"id": tfl.FixedLenFeature([], "int64"), "b1": tfl.FixedLenFeature([2], "string"),
            "b2": tfl.FixedLenFeature([2, 1], "string"), "tags": tfl.VarLenFeature("string"),
            "r": tfl.RaggedFeature("int64"), "f": tfl.VarLenFeature("float32"),
            "q": tfl.FixedLenSequenceFeature([2], "float32", allow_missing=True)}
    path = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        for i in range(6):
            row = {"id": i, "b1": [b"x%d" % i, b""], "b2": [b"y", b"z" * i], "r": list(range(i % 3))}
            if i % 2:
                row["tags"] = [b"t"] * (i % 4)
                row["f"] = np.arange(i, dtype=np.float32) / 4
                row["q"] = np.arange(2 * i, dtype=np.float32)
            w.write(tfl.encode_example(row))
    (task,) = TFRecordDatasource(path, spec).get_read_tasks(1)
    (block,) = task()
    batch = BlockAccessor.for_block(block).to_batch_format("numpy")
    assert batch["b2"].shape == (6,) and batch["tags"][0] is None
    numpy_block = BlockAccessor.batch_to_block(batch)
    shards = _write_in_process(TFRecordDatasink(str(tmp_path / "out")), [numpy_block, numpy_block.slice(2, 3)])
    records = [r for s in shards for r in tfl.TFRecordReader(s.path)]
    source = list(tfl.TFRecordReader(path))
    assert tfl.arrow.to_arrow(records, spec).equals(tfl.arrow.to_arrow(source + source[2:5], spec))
    # numpy strings of 2 dimensions are a tensor of fixed-width UTF-32 in Ray: written as text
    text = BlockAccessor.batch_to_block({"u": np.array([["ab", "c"], ["d", "\u00e9"]])})
    (shard,) = _write_in_process(TFRecordDatasink(str(tmp_path / "text")), [text])
    assert list(tfl.TFRecordReader(shard.path)) == tfl.encode_examples({"u": [["ab", "c"], ["d", "\u00e9"]]})
    bad = BlockAccessor.batch_to_block({"d": np.array([np.array([1j])], dtype=object)})
    with pytest.raises(tfl.FeatureSpecError, match="column 'd' holds Python objects"):
        _write_in_process(TFRecordDatasink(str(tmp_path / "bad")), [bad])
    assert backend.name == tfl.implementation


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), n=st.integers(1, 4),
       dtype=st.sampled_from(["float32", "int64", "uint8", "float16", "bool"]))
def test_shaped_numeric_columns_are_tensors_that_numpy_batches_write_back(backend, tmp_path_factory, shape,
                                                                         n, dtype):
    """FixedLenFeature([2, 3]) was read as nested fixed-size lists, which Ray's numpy batches
    hold as (n,) arrays of objects: Ray made them pickled objects again and write_tfrecords
    refused them ('cannot be held'). FixedLenFeature([3]) kept its fixed-size list too, so
    numpy batches held (n,) arrays of arrays where a Ray user expects (n, 3). Numeric columns
    of any shape (RawTensorFeature ones too) are now Ray tensors: numpy batches hold (n, 3)
    or (n, 2, 3) arrays, written back as the values read. Bytes keep their fixed-size lists."""
    from ray.data.block import BlockAccessor

    from tfrecord_lite.ray import TFRecordDatasink

    d = tmp_path_factory.mktemp("tensor")
    values = (np.random.default_rng(n).random((n, *shape)) * 200).astype(dtype)
    raw = dtype not in ("float32", "int64")
    spec = {"t": tfl.RawTensorFeature(shape, dtype) if raw else tfl.FixedLenFeature(shape, dtype),
            "s": tfl.FixedLenFeature([1, 2], "string"), "v": tfl.FixedLenFeature([2], "int64")}
    with tfl.TFRecordWriter(str(d / "a.tfrecord")) as w:
        w.write_many(tfl.encode_example({"t": [v.tobytes()] if raw else v.reshape(-1), "s": [b"x", b"yz"],
                                         "v": [i, -i]}) for i, v in enumerate(values))
    source = TFRecordDatasource(str(d / "a.tfrecord"), spec)
    (task,) = source.get_read_tasks(1)
    (block,) = task()
    assert block.schema == source._schema(source.features)
    assert str(block.schema.field("s").type) == "fixed_size_list<item: fixed_size_list<item: large_binary>[2]>[1]"
    batch = BlockAccessor.for_block(block).to_batch_format("numpy")
    assert batch["t"].shape == values.shape and batch["t"].dtype == values.dtype
    np.testing.assert_array_equal(batch["t"], values)
    assert batch["v"].dtype == np.int64 and batch["v"].tolist() == [[i, -i] for i in range(n)]
    shards = _write_in_process(TFRecordDatasink(str(d / "out"), columns=["t", "v"]),
                               [BlockAccessor.batch_to_block({k: batch[k] for k in "tv"})])
    written = tfl.FixedLenFeature(shape, "float32" if "float" in dtype else "int64")
    got = tfl.parse_example(list(tfl.TFRecordReader(shards[0].path)), {"t": written, "v": spec["v"]})
    np.testing.assert_array_equal(got["t"], values.astype(written.dtype))
    assert got["v"].tolist() == [[i, -i] for i in range(n)] and backend.name == tfl.implementation


def test_raw_round_trip_and_compression(cluster, files, tmp_path):
    paths, _ = files
    ds = read_tfrecords(paths, raw=True)
    shards = write_tfrecords(ds.repartition(2), str(tmp_path / "raw"), record_column=RECORD_COLUMN,
                             compression="gzip")
    assert len(shards) == 2
    for s in shards:
        with open(s.path, "rb") as f:
            assert f.read(2) == b"\x1f\x8b"
        with gzip.open(s.path) as f:  # a real gzip stream
            assert f.read()
    written = [r for s in shards for r in tfl.TFRecordReader(s.path)]
    assert sorted(written) == sorted(r for p in paths for r in tfl.TFRecordReader(p))
    back = collect(read_tfrecords([s.path for s in shards], SPEC))
    assert sorted(back.column("id").to_pylist()) == list(range(1200))


def test_write_with_index_sidecars(cluster, files, tmp_path):
    paths, _ = files
    shards = write_tfrecords(read_tfrecords(paths[:1], SPEC).repartition(2), str(tmp_path / "ix"), index=True)
    for s in shards:
        offsets, lengths = read_index(s.path + ".index")
        assert len(offsets) == s.records
        assert tfl.TFRecordFile(s.path)[-1] == list(tfl.TFRecordReader(s.path))[-1]


def test_an_index_of_compressed_shards_is_refused_before_the_write(tmp_path):
    """compression='gzip' with index=True was refused by each write task, once the dataset had
    been computed, naming its hidden staging file ('.part-<id>-00000.tfrecord')."""
    from tfrecord_lite.ray import TFRecordDatasink

    prefix = str(tmp_path / "part")
    with pytest.raises(tfl.InvalidArgumentError, match="index=True needs an uncompressed file") as info:
        TFRecordDatasink(prefix, compression="gzip", index=True)
    assert info.value.path == prefix and os.listdir(tmp_path) == []


def test_a_block_where_a_column_is_all_none_is_written(backend, tmp_path):
    """Ray types a column null in a block where every value is None (from_items, a map that
    returns None): write_arrow refused the block ('Arrow type null cannot be held by a
    tf.train.Example'), so the whole write failed. Its rows lack the feature, as a null in a
    typed column gives."""
    from tfrecord_lite.ray import TFRecordDatasink

    blocks = [pa.table({"id": [0, 1], "s": pa.array(["a", None])}), pa.table({"id": [2, 3], "s": pa.nulls(2)})]
    for columns in (None, ["s", "id"]):
        shards = _write_in_process(TFRecordDatasink(str(tmp_path / "part"), columns=columns), blocks)
        got = [tfl.decode_example(r) for s in shards for r in tfl.TFRecordReader(s.path)]
        assert [(d["id"].tolist(), d.get("s")) for d in got] == [([0], [b"a"]), ([1], None), ([2], None), ([3], None)]
    assert backend.name == tfl.implementation


def test_a_raw_tensor_column_is_written_back_as_read(cluster, tmp_path):
    """read_tfrecords of a RawTensorFeature gives a Ray tensor of its dtype, which
    write_tfrecords wrote as an int64_list of the values: the copy of an image dataset grew
    several times over and no longer parsed with its spec. It is written back as raw bytes."""
    spec = {"img": tfl.RawTensorFeature([2, 2], np.uint8), "id": tfl.FixedLenFeature([], "int64")}
    records = [tfl.encode_example({"img": bytes([i, 255, 0, 7]), "id": i}) for i in range(6)]
    with tfl.TFRecordWriter(str(tmp_path / "a.tfrecord")) as w:
        w.write_many(records)
    shards = write_tfrecords(read_tfrecords(str(tmp_path / "a.tfrecord"), spec).repartition(2),
                             str(tmp_path / "out" / "part"))
    assert sorted(r for s in shards for r in tfl.TFRecordReader(s.path)) == sorted(records)


def test_a_block_of_only_empty_lists_writes_empty_features(cluster, tmp_path):
    """Ray types a list column list<null> in a block where every row is [] or None: the
    column was left out of that block's records, so its [] rows read back as null (a record
    lacking the feature) where the other blocks' [] read back as []. They are written as
    empty features now, and None rows as no feature, in every block."""
    ds = ray.data.from_items([{"id": 0, "v": []}, {"id": 1, "v": None}, {"id": 2, "v": [5, 6]}, {"id": 3, "v": []}],
                             override_num_blocks=2)
    assert [str(b.schema.field("v").type) for b in map(ray.get, ds.to_arrow_refs())] == ["list<item: null>",
                                                                                         "list<item: int64>"]
    shards = write_tfrecords(ds, str(tmp_path / "part"))
    back = collect(read_tfrecords([s.path for s in shards], {"id": tfl.FixedLenFeature([], "int64"),
                                                             "v": tfl.VarLenFeature("int64")})).sort_by("id")
    assert back.column("v").to_pylist() == [[], None, [5, 6], []]


def test_a_filter_that_empties_blocks_leaves_no_empty_shards(cluster, tmp_path):
    """Four blocks filtered down to the rows of the first wrote four shards, three empty."""
    ds = ray.data.range(8, override_num_blocks=4).filter(lambda row: row["id"] < 2)
    shards = write_tfrecords(ds, str(tmp_path / "part"))
    assert [(os.path.basename(s.path), s.records) for s in shards] == [("part-00000-of-00001.tfrecord", 2)]
    assert os.listdir(tmp_path) == ["part-00000-of-00001.tfrecord"]


def test_a_null_record_is_named_by_its_column_and_row(backend, tmp_path):
    """A null in record_column failed in the writer as 'cannot write a NoneType as a record',
    naming record 3 of the hidden staging file ('.part-<id>-00001.tfrecord')."""
    from tfrecord_lite.ray import TFRecordDatasink

    sink = TFRecordDatasink(str(tmp_path / "part"), record_column=RECORD_COLUMN)
    blocks = [pa.table({RECORD_COLUMN: pa.array(v, pa.large_binary())}) for v in ([b"a", b"b"], [b"c", None])]
    with pytest.raises(tfl.FeatureSpecError, match="'record' holds a null.*row 3 of write task 1.*filter") as info:
        sink.write(blocks, type("Ctx", (), {"task_idx": 1}))
    assert info.value.path == str(tmp_path / "part") and os.listdir(tmp_path) == []
    assert backend.name == tfl.implementation


def test_a_failing_task_leaves_no_file(cluster, files, tmp_path):
    paths, _ = files

    def explode(batch):  # the task holding the last record fails after others have written
        if 1199 in batch.column("id").to_pylist():
            raise ValueError("boom at 1199")
        return batch

    out = tmp_path / "atomic"
    ds = read_tfrecords(paths, SPEC).repartition(6).map_batches(explode, batch_format="pyarrow")
    with pytest.raises(Exception, match="boom at 1199"):
        write_tfrecords(ds, str(out / "part"))
    assert not out.exists() or os.listdir(out) == []


def test_a_failing_commit_removes_every_shard(cluster, files, tmp_path):
    paths, _ = files
    out = tmp_path / "commit"
    (out / "part-00001-of-00003.tfrecord").mkdir(parents=True)  # this rename must fail
    (out / "part-00001-of-00003.tfrecord" / "x").write_bytes(b"")
    with pytest.raises(OSError):
        write_tfrecords(read_tfrecords(paths[:1], SPEC).repartition(3), str(out / "part"))
    assert os.listdir(out) == ["part-00001-of-00003.tfrecord"]  # only what was there before


def _write_in_process(sink, tables):
    """What write_tfrecords has Ray do, run here: one write task per table, then the commit."""
    from types import SimpleNamespace

    from ray.data.datasource.datasink import WriteResult

    sink.on_write_start(tables[0].schema)
    returns = [sink.write([t], SimpleNamespace(task_idx=i)) for i, t in enumerate(tables)]
    sink.on_write_complete(WriteResult(num_rows=sum(t.num_rows for t in tables), size_bytes=0,
                                       write_returns=returns))
    return sink.shards


def test_a_failing_commit_puts_back_an_earlier_runs_shards(backend, tmp_path, monkeypatch):
    """A re-run whose last rename failed removed the shards it had renamed over the earlier
    run's: part of the earlier dataset was gone, its sidecars too."""
    from tfrecord_lite.ray import TFRecordDatasink

    prefix = str(tmp_path / "part")
    tables = [pa.table({"id": pa.array([3 * k + i for i in range(3)], pa.int64())}) for k in range(3)]
    _write_in_process(TFRecordDatasink(prefix, index=True), tables)
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    assert len(before) == 6
    real = os.replace

    def fail_last(src, dst):
        if dst.endswith("part-00002-of-00003.tfrecord"):
            raise OSError(5, "simulated I/O error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_last)
    new = [pa.table({"id": pa.array([100 + k], pa.int64())}) for k in range(3)]
    for index in (True, False):
        with pytest.raises(OSError, match="simulated"):
            _write_in_process(TFRecordDatasink(prefix, index=index), new)
        assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == before
    monkeypatch.setattr(os, "replace", real)
    shards = _write_in_process(TFRecordDatasink(prefix), new)  # a commit that stands keeps no copy
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(s.path) for s in shards)
    assert [tfl.decode_example(r)["id"].tolist() for s in shards for r in tfl.TFRecordReader(s.path)] == [
        [100], [101], [102]]
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("earlier", [False, True])
def test_a_failing_sidecar_rename_leaves_no_shard(backend, tmp_path, monkeypatch, earlier):
    """When the last shard's sidecar failed to be renamed, its data was already under its final
    name and stayed there, alone, while every other shard was removed."""
    from tfrecord_lite.ray import TFRecordDatasink

    prefix = str(tmp_path / "part")
    if earlier:
        _write_in_process(TFRecordDatasink(prefix, index=True), [pa.table({"id": [k, k]}) for k in range(2)])
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    real = os.replace
    failures = []

    def fail_sidecar(src, dst):  # once: putting an earlier sidecar back works
        if dst.endswith("part-00001-of-00002.tfrecord.index") and not failures:
            failures.append(dst)
            raise OSError(5, "simulated I/O error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_sidecar)
    with pytest.raises(OSError, match="simulated"):
        _write_in_process(TFRecordDatasink(prefix, index=True), [pa.table({"id": [7 + k]}) for k in range(2)])
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == before
    assert backend.name == tfl.implementation


def test_a_long_prefix_whose_shard_names_fit_is_written(backend, tmp_path):
    """A staging name is 5 bytes longer than its shard's: with a 230-byte prefix name, whose
    shards' names (254 bytes) fit, every write task failed with 'File name too long'."""
    from tfrecord_lite.ray import TFRecordDatasink

    shards = _write_in_process(TFRecordDatasink(str(tmp_path / ("é" * 115))), [pa.table({"id": [1, 2]})])
    assert os.listdir(tmp_path) == [os.path.basename(shards[0].path)]
    assert len(os.fsencode(os.path.basename(shards[0].path))) == 254 and shards[0].records == 2
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("fails", [False, True])
def test_a_task_attempt_killed_while_writing_leaves_no_file(backend, tmp_path, fails):
    """A write task whose worker died mid-write is retried, and the write then succeeded (or
    failed later) with the dead attempt's temporary files (data and sidecar) left beside the
    shards: '..part-<write id>-00000.tfrecord.<random>.tmp'."""
    from tfrecord_lite.ray import TFRecordDatasink

    sink = TFRecordDatasink(str(tmp_path / "part"), index=True)
    killed = ("import os, tfrecord_lite as tfl\n"
              f"w = tfl.TFRecordWriter({sink.staging_path(0)!r}, index=True)\n"
              "w.write_many([b'x'] * 3); w.flush(); os._exit(1)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", killed], env={**os.environ, "PYTHONPATH": root}, check=False)
    assert len(os.listdir(tmp_path)) == 2  # the dead attempt's data and sidecar
    tables = [pa.table({"id": pa.array([k], pa.int64())}) for k in range(2)]
    if fails:
        sink.write([tables[0]], type("Ctx", (), {"task_idx": 0}))
        sink.on_write_failed(RuntimeError("task 1 failed"))
        assert os.listdir(tmp_path) == []
    else:
        shards = _write_in_process(sink, tables)
        names = [os.path.basename(s.path) for s in shards]
        assert sorted(os.listdir(tmp_path)) == sorted(names + [n + ".index" for n in names])
    assert backend.name == tfl.implementation


def test_s3_read_and_write(cluster, files, s3):
    paths, _ = files
    for p in paths[:2]:
        with open(p, "rb") as f:
            s3.put(os.path.basename(p), f.read())
    opts = s3.storage_options
    table = collect(read_tfrecords(s3.url(), SPEC, storage_options=opts, override_num_blocks=2))
    assert sorted(table.column("id").to_pylist()) == list(range(600))
    shards = write_tfrecords(read_tfrecords(s3.url(), SPEC, storage_options=opts).repartition(2),
                             s3.url("out/part"), storage_options=opts)
    assert [s.path for s in shards] == [s3.url(f"out/part-{i:05d}-of-00002.tfrecord") for i in range(2)]
    assert [n for n in s3.ls() if n.startswith(".")] == []  # no staging object left
    back = collect(read_tfrecords(s3.url("out/"), SPEC, storage_options=opts))
    assert sorted(back.column("id").to_pylist()) == list(range(600))


def test_import_tfrecord_lite_does_not_import_ray():
    out = subprocess.run([sys.executable, "-c", "import sys, tfrecord_lite; print('ray' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_readme_section_runs_in_an_empty_directory(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Ray Data\n", 1)[1].split("\n## ", 1)[0]
    (script,) = re.findall(r"```python\n(.+?)\n```", section, flags=re.S)
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "2000"
    assert sorted(os.listdir(tmp_path / "out")) == [f"rows-{i:05d}-of-00003.tfrecord" for i in range(3)]
    ids = sorted(tfl.parse_example(list(tfl.TFRecordDataset(str(tmp_path / "out"))),
                                   {"id": SPEC["id"]})["id"].tolist())
    assert ids == list(range(0, 4000, 2))
