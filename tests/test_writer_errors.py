"""TFRecordWriter: failures on the way (a file or sidecar that fails, records that are not
bytes, a writer called back by its own thread) and TensorFlow's compression options."""

import errno
import io
import os
import re
import threading

import numpy as np
import pytest

from tfrecord_lite import InvalidArgumentError, TFRecordError, TFRecordReader, TFRecordWriter
from tfrecord_lite.io import NamedWriter


def test_a_failed_sidecar_write_is_never_committed(backend, tmp_path, monkeypatch):
    """The sidecar took part of its lines and then failed (a full disk): the core hands the
    lines again on its next drain, so a caller who caught the error and closed committed a
    sidecar with lines twice, which does not describe the file. close() now raises and
    leaves neither file."""
    path = tmp_path / "a.tfrecord"
    write = NamedWriter.write
    failures = [1]

    def flaky(self, data):
        if failures and self._name().endswith(".index"):
            failures.pop()
            write(self, bytes(data)[: len(data) // 2])
            self.flush()
            raise OSError(28, "No space left on device")
        return write(self, data)

    monkeypatch.setattr(NamedWriter, "write", flaky)
    w = TFRecordWriter(path, index=True)
    w.write_many([b"x" * 10] * 10)
    with pytest.raises(OSError, match="No space left"):
        w.flush()
    w.write(b"y")
    with pytest.raises(TFRecordError, match=r"a\.tfrecord.*an earlier write to the file failed \(OSError:"):
        w.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compression_level(backend, tmp_path, compression):
    """compression_level had no equivalent of TFRecordOptions(compression_level=...). A numpy
    integer (a level read from a config array) is a level too."""
    records = [b"abc" * 1000] * 20
    sizes = {}
    for level in (0, 1, np.int64(9), None):
        path = tmp_path / f"{level}.tfrecord"
        with TFRecordWriter(path, compression, compression_level=level) as w:
            w.write_many(records)
        assert list(TFRecordReader(path)) == records
        sizes[level] = path.stat().st_size
    assert sizes[0] > sum(map(len, records)) > sizes[1] > sizes[np.int64(9)] and sizes[None] <= sizes[1]


@pytest.mark.parametrize("level", [10, -2, True, "9", 1.0, np.int8(10)])
def test_a_level_deflate_cannot_take_is_refused_up_front(backend, tmp_path, level):
    """TensorFlow's writer aborts the process on one; here nothing is created."""
    with pytest.raises(InvalidArgumentError, match=rf"a\.tfrecord: compression_level={re.escape(repr(level))} is "
                       r"not a deflate level\. Use an int from 0 \(no compression\) to 9"):
        TFRecordWriter(tmp_path / "a.tfrecord", "gzip", compression_level=level)
    assert os.listdir(tmp_path) == []


class _PartialThenFailing(io.RawIOBase):
    """A raw stream that takes part of the first write, fails the next one, then takes all."""

    def __init__(self):
        self.calls = 0

    def writable(self):
        return True

    def write(self, data):
        self.calls += 1
        if self.calls == 1:
            return 10
        if self.calls == 2:
            raise BrokenPipeError(32, "Broken pipe")
        return len(data)


def test_a_write_after_a_failed_one_is_not_called_not_a_record(backend):
    """The failed write's traceback kept a view of the writer's buffer, so every later record
    was refused as not bytes-like ("Existing exports of data"). It is taken now; close()
    raises the failure."""
    w = TFRecordWriter(_PartialThenFailing())
    with pytest.raises(BrokenPipeError):
        w.write(b"a" * 2_000_000)
    w.write(b"b")
    w.write_many([b"c", bytearray(b"d")])
    assert w.records_written == 4
    with pytest.raises(TFRecordError, match=r"an earlier write to the file failed \(BrokenPipeError"):
        w.close()


def test_a_write_after_a_failed_sidecar_write_is_not_called_not_a_record(backend, tmp_path, monkeypatch):
    write = NamedWriter.write
    failures = [1]

    def flaky(self, data):
        if failures and self._name().endswith(".index"):
            view = memoryview(data)  # as a partial write's retry holds one  # noqa: F841
            failures.pop()
            raise OSError(28, "No space left on device")
        return write(self, data)

    monkeypatch.setattr(NamedWriter, "write", flaky)
    w = TFRecordWriter(tmp_path / "a.tfrecord", index=True)
    w.write(b"x")
    with pytest.raises(OSError, match="No space left"):
        w.flush()
    w.write(b"y")
    assert w.records_written == 2
    with pytest.raises(TFRecordError, match="an earlier write to the file failed"):
        w.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("options", [{}, {"compression": "gzip"}, {"index": True}])
def test_an_exception_inside_with_is_not_hidden_by_a_full_disk(backend, tmp_path, monkeypatch, options):
    """Discarding the temporary files wrote out their buffered bytes first: on a full disk that
    raised ENOSPC in place of the caller's exception and left the temporary files behind."""
    def full(self):
        raise OSError(28, "No space left on device", self._name())

    monkeypatch.setattr(NamedWriter, "flush", full)
    with pytest.raises(ValueError, match="the caller's"):
        with TFRecordWriter(tmp_path / "a.tfrecord", **options) as w:
            w.write(b"x")
            raise ValueError("the caller's")
    assert os.listdir(tmp_path) == []


class _Message:
    def SerializeToString(self):
        return b""


@pytest.mark.parametrize("record, fix", [
    ("text", r"encode a str first: record\.encode\(\)"),
    (_Message(), r"serialize a protobuf message first: record\.SerializeToString\(\)"),
    ({"a": [1]}, r"encode a dict of features first: tfrecord_lite\.encode_example\(record\)"),
    (np.arange(8, dtype=np.uint8)[::2], r"copy a strided array first: numpy\.ascontiguousarray\(record\)"),
])
def test_a_record_that_is_not_bytes_says_how_to_make_it_bytes(backend, record, fix):
    """The usual mistakes (a str, which TensorFlow's writer takes as its UTF-8; a
    tf.train.Example itself; a dict of features; a strided array) said only 'records must be
    bytes-like'."""
    w = TFRecordWriter(io.BytesIO())
    with pytest.raises(TFRecordError, match=r"record 0: cannot write a \w+ as a record \(.*\)\. Records must be "
                       r"bytes-like \(.*\); " + fix):
        w.write(record)
    with pytest.raises(TFRecordError, match=r"record 1: .*" + fix):
        w.write_many([b"ok", record])


@pytest.mark.parametrize("again", ["write", "flush", "close"])
def test_a_writer_called_again_by_its_writing_thread_raises_instead_of_hanging(backend, again):
    """A write_many iterable (or a signal handler) that calls the writer back deadlocked on
    its lock, held by the same thread."""
    out = io.BytesIO()
    w = TFRecordWriter(out)
    got = []

    def records():
        yield b"a"
        getattr(w, again)(*([b"b"] if again == "write" else []))
        yield b"c"

    def run():
        try:
            w.write_many(records())
        except TFRecordError as exc:
            got.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive(), "deadlocked"
    assert len(got) == 1 and "called again by the thread that is writing with it" in str(got[0])
    w.write(b"d")  # the lock was let go
    w.close()
    assert list(TFRecordReader(io.BytesIO(out.getvalue()))) == [b"a", b"d"]


@pytest.mark.parametrize("options", [{}, {"index": True}, {"atomic": False}])
def test_writing_through_a_symlink_removes_the_targets_old_sidecar(backend, tmp_path, options):
    """The data went to the link's target, but only link + '.index' was removed: the target's
    own sidecar stayed beside it, describing records it no longer holds."""
    target, link = tmp_path / "t.tfrecord", tmp_path / "link.tfrecord"
    with TFRecordWriter(target, index=True) as w:
        w.write_many([b"a" * 4, b"b" * 8, b"c" * 4])
    link.symlink_to(target)
    with TFRecordWriter(link, **options) as w:
        w.write_many([b"N" * 8, b"M" * 4, b"c" * 4])
    assert not os.path.exists(str(target) + ".index")
    assert list(TFRecordReader(target)) == [b"N" * 8, b"M" * 4, b"c" * 4]
    assert sorted(os.listdir(tmp_path)) == ["link.tfrecord"] + ["link.tfrecord.index"] * ("index" in options) + [
        "t.tfrecord"]


def _old_pair(tmp_path):
    path = tmp_path / "a.tfrecord"
    with TFRecordWriter(path, index=True) as w:
        w.write_many([b"old"] * 3)
    return path, (path.read_bytes(), (tmp_path / "a.tfrecord.index").read_bytes())


def test_a_file_that_cannot_be_kept_aside_is_not_replaced(backend, tmp_path, monkeypatch):
    """The copy of the file a commit replaces (put back if the commit fails) could not be
    made: the failure was ignored and the file replaced anyway, so a commit failing next
    lost it for good. close() now raises naming the file, before anything is replaced."""
    path, old = _old_pair(tmp_path)

    def no_link(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", no_link)
    w = TFRecordWriter(path, index=True)
    w.write(b"new")
    with pytest.raises(TFRecordError, match=r"a\.tfrecord: the existing file could not be copied aside "
                       r"\(OSError: .*No space left.*\), so nothing was replaced.*Free space"):
        w.close()
    assert (path.read_bytes(), (tmp_path / "a.tfrecord.index").read_bytes()) == old
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "a.tfrecord.index"]


def test_a_failed_commit_puts_back_a_file_on_a_disk_without_hard_links(backend, tmp_path, monkeypatch):
    """Where hard links are refused (FAT, some network filesystems) nothing was kept: the
    sidecar failing after the data was renamed removed the new data and left no old file.
    The file is copied aside instead, and put back."""
    from tfrecord_lite.io import AtomicFile

    path, old = _old_pair(tmp_path)

    def no_link(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    commit = AtomicFile.commit

    def failing_sidecar(self):
        if self.path.endswith(".index"):
            self.discard()
            raise OSError(errno.EIO, "Input/output error", self.path)
        commit(self)

    monkeypatch.setattr(os, "link", no_link)
    monkeypatch.setattr(AtomicFile, "commit", failing_sidecar)
    w = TFRecordWriter(path, index=True)
    w.write(b"new")
    with pytest.raises(OSError, match="Input/output error"):
        w.close()
    assert (path.read_bytes(), (tmp_path / "a.tfrecord.index").read_bytes()) == old
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "a.tfrecord.index"]


def test_a_remote_file_that_cannot_be_copied_aside_is_not_replaced(backend, memfs, monkeypatch):
    """The same for a URL: a server-side copy that failed kept nothing, and the file was
    replaced all the same."""
    url = memfs.url("a.tfrecord")
    with TFRecordWriter(url) as w:
        w.write(b"old")
    old = memfs.fs.cat_file(f"{memfs.prefix}/a.tfrecord")

    cp_file = memfs.fs.cp_file

    def no_copy_of_old(path1, path2, **kwargs):
        if path1.endswith("/a.tfrecord"):
            raise OSError(errno.EIO, "Input/output error")
        return cp_file(path1, path2, **kwargs)

    monkeypatch.setattr(memfs.fs, "cp_file", no_copy_of_old)
    w = TFRecordWriter(url)
    w.write(b"new")
    with pytest.raises(TFRecordError, match=r"a\.tfrecord: the existing file could not be copied aside"):
        w.close()
    assert memfs.fs.cat_file(f"{memfs.prefix}/a.tfrecord") == old
    assert [os.path.basename(p) for p in memfs.fs.ls(memfs.prefix, detail=False)] == ["a.tfrecord"]


def test_a_previous_file_that_cannot_be_put_back_says_where_it_is(backend, tmp_path, monkeypatch):
    """A failed commit that could not put the replaced file back said nothing: the file
    lived on under a hidden name that nobody was told. A warning now names it."""
    from tfrecord_lite.io import AtomicFile

    path, old = _old_pair(tmp_path)
    commit, replace = AtomicFile.commit, os.replace

    def failing_sidecar(self):
        if self.path.endswith(".index"):
            self.discard()
            raise OSError(errno.EIO, "Input/output error", self.path)
        commit(self)

    def no_put_back(src, dst):
        if str(src).endswith(".old"):
            raise OSError(errno.EIO, "Input/output error", src)
        replace(src, dst)

    monkeypatch.setattr(AtomicFile, "commit", failing_sidecar)
    monkeypatch.setattr(os, "replace", no_put_back)
    w = TFRecordWriter(path, index=True)
    w.write(b"new")
    with pytest.warns(RuntimeWarning, match=r"a\.tfrecord(\.index)?: the failed write could not put the previous file "
                      r"back .*; it is kept as (\S+\.old): rename it to") as warned:
        with pytest.raises(OSError, match="Input/output error"):
            w.close()
    kept = {str(m.message).partition("kept as ")[2].partition(":")[0] for m in warned}
    assert sorted(open(k, "rb").read() for k in kept) == sorted(old)
