"""Output paths: every writer creates missing parent directories, no error names the
hidden temporary file a write goes through (only the path the user gave), and a device or a
pipe is written into, never replaced."""

import os
import stat

import pytest

import tfrecord_lite as tfl
from tfrecord_lite.cli import main


def _records(n=5):
    return [f"record {i}".encode() for i in range(n)]


def _files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("atomic", [True, False])
def test_writer_creates_missing_directories(backend, tmp_path, atomic):
    path = tmp_path / "a" / "b" / "c.tfrecord"
    with tfl.TFRecordWriter(path, atomic=atomic, index=True) as w:
        w.write_many(_records())
    assert list(tfl.TFRecordReader(path)) == _records()
    assert _files_under(tmp_path) == ["a/b/c.tfrecord", "a/b/c.tfrecord.index"]


def test_sharded_writer_and_write_parallel_create_missing_directories(backend, tmp_path):
    with tfl.ShardedWriter(tmp_path / "rolled" / "log", max_records_per_shard=2) as w:
        w.write_many(_records())
    with tfl.ShardedWriter(tmp_path / "fixed" / "deep" / "log", num_shards=2) as w:
        w.write_many(_records())
    shards = tfl.write_parallel(_records(), bytes, tmp_path / "par" / "train", num_shards=2, num_workers=2,
                                chunk_size=1)
    assert [os.path.relpath(s.path, tmp_path) for s in shards] == [
        "par/train-00000-of-00002.tfrecord", "par/train-00001-of-00002.tfrecord"]
    assert _files_under(tmp_path) == sorted(
        [f"rolled/log-0000{i}-of-00003.tfrecord" for i in range(3)]
        + [f"fixed/deep/log-0000{i}-of-00002.tfrecord" for i in range(2)]
        + [f"par/train-0000{i}-of-00002.tfrecord" for i in range(2)])
    for prefix, n in (("rolled/log", 3), ("fixed/deep/log", 2), ("par/train", 2)):
        files = [tmp_path / f"{prefix}-0000{i}-of-0000{n}.tfrecord" for i in range(n)]
        assert sorted(r for f in files for r in tfl.TFRecordReader(f)) == sorted(_records())


def test_merge_split_index_and_cli_create_missing_directories(backend, tmp_path, capfd):
    src = tmp_path / "in.tfrecord"
    with tfl.TFRecordWriter(src) as w:
        w.write_many(_records())
    assert tfl.merge([src], tmp_path / "m" / "all.tfrecord", verify=True).records == 5
    assert [s.records for s in tfl.split(src, 2, tmp_path / "s" / "part")] == [3, 2]
    assert tfl.build_index(src, tmp_path / "idx" / "in.index") == str(tmp_path / "idx" / "in.index")
    assert main(["merge", str(src), "-o", str(tmp_path / "cm" / "all.tfrecord.gz"), "--compression", "gzip"]) == 0
    assert main(["split", str(src), "-n", "2", "--prefix", str(tmp_path / "cs" / "p")]) == 0
    assert main(["cat", str(src), "-o", str(tmp_path / "cc" / "x.tfrecord")]) == 0
    for out in ("m/all.tfrecord", "cm/all.tfrecord.gz", "cc/x.tfrecord"):
        assert list(tfl.TFRecordReader(tmp_path / out)) == _records(), out
    for prefix in ("s/part", "cs/p"):
        parts = [tfl.TFRecordReader(tmp_path / f"{prefix}-0000{i}-of-00002.tfrecord") for i in range(2)]
        assert [r for p in parts for r in p] == _records()
    assert len(open(tmp_path / "idx" / "in.index").read().splitlines()) == 5


def _no_temp_name(text):
    assert ".tmp" not in text and "/." not in text, text


def test_errors_name_the_users_path_never_the_temporary_file(backend, tmp_path, capfd):
    (tmp_path / "afile").write_bytes(b"")
    under_file = tmp_path / "afile" / "sub" / "x.tfrecord"
    for atomic in (True, False):  # not atomic, the stale sidecar's removal named the sidecar
        with pytest.raises(NotADirectoryError) as info:
            tfl.TFRecordWriter(under_file, atomic=atomic)
        assert info.value.filename == str(under_file)
        assert f"{tmp_path / 'afile'} is a file, not a directory" in str(info.value)

    # The final name is taken by a directory: refused before anything is written.
    (tmp_path / "taken.tfrecord").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        tfl.TFRecordWriter(tmp_path / "taken.tfrecord")
    assert info.value.filename == str(tmp_path / "taken.tfrecord")
    _no_temp_name(str(info.value))

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train-00001-of-00002.tfrecord").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        tfl.write_parallel(_records(), bytes, tmp_path / "out" / "train", num_shards=2, num_workers=1)
    assert info.value.filename == str(tmp_path / "out" / "train-00001-of-00002.tfrecord")
    _no_temp_name(str(info.value))
    with pytest.raises(IsADirectoryError) as info:
        with tfl.ShardedWriter(tmp_path / "out" / "train", num_shards=2) as sw:
            sw.write_many(_records())
    _no_temp_name(str(info.value))

    src = tmp_path / "in.tfrecord"
    with tfl.TFRecordWriter(src) as w:
        w.write_many(_records())
    for argv in (["merge", str(src), "-o", str(tmp_path / "taken.tfrecord")],
                 ["merge", str(src), "-o", str(under_file)],
                 ["split", str(src), "-n", "2", "--prefix", str(tmp_path / "out" / "train")],
                 ["cat", str(src), "-o", str(tmp_path / "taken.tfrecord")]):
        assert main(argv) == 1
        err = capfd.readouterr().err
        _no_temp_name(err)
        assert str(tmp_path) in err, err
    # Nothing was left behind: no temporary files, no shard under its final name.
    leftovers = [f for f in _files_under(tmp_path) if f != "in.tfrecord" and f != "afile"]
    assert leftovers == []


@pytest.mark.parametrize("atomic", [True, False])
def test_an_output_that_names_a_directory_is_refused_up_front(backend, tmp_path, atomic, monkeypatch, capfd):
    """An existing directory, '.', or a name ending with a separator is refused when the
    writer opens, naming the path and asking for a file name, before any data is written."""
    (tmp_path / "outdir").mkdir()
    monkeypatch.chdir(tmp_path)
    says = "names a directory, not a file: give the output a file name"
    for out in ("outdir", "outdir/", ".", "newdir/", str(tmp_path / "outdir")):
        with pytest.raises(IsADirectoryError, match=says) as info:
            tfl.TFRecordWriter(out, atomic=atomic)
        assert info.value.filename == out
    assert _files_under(tmp_path) == [] and os.listdir(tmp_path) == ["outdir"]
    src = tmp_path / "in.tfrecord"
    with tfl.TFRecordWriter(src) as w:
        w.write_many(_records())
    for out in ("outdir/", ".", "newdir/"):
        for command in ("merge", "cat"):
            assert main([command, str(src), "-o", out]) == 1
            err = capfd.readouterr().err
            assert err == f"tfrecord-lite {command}: {out}: {says}, such as {os.path.join(out, 'out.tfrecord')}\n"
    assert _files_under(tmp_path) == ["in.tfrecord"] and sorted(os.listdir(tmp_path)) == ["in.tfrecord", "outdir"]


def _drain(fifo):
    """Read a FIFO to its end in a thread: (thread, chunks)."""
    import threading

    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    return reader, got


@pytest.mark.parametrize("argv", [None, ["cat", "{src}", "-o", "{out}"], ["merge", "{src}", "-o", "{out}", "--compression", "gzip"],
                                  ["to-parquet", "{src}", "-o", "{out}"]])
def test_an_output_that_is_a_pipe_or_a_device_is_written_into_not_replaced(backend, tmp_path, argv):
    # An atomic write renamed its temporary file over the name: `tfrecord-lite cat x -o /dev/null`
    # run as root replaced /dev/null with a regular file, and a named pipe got no data.
    src = str(tmp_path / "src.tfrecord")
    with tfl.TFRecordWriter(src) as w:
        w.write_many(tfl.encode_example({"id": i}) for i in range(3))
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    reader, got = _drain(fifo)
    if argv is None:
        with tfl.TFRecordWriter(fifo) as w:
            w.write(b"abc")
    else:
        assert main([a.format(src=src, out=fifo) for a in argv]) == 0
    reader.join(10)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["fifo", "src.tfrecord"]  # no temporary file left
    if argv is None:
        assert list(tfl.TFRecordReader(got[0])) == [b"abc"]
    elif argv[0] == "to-parquet":
        assert got[0][:4] == b"PAR1"
    else:
        assert list(tfl.TFRecordReader(got[0])) == list(tfl.TFRecordReader(src))


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664])
def test_a_rewrite_keeps_the_file_permissions(tmp_path, mode):
    """An atomic rewrite replaces the file with a new one: it took the default permissions, so
    a private (0600) file became readable by everyone. It keeps the old file's, as a write
    in place (TensorFlow's) does; a new file gets what open() gives."""
    path = tmp_path / "a.tfrecord"
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write(b"old")
    os.chmod(path, mode)
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write(b"new")
    assert stat.S_IMODE(os.stat(path).st_mode) == mode and list(tfl.TFRecordReader(path)) == [b"new"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(str(path) + ".index").st_mode) == 0o666 & ~mask


def test_split_prefix_ending_in_a_slash_puts_shards_named_after_the_input_there(backend, tmp_path, capfd):
    # `--prefix shards/` named the shards "shards/-00000-of-00002.tfrecord": no name, and a
    # leading dash that commands take for an option.
    src = tmp_path / "train.tfrecord.gz"
    with tfl.TFRecordWriter(src, "gzip") as w:
        w.write_many(_records())
    shards = tfl.split(src, 2, str(tmp_path / "api") + os.sep)
    assert [s.path for s in shards] == [str(tmp_path / "api" / f"train-0000{i}-of-00002.tfrecord") for i in range(2)]
    assert main(["split", str(src), "-n", "2", "--prefix", str(tmp_path / "cli") + "/"]) == 0
    assert _files_under(tmp_path / "cli") == [f"train-0000{i}-of-00002.tfrecord" for i in range(2)]
    assert [r for s in shards for r in tfl.TFRecordReader(s)] == _records()
