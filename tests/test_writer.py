"""TFRecordWriter: thread safety, atomic commit (exceptions and SIGKILL), index sidecars."""

import io
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite.writer as writer_module
from tfrecord_lite.io import NamedWriter
from tfrecord_lite import TFRecordError, TFRecordFile, TFRecordReader, TFRecordWriter, merge, split
from tfrecord_lite.index import build_index, read_index, scan_index
from tfrecord_lite.sharded import ShardedWriter, write_parallel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record(thread, seq, rng):
    # Unique, self-describing, sizes spread across the flush threshold's granularity.
    return f"{thread}:{seq}:".encode() + bytes([thread]) * rng.randrange(0, 3000)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_threads_share_one_writer(backend, tmp_path, compression):
    n_threads, per_thread = 8, 400
    path = tmp_path / "shared.tfrecord"
    expected = {}
    with TFRecordWriter(path, compression) as w:
        barrier = threading.Barrier(n_threads)

        def work(t):
            rng = random.Random(t)
            records = [_record(t, s, rng) for s in range(per_thread)]
            expected[t] = records
            barrier.wait()
            i = 0
            while i < per_thread:  # mix single writes and batches
                if rng.random() < 0.5:
                    w.write(records[i])
                    i += 1
                else:
                    k = rng.randrange(1, 20)
                    w.write_many(records[i:i + k])
                    i += k

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert w.records_written == n_threads * per_thread
    got = list(TFRecordReader(path))  # every frame whole: all CRCs verify
    assert len(got) == n_threads * per_thread
    for t in range(n_threads):
        mine = [r for r in got if r.startswith(f"{t}:".encode())]
        assert mine == expected[t]  # none lost, none torn, each thread's order kept


def test_write_many_is_contiguous_under_threads(backend, tmp_path):
    path = tmp_path / "batches.tfrecord"
    with TFRecordWriter(path) as w:
        def work(t):
            for b in range(50):
                w.write_many([f"{t}:{b}:{j}".encode() for j in range(30)])

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    got = list(TFRecordReader(path))
    for start in range(0, len(got), 30):
        batch = {r.rsplit(b":", 1)[0] for r in got[start:start + 30]}
        assert len(batch) == 1


def test_exception_removes_temp_file_and_keeps_old_file(backend, tmp_path):
    path = tmp_path / "data.tfrecord"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with TFRecordWriter(path) as w:
            w.write(b"new")
            w.flush()
            assert len(os.listdir(tmp_path)) == 2  # the temporary file exists while writing
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == ["data.tfrecord"]
    assert path.read_bytes() == b"old"


def test_abort_and_close(backend, tmp_path):
    path = tmp_path / "a.tfrecord"
    w = TFRecordWriter(path)
    w.write(b"x")
    w.abort()
    assert os.listdir(tmp_path) == []
    with pytest.raises(TFRecordError, match="closed") as info:
        w.write(b"y")
    # The hint does not claim that close() committed the file: abort() discarded it.
    assert "or discarded (by abort()" in str(info.value) and "already committed" not in str(info.value)
    with TFRecordWriter(path, index=True) as w:
        w.write(b"x")
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "a.tfrecord.index"]
    assert list(TFRecordReader(path)) == [b"x"]


def test_bad_record_is_named(backend, tmp_path):
    path = tmp_path / "a.tfrecord"
    with TFRecordWriter(path) as w:
        w.write_many([b"a", b"b"])
        with pytest.raises(TFRecordError, match=r"record 3: cannot write a int"):
            w.write_many([b"c", 7, b"d"])
        with pytest.raises(TFRecordError, match=r"record 3: cannot write a str"):
            w.write("text")
    assert list(TFRecordReader(path)) == [b"a", b"b", b"c"]


_KILLED_WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from tfrecord_lite import TFRecordWriter
    w = TFRecordWriter({path!r}, {compression!r}, index={index!r})
    i = 0
    while True:
        w.write(b"r" * 1000 + str(i).encode())
        i += 1
        if i % 2000 == 0:
            w.flush()
            if i == 4000:
                print("written", flush=True)
""")


@pytest.mark.parametrize("compression,index", [(None, True), ("gzip", False)])
def test_sigkill_leaves_nothing_under_final_name(tmp_path, compression, index):
    """A writer killed mid-way leaves at most its hidden temporary file, never a partial file
    (or sidecar) under the final name; an older file there stays intact."""
    path = tmp_path / "data.tfrecord"
    script = _KILLED_WRITER.format(root=ROOT, path=str(path), compression=compression, index=index)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"written\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    names = os.listdir(tmp_path)
    assert "data.tfrecord" not in names and "data.tfrecord.index" not in names
    assert names and all(n.startswith(".data.tfrecord.") and n.endswith(".tmp") for n in names)


def test_sigkill_keeps_previous_version(tmp_path):
    path = tmp_path / "data.tfrecord"
    with TFRecordWriter(path) as w:
        w.write(b"previous")
    before = path.read_bytes()
    script = _KILLED_WRITER.format(root=ROOT, path=str(path), compression=None, index=False)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"written\n"
    finally:
        proc.kill()
        proc.wait()
    assert path.read_bytes() == before


def test_index_while_writing_equals_build_index(backend, tmp_path):
    rng = random.Random(0)
    records = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))) for _ in range(500)]
    path = tmp_path / "a.tfrecord"
    with TFRecordWriter(path, index=True) as w:
        w.write_many(records[:200])
        for r in records[200:300]:
            w.write(r)
        w.flush()
        w.write_many(iter(records[300:]))
    written = (tmp_path / "a.tfrecord.index").read_bytes()
    rebuilt = build_index(path, tmp_path / "rebuilt.index")
    assert written == open(rebuilt, "rb").read()
    offsets, lengths = read_index(tmp_path / "a.tfrecord.index")
    assert (offsets == scan_index(path)[0]).all() and len(lengths) == 500


def test_index_replaces_stale_sidecar(backend, tmp_path):
    path = tmp_path / "a.tfrecord"
    (tmp_path / "a.tfrecord.index").write_text("0 99\n")
    with TFRecordWriter(path, index=True) as w:
        w.write(b"abc")
    assert (tmp_path / "a.tfrecord.index").read_text() == "0 19\n"
    with pytest.raises(RuntimeError):
        with TFRecordWriter(tmp_path / "b.tfrecord", index=True) as w:
            w.write(b"abc")
            raise RuntimeError
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "a.tfrecord.index"]


def test_index_errors_and_file_objects(backend, tmp_path):
    with pytest.raises(TFRecordError, match="uncompressed"):
        TFRecordWriter(tmp_path / "a.tfrecord.gz", "gzip", index=True)
    assert os.listdir(tmp_path) == []
    with open(tmp_path / "f.tfrecord", "wb") as f:
        with pytest.raises(TFRecordError, match="index="):
            TFRecordWriter(f, index=True)
        with TFRecordWriter(f, index=tmp_path / "f.idx") as w:
            w.write_many([b"a", b"bb"])
    assert (tmp_path / "f.idx").read_text() == "0 17\n17 18\n"


def test_writer_collected_unclosed_discards_and_its_write_fails(backend, tmp_path):
    # The per-record path (the core's FrameBuffer) holds no reference to the writer: dropping
    # the last one discards the temporary file at once, and a write() kept past it raises.
    import gc

    w = TFRecordWriter(tmp_path / "a.tfrecord")
    write = w.write
    write(b"x" * 100)
    with pytest.warns(ResourceWarning, match="never closed"):
        del w
    assert os.listdir(tmp_path) == []
    gc.collect()
    with pytest.raises(TFRecordError, match="write to a closed TFRecordWriter"):
        write(b"y")


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_writer_collected_unclosed_and_not_atomic_writes_out_its_records(backend, tmp_path, compression):
    """A non-atomic file already holds what was drained under its own name; the records
    still buffered (all of them here) are written out, not dropped, and a compressed
    stream is finished. A file object gets them too, and stays open."""
    records = [b"a" * 100, b"", b"b" * 7]
    path = tmp_path / "a.tfrecord"
    stream = io.BytesIO()
    for target, options in ((path, {"atomic": False}), (stream, {})):
        w = TFRecordWriter(target, compression, **options)
        w.write_many(records)
        write = w.write
        with pytest.warns(ResourceWarning, match="never closed, so its last records were written out"):
            del w
        with pytest.raises(TFRecordError, match="write to a closed TFRecordWriter"):
            write(b"y")
    assert list(TFRecordReader(path, compression=compression)) == records
    assert not stream.closed and list(TFRecordReader(io.BytesIO(stream.getvalue()), compression=compression)) == records


def test_write_drains_to_the_file_past_the_flush_size(backend, tmp_path):
    # Records that cross the flush size reach the file during write(), whole and in order.
    path = tmp_path / "a.tfrecord"
    records = [bytes([i]) * (100 + 137 * i) for i in range(200)]
    assert sum(map(len, records)) > 2 * writer_module.FLUSH_BYTES
    with open(path, "wb") as f:
        w = TFRecordWriter(f)
        for r in records:
            w.write(r)
        on_disk = f.tell()
        assert on_disk > writer_module.FLUSH_BYTES and len(w._buf) < writer_module.FLUSH_BYTES
        assert on_disk + len(w._buf) == w.bytes_written == sum(len(r) + 16 for r in records)
        assert w.records_written == 200
        w.close()
    assert list(TFRecordReader(path)) == records


# -- FrameBuffer: frames and index lines made together, drained to its sinks ----------------

def _lines(records, start=0):
    out = []
    for r in records:
        out.append(f"{start} {len(r) + 16}\n")
        start += len(r) + 16
    return "".join(out).encode()


@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.binary(max_size=300), max_size=30), flush=st.integers(1, 2000),
       split_at=st.integers(0, 30))
def test_frame_buffer_frames_and_indexes_as_it_appends(backend, records, flush, split_at):
    F = backend.framing
    data, lines = bytearray(), bytearray()
    fb = F.FrameBuffer(data.extend, flush, "out.tfrecord", lines.extend)
    head, tail = records[:split_at], records[split_at:]
    for r in head:
        fb.write(r)
    with fb:
        fb.write_frames(F.encode_frames(tail[:len(tail) // 2]), np.array([len(r) for r in tail[:len(tail) // 2]]))
        fb.write_frames(F.encode_frames(tail[len(tail) // 2:]))  # no lengths: read from the headers
        assert len(fb.buf) < flush or not fb.buf  # drained as soon as it reached flush_bytes
        fb.drain()
    assert bytes(data) == bytes(F.encode_frames(records))
    assert bytes(lines) == _lines(records)
    assert fb.records == len(records) and fb.drained == len(data) and not fb.buf


class _Trickle(io.RawIOBase):
    """A raw file that takes at most `most` bytes a call (io's contract: it says how many),
    and none from call `stall` on."""

    def __init__(self, most, stall=None):
        self.data, self.most, self.stall, self.calls = bytearray(), most, stall, 0

    def writable(self):
        return True

    def write(self, b):
        self.calls += 1
        if self.stall is not None and self.calls >= self.stall:
            return 0
        taken = bytes(b)[:self.most]
        self.data += taken
        return len(taken)


@settings(max_examples=30, deadline=None)
@given(records=st.lists(st.binary(max_size=300), min_size=1, max_size=30), most=st.integers(1, 700),
       flush=st.integers(1, 2000), compression=st.sampled_from([None, "gzip", "zlib"]))
def test_a_short_writing_file_gets_the_rest(backend, records, most, flush, compression):
    """A raw file may take only part of a write: the rest is written after it, from the
    buffer, from frames written as they are and from the compressor (whose output a short
    write once lost, leaving a broken stream)."""
    out = _Trickle(most)
    half = len(records) // 2
    with mock.patch.object(writer_module, "FLUSH_BYTES", flush), TFRecordWriter(out, compression) as w:
        for r in records[:half]:
            w.write(r)
        w.flush()
        w._write_frames(backend.framing.encode_frames(records[half:]))  # as merge and split do
    assert list(TFRecordReader(io.BytesIO(bytes(out.data)), compression=compression)) == records


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("stall", [1, 3])
def test_a_file_that_stops_taking_bytes_is_never_committed(backend, compression, stall):
    """A write the file takes none of (after part of it, or at once) fails naming the writer,
    and the writer refuses to finish the file: it misses data (a compressed one was finished
    as if whole)."""
    out = _Trickle(1000, stall)
    out.name = "out.tfrecord"
    w = TFRecordWriter(out, compression)
    with pytest.raises(OSError, match="out.tfrecord: the output took none of the last"):
        for i in range(5000):
            w.write(os.urandom(300))
    with pytest.raises(TFRecordError, match="an earlier write to the file failed .*it is not committed"):
        w.close()


def test_frame_buffer_hands_large_frames_to_the_sink_as_they_are(backend):
    """Frames worth a write of their own (half of flush_bytes or more) go to the sink as
    given, after what the buffer held, not copied into the buffer first; smaller ones are
    buffered."""
    F = backend.framing
    calls = []
    fb = F.FrameBuffer(lambda b: calls.append(b), 1000, "out.tfrecord", bytearray().extend)
    small, large = F.encode_frames([b"a" * 100]), F.encode_frames([b"b" * 300, b"c" * 200])
    fb.write(b"z")
    with fb:
        fb.write_frames(small, np.array([100]))
        assert not calls and len(fb.buf) == 17 + len(small)
        fb.write_frames(large, np.array([300, 200]))
    assert [bytes(c) for c in calls] == [bytes(F.encode_frames([b"z"])) + bytes(small), bytes(large)]
    assert calls[1] is large and not fb.buf and fb.records == 4 and fb.drained == 17 + len(small) + len(large)


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), max_size=40), flush=st.integers(1, 20000),
       compression=st.sampled_from(["gzip", "zlib"]))
def test_framed_batches_and_records_keep_their_order_compressed(backend, tmp_path, sizes, flush, compression):
    """Framed batches (written as they are once large enough, after what the buffer held)
    and single records in between reach a compressed file in order (uncompressed, with its
    index: test_index_written_while_writing_is_build_index's "mixed")."""
    records = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    source = tmp_path / "source.tfrecord"
    with TFRecordWriter(source) as w:
        w.write_many(records)
    path = tmp_path / f"out-{compression}.tfrecord"
    with mock.patch.object(writer_module, "FLUSH_BYTES", flush), TFRecordWriter(path, compression) as w:
        for batch in TFRecordReader(source).record_batches(7):
            w.write_many(batch)
            w.write(b"between")
    assert list(TFRecordReader(path)) == [r for i in range(0, len(records), 7)
                                          for r in records[i:i + 7] + [b"between"]]


def test_frame_buffer_errors_name_the_path_and_record(backend):
    F = backend.framing
    data = bytearray()
    fb = F.FrameBuffer(data.extend, 1 << 20, "out.tfrecord")
    with fb:
        with pytest.raises(TFRecordError) as err:
            fb.write_many([b"a", b"b", 3, b"c"])
    assert (err.value.path, err.value.index) == ("out.tfrecord", 2) and "cannot write a int" in str(err.value)
    assert fb.records == 2 and bytes(fb.buf) == bytes(F.encode_frames([b"a", b"b"]))
    indexed = F.FrameBuffer(data.extend, 1 << 20, "out.tfrecord", bytearray().extend)
    with indexed, pytest.raises(TFRecordError):
        indexed.write_frames(F.encode_frames([b"abcd"]), np.array([3]))  # lengths that do not tile the frames
    assert not indexed.buf and indexed.records == 0
    fb.closed = True
    with pytest.raises(TFRecordError, match="out.tfrecord: write to a closed TFRecordWriter"):
        fb.write(b"x")
    with fb, pytest.raises(TFRecordError, match="closed"):
        fb.write_frames(F.encode_frames([b"x"]), np.array([1]))
    assert data == bytearray() and fb.records == 2


# -- sidecars written while writing are exactly build_index's -------------------------------

def _assert_sidecar_is_build_index(path):
    path = os.fspath(path)
    built = build_index(path, path + ".rebuilt")
    with open(path + ".index", "rb") as a, open(built, "rb") as b:
        assert a.read() == b.read()
    os.remove(built)


sizes_st = st.lists(st.integers(0, 3000), max_size=40)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes_st, flush=st.integers(1, 20000),
       how=st.sampled_from(["write", "write_many", "batch", "framed_batch", "mixed"]))
def test_index_written_while_writing_is_build_index(backend, tmp_path, sizes, flush, how):
    records = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    source = tmp_path / "source.tfrecord"
    with TFRecordWriter(source) as w:
        w.write_many(records)
    path = tmp_path / "a.tfrecord"
    with mock.patch.object(writer_module, "FLUSH_BYTES", flush), TFRecordWriter(path, index=True) as w:
        if how == "write":
            for r in records:
                w.write(r)
        elif how == "write_many":
            w.write_many(iter(records))
        else:  # RecordBatches: framed ones are copied verbatim, the others framed anew
            for batch in TFRecordReader(source, check_crc=how != "batch").record_batches(7):
                w.write_many(batch)
                if how == "mixed":
                    w.write(b"between")
    _assert_sidecar_is_build_index(path)
    expected = records if how in ("write", "write_many") else [
        r for i in range(0, len(records), 7) for r in records[i:i + 7] + ([b"between"] if how == "mixed" else [])]
    assert list(TFRecordReader(path)) == expected


@settings(max_examples=12, deadline=None)
@given(sizes=sizes_st, compression=st.sampled_from([None, "gzip", "zlib"]), shards=st.integers(1, 3),
       flush=st.integers(1, 20000))
def test_index_from_merge_split_and_sharded_writers_is_build_index(backend, tmp_path, sizes, compression, shards,
                                                                   flush):
    records = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    source = tmp_path / f"source-{compression}.tfrecord"
    with TFRecordWriter(source, compression) as w:
        w.write_many(records)
    outputs = []
    with mock.patch.object(writer_module, "FLUSH_BYTES", flush):
        outputs.append(merge([source, source], tmp_path / "merged.tfrecord", index=True).path)
        outputs += [s.path for s in split(source, shards, tmp_path / "split", index=True)]
        with ShardedWriter(tmp_path / "sharded", num_shards=shards, index=True) as w:
            w.write_many(records)
        outputs += [s.path for s in w.shards]
        outputs += [s.path for s in write_parallel(records, bytes, tmp_path / "parallel", shards, index=True,
                                                   chunk_size=5)]
        outputs += [s.path for s in write_parallel(records, list, tmp_path / "batched", shards, index=True,
                                                   chunk_size=5, batched=True)]
    for out in outputs:
        _assert_sidecar_is_build_index(out)
    assert sum(len(list(TFRecordReader(p))) for p in outputs) == len(records) * (2 + 4)


def test_object_arrays_are_refused_not_written_as_pointers(backend, tmp_path):
    """An object array's buffer holds the addresses of its objects, not their bytes."""
    names = np.array([[b"alice"], [b"bob"]], dtype=object)
    path = tmp_path / "a.tfrecord"
    with TFRecordWriter(path) as w:
        w.write(b"before")
        with pytest.raises(TFRecordError, match=r"record 1: cannot write a ndarray as a record \(its buffer "
                           r"holds pointers to Python objects \(format 'O'\).*encode the values to bytes first"):
            w.write(names[0])
        with pytest.raises(TFRecordError, match=r"record 2: .*pointers to Python objects"):
            w.write_many([b"a", names[1], b"b"])
        with pytest.raises(TFRecordError, match=r"record 2: .*pointers to Python objects"):
            w.write_many(names)
    assert list(TFRecordReader(path)) == [b"before", b"a"]


def _fail_renames_to(monkeypatch, target):
    """Make os.replace onto target fail with an I/O error; returns the real os.replace."""
    real = os.replace

    def failing(src, dst, *args, **kwargs):
        if dst == target:
            raise OSError(5, "simulated I/O error")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing)
    return real


def test_failed_sidecar_commit_leaves_neither_file(backend, tmp_path, monkeypatch):
    """close() raising on the sidecar's rename leaves no new data under the name either."""
    path = str(tmp_path / "a.tfrecord")
    _fail_renames_to(monkeypatch, path + ".index")
    with pytest.raises(OSError, match="simulated"):
        with TFRecordWriter(path, index=True) as w:
            w.write(b"new")
    assert os.listdir(tmp_path) == []


def test_failed_sidecar_commit_puts_back_the_old_pair(backend, tmp_path, monkeypatch):
    """The old file was replaced and then removed, and its sidecar removed: nothing was left."""
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path, index=True) as w:
        w.write_many([b"old", b"pair"])
    before = {p: open(p, "rb").read() for p in (path, path + ".index")}
    real = os.replace
    failures = []

    def fail_once(src, dst):  # the new sidecar's rename fails; putting the old one back works
        if dst == path + ".index" and not failures:
            failures.append(dst)
            raise OSError(5, "simulated I/O error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_once)
    with pytest.raises(OSError, match="simulated"):
        with TFRecordWriter(path, index=True) as w:
            w.write(b"new")
    assert {p: open(p, "rb").read() for p in before} == before and sorted(os.listdir(tmp_path)) == [
        "a.tfrecord", "a.tfrecord.index"]


class _Capped:
    """An append-mode file object that refuses to grow past a few MiB (a copy that reads
    back what it appends would otherwise fill the disk)."""

    def __init__(self, path):
        self._f = open(path, "ab")
        self.name = str(path)
        self.written = 0

    def write(self, data):
        self.written += len(data)
        if self.written > 4 << 20:
            raise RuntimeError("the copy kept reading what it appended")
        return self._f.write(data)

    def fileno(self):
        return self._f.fileno()

    def flush(self):
        self._f.flush()


@pytest.mark.parametrize("verify", [False, True])
def test_merge_refuses_an_input_that_is_its_output_file(backend, tmp_path, verify):
    path = tmp_path / "a.tfrecord"
    with TFRecordWriter(path) as w:
        w.write_many([b"a", b"bc"])
    before = path.read_bytes()
    out = _Capped(path)
    with pytest.raises(TFRecordError, match="input file is output file") as err:
        merge([path], out, verify=verify)
    out._f.close()
    assert err.value.path == str(path)
    assert path.read_bytes() == before
    # A path output is a temporary file renamed at the end: merging into an input works.
    assert merge([path, path], path, verify=verify).path == str(path)
    assert list(TFRecordReader(path)) == [b"a", b"bc"] * 2


_LIMITED_WRITER = textwrap.dedent("""
    import os, resource, signal, sys
    sys.path.insert(0, {root!r})
    # Past this size a write fails with EFBIG, as a full disk fails with ENOSPC.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    from tfrecord_lite import TFRecordWriter
    for atomic in (True, False):
        try:
            with TFRecordWriter({path!r}, atomic=atomic) as w:
                for _ in range(30):
                    w.write(os.urandom(100_000))
        except OSError as exc:
            print(atomic, exc.errno, exc.filename, exc)
""")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_failed_write_names_the_users_path(tmp_path, pure):
    """An OS error while the records go to the file (here the file size limit; a full disk
    alike) names the output path, not the temporary file, nor no file at all."""
    import errno

    path = str(tmp_path / "out.tfrecord")
    script = _LIMITED_WRITER.format(root=ROOT, path=path)
    env = dict(os.environ, TFRECORD_LITE_PURE_PYTHON=pure)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split(" ", 3)[:3] for line in lines] == [["True", str(errno.EFBIG), path],
                                                          ["False", str(errno.EFBIG), path]], lines
    assert all(path in line for line in lines)


@pytest.mark.parametrize("index", [False, True])
def test_a_failed_data_rename_keeps_the_old_file(backend, tmp_path, monkeypatch, index):
    """The old sidecar goes before the data's rename (so no reader ever finds it beside other
    data): if the rename fails, the old file stays, and its sidecar is put back."""
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path, index=True) as w:
        w.write_many([b"old1", b"old2"])
    old = (tmp_path / "a.tfrecord").read_bytes()
    _fail_renames_to(monkeypatch, path)
    with pytest.raises(OSError, match="simulated"):
        with TFRecordWriter(path, index=index) as w:
            w.write(b"new")
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "a.tfrecord.index"]
    assert (tmp_path / "a.tfrecord").read_bytes() == old and read_index(path + ".index")[0].tolist() == [0, 20]
    assert list(TFRecordReader(path)) == [b"old1", b"old2"] and len(TFRecordFile(path)) == 2


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_flush_makes_a_compressed_streams_records_so_far_readable(backend, compression):
    # As TensorFlow's writer does (the interop tests hold the bytes identical): deflate's
    # block ends at flush(), where it was kept until close(), so nothing could be read yet.
    import io

    out = io.BytesIO()
    w = TFRecordWriter(out, compression=compression)
    w.write_many([b"a", b"bb" * 100, b""])
    w.flush()
    reader = TFRecordReader(out.getvalue(), compression=compression, on_corrupt="stop")
    assert list(reader) == [b"a", b"bb" * 100, b""]
    assert "ends before its end marker" in str(reader.skipped[0])  # the stream is not finished
    w.write(b"c")
    w.close()
    assert list(TFRecordReader(out.getvalue())) == [b"a", b"bb" * 100, b"", b"c"]


@pytest.mark.parametrize("stem", ["a" * 246, "é" * 123], ids=["ascii", "two-byte"])
def test_a_name_of_255_bytes_is_written_atomically(backend, tmp_path, stem):
    """A file name at the file system's limit (255 bytes) is legal, and TensorFlow writes it:
    the temporary name beside it (14 bytes longer) is cut to fit, and the stale sidecar that
    close() removes (whose name would be too long to exist) is no error."""
    name = stem + ".tfrecord"
    assert len(os.fsencode(name)) == 255
    path = tmp_path / name
    with TFRecordWriter(path) as w:
        w.write_many([b"a", b"bc"])
    with ShardedWriter(tmp_path / ("b" * 231), max_records_per_shard=1) as sw:  # b...b-00000-of-00002.tfrecord
        sw.write_many([b"x", b"y"])
    assert sorted(os.listdir(tmp_path)) == sorted([name] + [os.path.basename(s.path) for s in sw.shards])
    assert max(len(os.path.basename(s.path)) for s in sw.shards) == 255
    assert list(TFRecordReader(path)) == [b"a", b"bc"]
    assert [r for s in sw.shards for r in TFRecordReader(s.path)] == [b"x", b"y"]
    with pytest.raises(RuntimeError):
        with TFRecordWriter(path) as w:
            w.write(b"new")
            raise RuntimeError
    assert sorted(os.listdir(tmp_path)) == sorted([name] + [os.path.basename(s.path) for s in sw.shards])


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_failed_write_is_never_committed(backend, tmp_path, monkeypatch, compression):
    """The file took part of a drain and then failed (a full disk): a caller who catches the
    error and writes on cannot commit the file, which misses bytes (a compressed one, whose
    deflate state went on, would even be committed with records lost or twice). close()
    raises and removes it; the old file of that name stays."""
    path = tmp_path / "a.tfrecord"
    path.write_bytes(b"old")
    write = NamedWriter.write
    failures = [1]

    def flaky(self, data):
        if failures and len(data) > 1000:
            failures.pop()
            write(self, memoryview(data)[: len(data) // 2])
            raise OSError(28, "No space left on device")
        return write(self, data)

    monkeypatch.setattr(NamedWriter, "write", flaky)
    w = TFRecordWriter(path, compression)
    rng = random.Random(0)
    with pytest.raises(OSError, match="No space left"):
        for _ in range(3000):
            w.write(rng.randbytes(600))  # incompressible: gzip hands over as much
    w.write_many([b"more"] * 10)
    w.flush()
    with pytest.raises(TFRecordError, match=r"a.tfrecord.*an earlier write to the file failed \(OSError:.*"
                       r"No space left on device\), so it misses data; it is not committed\. Fix the cause"):
        w.close()
    assert os.listdir(tmp_path) == ["a.tfrecord"] and path.read_bytes() == b"old"
    w.close()  # closed: nothing more to do


@pytest.mark.parametrize("atomic", [True, False])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_fsync_syncs_every_byte_of_the_file(backend, tmp_path, monkeypatch, atomic, compression):
    """fsync=True syncs the file once it holds all its bytes: the last ones (a compressed
    stream's end, records short of the flush size) wait in the file's buffer until flushed."""
    path = tmp_path / "a.tfrecord"
    fsync = os.fsync
    synced = []

    def recording(fd):
        synced.append(os.fstat(fd))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    with TFRecordWriter(path, compression, atomic=atomic, fsync=True) as w:
        w.write_many([b"a" * 100, b"b"])
    monkeypatch.undo()
    data = [s for s in synced if os.path.samestat(s, os.stat(path))]
    assert data and data[0].st_size == path.stat().st_size
    # and its directory, which holds the name of a file created (atomic=False) or renamed
    assert any(os.path.samestat(s, os.stat(tmp_path)) for s in synced)
    assert list(TFRecordReader(path)) == [b"a" * 100, b"b"]


@pytest.mark.parametrize("atomic", [True, False])
def test_fsync_into_a_device_or_a_pipe_is_no_error(backend, tmp_path, atomic):
    """A device or a pipe is written in place, and fsync there fails (EINVAL): close()
    raised for TFRecordWriter("/dev/null", fsync=True) and for a named pipe."""
    with TFRecordWriter(os.devnull, atomic=atomic, fsync=True) as w:
        w.write(b"x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    with TFRecordWriter(fifo, atomic=atomic, fsync=True) as w:
        w.write(b"y")
    reader.join(timeout=30)
    assert list(TFRecordReader(io.BytesIO(got[0]))) == [b"y"]


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlink_is_written_through_to_its_target(tmp_path, monkeypatch, dangling):
    """The atomic rename replaced the link with a regular file and left its target as it
    was; TensorFlow's writer (and open()) write through the link."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.tfrecord"
    if not dangling:
        with TFRecordWriter(target) as w:
            w.write(b"old")
    link = tmp_path / "link.tfrecord"
    link.symlink_to(target)
    with TFRecordWriter(link) as w:
        w.write_many([b"a", b"bc"])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert list(TFRecordReader(target)) == [b"a", b"bc"]
    assert os.listdir(tmp_path / "real") == ["t.tfrecord"] and sorted(os.listdir(tmp_path)) == ["link.tfrecord", "real"]
    # a failed sidecar commit takes back the data written through the link: the target's
    # records before it are back
    _fail_renames_to(monkeypatch, str(link) + ".index")
    with pytest.raises(OSError, match="simulated"):
        with TFRecordWriter(link, index=True) as w:
            w.write(b"new")
    assert link.is_symlink() and list(TFRecordReader(target)) == [b"a", b"bc"]
    assert os.listdir(tmp_path / "real") == ["t.tfrecord"]


def test_a_rewrite_in_place_removes_the_old_sidecar(backend, tmp_path):
    """atomic=False left the old path + '.index'; a rewrite of the same size was then counted
    by it (two 10-byte records where one 36-byte record now is)."""
    from tfrecord_lite.index import count_records

    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path, index=True) as w:
        w.write_many([b"x" * 10, b"y" * 10])
    size = os.path.getsize(path)
    with TFRecordWriter(path, atomic=False) as w:
        w.write(b"z" * 36)
    assert os.path.getsize(path) == size and not os.path.exists(path + ".index")
    assert count_records(path) == 1 and len(TFRecordFile(path)) == 1
