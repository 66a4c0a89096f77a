"""TFRecordWriter: thread safety, atomic commit (exceptions and SIGKILL), index sidecars."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from tfrecord_lite import TFRecordError, TFRecordReader, TFRecordWriter
from tfrecord_lite.index import build_index, read_index, scan_index

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
    with pytest.raises(TFRecordError, match="closed"):
        w.write(b"y")
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
    # The per-record path holds the writer weakly: dropping the last reference discards the
    # temporary file at once (no cycle to wait for), and a write() kept past it raises.
    import gc

    w = TFRecordWriter(tmp_path / "a.tfrecord")
    write = w.write
    write(b"x" * 100)
    with pytest.warns(ResourceWarning, match="never closed"):
        del w
    assert os.listdir(tmp_path) == []
    gc.collect()
    with pytest.raises(TFRecordError, match="no longer exists|closed"):
        write(b"y")


def test_write_drains_to_the_file_past_the_flush_size(backend, tmp_path):
    # Records that cross the flush size reach the file during write(), whole and in order.
    import tfrecord_lite.writer as writer_module

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
