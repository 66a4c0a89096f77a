"""TFRecordDatasink's checks, run in-process (no cluster): what it refuses when made, and
columns whose Feature kind differs between a task's blocks or between tasks; what
read_tfrecords and write_tfrecords refuse before Ray runs anything."""

import os

import pyarrow as pa
import pytest

import tfrecord_lite as tfl
from tfrecord_lite.ray import TFRecordDatasink

from .test_ray import _write_in_process


def test_a_directory_prefix_is_refused_before_the_dataset_is_computed(backend, tmp_path):
    """write_tfrecords(ds, "out/") wrote shards named out/-00000-of-00004.tfrecord (no name,
    and a leading dash commands take for an option), where ShardedWriter refuses such a
    prefix. The sink refuses it too, naming a prefix that works."""
    for prefix in (str(tmp_path) + os.sep, "file://" + str(tmp_path) + "/", "s3://bucket/out/"):
        with pytest.raises(tfl.InvalidArgumentError, match="is a directory") as info:
            TFRecordDatasink(prefix)
        assert "train-00000-of-00002.tfrecord" in info.value.hint
    assert os.listdir(tmp_path) == [] and backend.name == tfl.implementation


def test_a_prefix_naming_a_bucket_is_refused_before_the_dataset_is_computed(backend):
    """write_tfrecords(ds, "s3://bucket") staged its shards as 's3:/.bucket-<id>-00000.tfrecord'
    and failed in every write task; ShardedWriter said to write 's3://bucket-00000-of-00002
    .tfrecord/data.tfrecord'. Both refuse the prefix, naming one inside the bucket."""
    for prefix in ("s3://bucket", "gs://bucket"):
        for make in (TFRecordDatasink, lambda p: tfl.ShardedWriter(p, num_shards=2)):
            with pytest.raises(tfl.InvalidArgumentError, match="names a bucket") as info:
                make(prefix)
            assert f"{prefix}/train-00000-of-00002.tfrecord" in info.value.hint
    assert backend.name == tfl.implementation


def test_a_column_named_twice_is_refused_when_the_sink_is_made(backend, tmp_path):
    """columns=["x", "x"] failed in every write task, once the dataset had been computed, as
    'a table written as Examples needs distinct column names' (naming neither)."""
    with pytest.raises(tfl.InvalidArgumentError, match="columns names 'x' more than once"):
        TFRecordDatasink(str(tmp_path / "part"), columns=["y", "x", "x"])
    with pytest.raises(tfl.FeatureSpecError, match="distinct column names, but 'a' names more than one"):
        tfl.arrow.write_arrow(pa.Table.from_arrays([pa.array([1]), pa.array([2])], ["a", "a"]),
                              tmp_path / "t.tfrecord")
    assert os.listdir(tmp_path) == [] and backend.name == tfl.implementation


def test_a_column_of_int64_in_one_block_and_double_in_another_is_refused(backend, tmp_path):
    """Ray types a column per block (from_items of 1 and 1.5, pandas' NaN making a float
    block): the shards held int64_list in some records and float_list in others, which no one
    spec parses. The write fails now, within a task or across tasks, leaving no file."""
    ints, floats = pa.table({"x": [1, 2]}), pa.table({"x": [1.5, None]})
    with pytest.raises(tfl.FeatureSpecError, match="'x' is int64 values at row 0 of write task 3 but float values "
                       "at row 2 of write task 3") as info:
        TFRecordDatasink(str(tmp_path / "part")).write([ints, floats], type("Ctx", (), {"task_idx": 3}))
    assert info.value.path == str(tmp_path / "part")
    with pytest.raises(tfl.FeatureSpecError, match="'x' is int64 values at write task 0 but float values at write "
                       "task 1"):
        _write_in_process(TFRecordDatasink(str(tmp_path / "part")), [ints, floats])
    assert os.listdir(tmp_path) == []
    halves = floats.cast(pa.schema([("x", pa.float16())]))
    shards = _write_in_process(TFRecordDatasink(str(tmp_path / "part")), [floats, halves])
    assert [s.records for s in shards] == [2, 2] and backend.name == tfl.implementation


@pytest.mark.parametrize("index", [False, True])
def test_a_task_of_only_empty_blocks_writes_no_shard(backend, tmp_path, index):
    """Every write task wrote a shard, empty ones included: a filter that emptied some blocks
    left part-00001-of-00004.tfrecord and others with no records (and their sidecars). As
    Ray's own file datasinks do, empty blocks write nothing and only the tasks with rows get
    shards, numbered among themselves; an empty dataset still gets one empty shard."""
    empty = pa.table({"id": pa.array([], pa.int64())})
    tables = [empty, pa.table({"id": [1, 2]}), empty, pa.table({"id": [3]})]
    shards = _write_in_process(TFRecordDatasink(str(tmp_path / "part"), index=index), tables)
    names = [f"part-0000{i}-of-00002.tfrecord" for i in range(2)]
    assert [(os.path.basename(s.path), s.records) for s in shards] == [(names[0], 2), (names[1], 1)]
    assert sorted(os.listdir(tmp_path)) == sorted(names + ([n + ".index" for n in names] if index else []))
    got = [tfl.decode_example(r)["id"].tolist() for s in shards for r in tfl.TFRecordReader(s.path)]
    assert got == [[1], [2], [3]]
    out = tmp_path / "none"
    shards = _write_in_process(TFRecordDatasink(str(out / "part"), index=index), [empty, empty])
    assert [(os.path.basename(s.path), s.records) for s in shards] == [("part-00000-of-00001.tfrecord", 0)]
    assert len(os.listdir(out)) == (2 if index else 1) and backend.name == tfl.implementation


@pytest.mark.parametrize("store", ["s3", "memfs"])
def test_a_remote_prefix_with_glob_characters_commits_and_cleans_up(backend, request, store):
    """A prefix such as s3://b/run[lr=0.1]/part failed at the commit (fsspec's mv took the
    staging name for a glob that matched nothing), and what killed attempts left was never
    found to be removed (the staging prefix globbed). Names are taken as they are."""
    remote = request.getfixturevalue(store)
    options = getattr(remote, "storage_options", None)
    prefix = remote.url("run[lr=0.1]/part")
    sink = TFRecordDatasink(prefix, storage_options=options)
    killed = sink.staging_path(7)  # what an attempt killed while writing left
    tfl.TFRecordWriter(killed, storage_options=options).close()
    shards = _write_in_process(sink, [pa.table({"id": [k]}) for k in range(2)])
    names = [f"part-0000{k}-of-00002.tfrecord" for k in range(2)]
    assert [s.path for s in shards] == [remote.url("run[lr=0.1]/" + n) for n in names]
    fs = remote.fs
    fs.invalidate_cache()
    listed = sorted(p.rsplit("/", 1)[1] for p in fs.ls(remote.url("run[lr=0.1]").split("://", 1)[1].rstrip("/"),
                                                         detail=False))
    assert listed == names
    assert [r for s in shards for r in tfl.TFRecordReader(s.path, storage_options=options)] == [
        tfl.encode_example({"id": k}) for k in range(2)] and backend.name == tfl.implementation


def test_a_prefix_in_a_missing_bucket_creates_no_bucket(backend, s3):
    """on_write_start ran s3fs's makedirs on the prefix's directory, which creates a missing
    bucket: a typo in the bucket's name made a new bucket (and under us-east-1 failed with
    'The specified location-constraint is not valid'). Object stores get no directories
    made; the write fails naming the missing bucket."""
    options = {**s3.storage_options, "client_kwargs": {**s3.storage_options["client_kwargs"],
                                                       "region_name": "eu-west-1"}}
    sink = TFRecordDatasink("s3://no-such-bucket-4b1e/out/part", storage_options=options)
    sink.on_write_start(pa.schema([("id", pa.int64())]))
    s3.fs.invalidate_cache()
    assert not s3.fs.exists("no-such-bucket-4b1e")
    with pytest.raises(FileNotFoundError, match=r"no such bucket.*\(write task 0\)") as info:
        sink.write([pa.table({"id": [1]})], type("Ctx", (), {"task_idx": 0}))
    assert info.value.filename == sink.prefix  # not the hidden staging name
    assert backend.name == tfl.implementation


def test_memory_urls_are_refused_before_ray_runs_anything(backend, memfs):
    """memory:// lives in one process: write_tfrecords had every worker write its shard into
    its own memory, then failed at the commit ('No such file: /out/.part-<id>-00000.tfrecord'),
    and read_tfrecords failed in each read task. Both refuse it up front."""
    from tfrecord_lite.ray import read_tfrecords, write_tfrecords

    url = memfs.url("a.tfrecord")
    with tfl.TFRecordWriter(url) as w:
        w.write(tfl.encode_example({"id": 1}))
    for call in (lambda: read_tfrecords(url), lambda: read_tfrecords([url], raw=True),
                 lambda: read_tfrecords("simplecache::" + url), lambda: write_tfrecords(None, memfs.url("out/part"))):
        with pytest.raises(tfl.InvalidArgumentError, match="memory:// is in-process storage") as info:
            call()
        assert "shared file system" in info.value.hint
    assert memfs.fs.ls(memfs.prefix, detail=False) == [memfs.prefix + "/a.tfrecord"]
    assert backend.name == tfl.implementation


def test_local_urls_are_read_and_written_on_the_drivers_node(backend, tmp_path):
    """local:// is Ray's name for files on the driver's own disk, which its file datasources
    read and write there only; here it was a path like any other, so on a cluster of several
    nodes the tasks ran where the files are not."""
    from tfrecord_lite.ray import TFRecordDatasource

    path = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write(tfl.encode_example({"id": 1}))
    assert not TFRecordDatasource("local://" + path).supports_distributed_reads
    assert not TFRecordDatasource(["local://" + path]).supports_distributed_reads
    assert TFRecordDatasource(path).supports_distributed_reads
    assert not TFRecordDatasink("local://" + str(tmp_path / "part")).supports_distributed_writes
    assert TFRecordDatasink(str(tmp_path / "part")).supports_distributed_writes and backend.name == tfl.implementation


def test_planning_reads_each_remote_files_first_bytes_in_one_ranged_request(backend, s3, monkeypatch):
    """Detecting each file's compression opened a stream, which on S3 is one GET of the
    whole object, dropped after 12 bytes: for many large files, most of each file's bytes
    were sent for nothing. One ranged read of the first bytes each now; only the sample's
    file is streamed."""
    from tfrecord_lite import fs as tfs
    from tfrecord_lite.ray import TFRecordDatasource

    records = [tfl.encode_example({"id": i}) for i in range(1100)]  # the sample stops in the first file
    urls = [s3.url(f"{k}.tfrecord") for k in range(3)]
    for url in urls[:2]:
        with tfl.TFRecordWriter(url, storage_options=s3.storage_options) as w:
            w.write_many(records)
    with tfl.TFRecordWriter(urls[2], "gzip", storage_options=s3.storage_options) as w:
        w.write_many(records)
    urls.append(s3.put("3.tfrecord", b""))  # no bytes to detect: no ranged read either
    opened, real = [], tfs.open_input
    monkeypatch.setattr(tfs, "open_input", lambda path, *a, **k: opened.append(path) or real(path, *a, **k))
    source = TFRecordDatasource(urls, raw=True, storage_options=s3.storage_options)
    assert opened == urls[:1] and [c for _, _, c, _ in source._files] == [None, None, "gzip", None]
    assert sum(b.num_rows for t in source.get_read_tasks(4) for b in t()) == 3300 and backend.name == tfl.implementation
