"""TFRecordFile and IndexedDataset: indexed reads without scanning, CRC checks on fetch,
keys (ints, slices, index lists and arrays), threads, close, pickles and paths. The sidecars
themselves and the counts they serve: test_index_sidecars."""

import os
import pickle

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ._records import record, write_files

import tfrecord_lite.index as index_module
import tfrecord_lite.random_access as random_access_module
from tfrecord_lite import IndexedDataset, TFRecordDataset, TFRecordFile, TFRecordReader, TFRecordWriter, build_index
from tfrecord_lite.errors import CorruptRecordError, TFRecordError, TruncatedRecordError


def test_file_len_items_slices(backend, tmp_path):
    (path,) = write_files(tmp_path, [25], size=3)
    want = [record(0, j, 3) for j in range(25)]
    for with_sidecar in (False, True):
        if with_sidecar:
            build_index(path)
        f = TFRecordFile(path)
        assert backend.name == __import__("tfrecord_lite").implementation
        assert len(f) == 25
        assert f[0] == want[0] and f[-1] == want[-1] and f[7] == want[7]
        assert f[3:11] == want[3:11] and f[::4] == want[::4] and f[20:5:-3] == want[20:5:-3]
        assert f[30:] == []
        with pytest.raises(IndexError):
            f[25]
        f.close()


def test_sidecar_is_used_without_scanning(tmp_path, monkeypatch):
    (path,) = write_files(tmp_path, [10])
    build_index(path)

    def no_scan(*args, **kwargs):
        raise AssertionError("the file was scanned")

    monkeypatch.setattr(index_module, "scan_index", no_scan)
    assert len(TFRecordFile(path)) == 10 and len(IndexedDataset([path])) == 10


def test_fetch_checks_crc(backend, tmp_path):
    (path,) = write_files(tmp_path, [6], size=10)
    f = TFRecordFile(path)
    data = bytearray(open(path, "rb").read())
    data[int(f.offsets[4]) + 14] ^= 1
    open(path, "wb").write(bytes(data))
    f = TFRecordFile(path, index_file=None, check_crc=False)  # index scan skips the data CRC
    f.check_crc = True
    assert f[3] == record(0, 3, 10)
    with pytest.raises(CorruptRecordError) as info:
        f[4]
    assert info.value.index == 4 and info.value.path == path
    with pytest.raises(CorruptRecordError):
        f[2:6]


def test_indexed_dataset_global_index(backend, tmp_path):
    counts = [3, 0, 5, 2]
    paths = write_files(tmp_path, counts)
    build_index(paths[2])
    want = [record(f, j) for f, n in enumerate(counts) for j in range(n)]
    ds = IndexedDataset(paths, max_open_files=1)
    assert len(ds) == 10 and [ds[i] for i in range(10)] == want and ds[-1] == want[-1]
    assert ds[2:7] == want[2:7] and ds[[9, 0, 4]] == [want[9], want[0], want[4]]
    assert ds.locate(3) == (2, 0)
    # a 0-d integer array is one index, as TFRecordFile takes it (it was refused as a sequence)
    assert ds[np.array(4)] == ds[np.int64(4)] == want[4] == TFRecordFile(paths[2])[np.array(1)]
    assert ds[np.array([4, 1])] == [want[4], want[1]]
    fds = len(os.listdir("/proc/self/fd"))
    ds[0], ds[5], ds[9]
    assert len(os.listdir("/proc/self/fd")) <= fds + 1
    clone = pickle.loads(pickle.dumps(ds))
    assert clone[8] == want[8]
    parsed = IndexedDataset(paths, parse=lambda recs: {"n": [len(r) for r in recs]})
    assert parsed[0] == {"n": len(want[0])} and parsed[0:2] == {"n": [4, 4]}
    ds.close()


def test_a_file_damaged_after_its_index_was_read_fails_as_the_reader_fails(backend, tmp_path):
    """Random reads of a file cut short or bit-flipped since its sidecar was read raise the
    reader's error class for the record it hits, at its offset and index, with TensorFlow's
    words and offset as the reader gives them. A cut inside a record raised a CorruptRecordError
    ('the frame lengths do not match the index'), one between records a TruncatedRecordError
    saying 'corrupted record at', and a data CRC named the frame's start, not its data's. A
    length field rewritten with a valid CRC (past the file's end, past max_record_bytes) said
    CorruptRecordError where the reader says TruncatedRecordError or RecordTooLargeError."""
    import struct

    import tfrecord_lite as tfl

    records = [b"alpha", b"", b"gamma-gamma", bytes(range(40))]
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path, index=True) as w:
        w.write_many(records)
    good = open(path, "rb").read()
    starts = [int(o) for o in TFRecordFile(path).offsets] + [len(good)]

    def fields(err):  # the detail up to its first colon: "corrupted record at 49", or all of it
        return type(err), err.path, err.offset, err.index, err.detail.split(":")[0]

    damaged = [good[:cut] for cut in range(starts[1], len(good))]
    for byte in range(len(good)):
        flipped = bytearray(good)
        flipped[byte] ^= 0x10
        damaged.append(bytes(flipped))
    for k, start in enumerate(starts[:-1]):
        for n in {0, len(records[k]) - 1, len(records[k]) + 1, len(records[k]) + 30, 1000, 2**40} - {-1}:
            header = struct.pack("<Q", n)
            rewritten = bytearray(good)
            rewritten[start:start + 12] = header + struct.pack("<I", tfl.masked_crc32c(header))
            if rewritten != good:
                damaged.append(bytes(rewritten))
    for data in damaged:
        with open(path, "wb") as out:
            out.write(good)
        f = TFRecordFile(path)
        with open(path, "r+b") as out:  # in place: the sidecar stays
            out.write(data)
            out.truncate(len(data))
        try:
            list(TFRecordReader(path))
            assert len(data) in starts  # a cut between records: the reader ends there quietly
            k = starts.index(len(data))
            want = (TruncatedRecordError, path, len(data), k, f"truncated record at {len(data)}")
        except TFRecordError as exc:
            want = fields(exc)
            k = exc.index
        for read in (lambda: f[:], lambda: f[k], lambda: f[k:k + 1]):
            with pytest.raises(TFRecordError) as info:
                read()
            assert fields(info.value) == want, data.hex()
        assert f[:k] == records[:k]
        f.close()


def test_max_record_bytes_bounds_the_scan_and_indexed_dataset_takes_it(backend, tmp_path):
    # Without a sidecar the scan ran under the default limit whatever max_record_bytes was
    # (records over 2 GiB could not be opened at all), and a record over a smaller limit
    # was blamed on a stale index there was none of; IndexedDataset took no limit at all.
    from tfrecord_lite.errors import RecordTooLargeError

    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path) as w:
        w.write_many([b"x" * 5, b"y" * 31])
    for make in (lambda: TFRecordFile(path, max_record_bytes=30),
                 lambda: IndexedDataset([path], max_record_bytes=30)):
        with pytest.raises(RecordTooLargeError) as info:
            make()
        assert (info.value.path, info.value.index, info.value.offset) == (path, 1, 21)
        assert "stale" not in str(info.value)
    assert IndexedDataset([path], max_record_bytes=31)[1] == b"y" * 31
    build_index(path)
    with pytest.raises(TFRecordError, match="a record of 31 bytes but max_record_bytes is 30"):
        IndexedDataset([path], max_record_bytes=30)


def test_threads_sharing_a_file_keep_one_descriptor(backend, tmp_path, monkeypatch):
    # Each thread that found no descriptor opened its own and the last one kept replaced the
    # others, which leaked: a TFRecordFile shared by a Grain or DataLoader thread pool lost a
    # descriptor per thread.
    import threading
    import time

    (path,) = write_files(tmp_path, [20])
    opened, real_open = [], os.open

    def slow_open(name, *args, **kw):
        fd = real_open(name, *args, **kw)
        if name == path:
            opened.append(fd)
            time.sleep(0.05)  # every thread arrives while the first one opens
        return fd

    f = TFRecordFile(path)
    monkeypatch.setattr(os, "open", slow_open)
    got = {}
    threads = [threading.Thread(target=lambda k=k: got.setdefault(k, f[k])) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {k: record(0, k) for k in range(8)} and opened
    f.close()
    for fd in opened:  # each closed: by the thread that opened it, or by close()
        with pytest.raises(OSError):
            os.fstat(fd)
    assert pickle.loads(pickle.dumps(f))[3] == record(0, 3)


def test_indexed_dataset_reads_from_threads_run_at_once(backend, tmp_path, monkeypatch):
    # Every read held the dataset's lock (so that no eviction closed a descriptor under
    # it): threads of a Grain or DataLoader pool read one at a time, whatever the store.
    # Descriptors in use are now never closed, and the cap holds once they are done.
    import threading

    from ._records import Overlap

    paths = write_files(tmp_path, [5] * 6)
    ds = IndexedDataset(paths, max_open_files=2)
    overlap, pread = Overlap(4), TFRecordFile.pread

    def slow_pread(self, begin, end):
        with overlap():
            return pread(self, begin, end)

    monkeypatch.setattr(TFRecordFile, "pread", slow_pread)
    got = {}
    threads = [threading.Thread(target=lambda k=k: got.setdefault(k, ds[5 * k + 1])) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {k: record(k, 1) for k in range(6)} and overlap.peak >= 4
    assert sum(bool(f._fds) for f in ds.files) <= 2
    assert ds[[0, 29, 12]] == [record(0, 0), record(5, 4), record(2, 2)]
    assert sum(bool(f._fds) for f in ds.files) <= 2
    ds.close()
    assert not any(f._fds for f in ds.files)


@pytest.mark.parametrize("sidecar", [False, True])
def test_a_file_rewritten_while_open_says_to_open_it_again(backend, tmp_path, sidecar):
    # The hint said only "rebuild the index with tfrecord_lite.build_index": an open
    # TFRecordFile or IndexedDataset keeps the offsets it read, so a rebuilt sidecar changed
    # nothing, and a file without one had no index to rebuild.
    (path,) = write_files(tmp_path, [6], size=5)
    if sidecar:
        build_index(path)
    f, ds = TFRecordFile(path), IndexedDataset([path])
    write_files(tmp_path, [4], size=9)  # rewritten: other frame lengths
    if sidecar:
        build_index(path)
    for read in (lambda: f[2], lambda: ds[2], lambda: f[:]):
        with pytest.raises(TFRecordError) as info:
            read()
        hint = info.value.hint
        assert f"if {path} changed since it was opened, " in hint and "open it again" in hint
        assert ("build_index" in hint) == sidecar and "tfrecord-lite verify" in hint
    assert TFRecordFile(path)[2] == record(0, 2, 9)


def test_indexed_dataset_is_a_context_manager(backend, tmp_path):
    # TFRecordFile closed its descriptor at the end of a with block; IndexedDataset, which
    # holds up to max_open_files of them, could not be used in one at all.
    paths = write_files(tmp_path, [2, 3])
    with IndexedDataset(paths) as ds:
        assert ds[[4, 0]] == [record(1, 2), record(0, 0)]
        assert sum(bool(f._fds) for f in ds.files) == 2
    assert not any(f._fds for f in ds.files)


def test_a_child_forked_while_a_thread_held_a_lock_reads(backend, tmp_path):
    # A DataLoader worker forked while another thread of the parent was inside a read (or
    # opening a descriptor) inherited the lock held, and hung on its first read.
    paths = write_files(tmp_path, [3, 4])
    ds, f = IndexedDataset(paths, max_open_files=1), TFRecordFile(paths[1])
    ds[0], f[0]
    locks = [lock for lock in vars(ds).values() if hasattr(lock, "acquire")]
    locks += [lock for lock in vars(f).values() if hasattr(lock, "acquire")]
    for lock in locks:  # as a thread inside a read holds them
        lock.acquire()
    pid = os.fork()
    if pid == 0:  # the child: 0 if it reads, killed by the alarm if it hangs
        import signal

        signal.alarm(10)
        ok = False
        try:
            ok = [ds[i] for i in (6, 0, 4)] == [record(1, 3), record(0, 0), record(1, 1)] and f[2] == record(1, 2)
        finally:
            os._exit(0 if ok else 1)
    for lock in locks:
        lock.release()
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert ds[6] == record(1, 3) and f[3] == record(1, 3)


def test_an_index_out_of_range_names_the_dataset_files_and_length(backend, tmp_path):
    # The message read "<dataset>: record index 9 out of range for 9 records".
    paths = write_files(tmp_path, [3, 0, 4, 1, 1])
    ds = IndexedDataset(paths[:2])
    for key in (3, -4, [0, 3], slice(None), np.array([7])):
        if isinstance(key, slice):
            assert ds[key] == [record(0, j) for j in range(3)]
            continue
        with pytest.raises(IndexError, match=rf"^IndexedDataset of 2 files \({paths[0]}, {paths[1]}\): record index "
                           rf"-?\d out of range for 3 records$"):
            ds[key]
    with pytest.raises(IndexError) as info:
        IndexedDataset(paths)[9]
    assert str(info.value) == (f"IndexedDataset of 5 files ({paths[0]}, ... 3 more ..., {paths[4]}): record index 9 "
                               "out of range for 9 records")
    with pytest.raises(IndexError, match=rf"^{paths[2]}: record index -5 out of range for 4 records$"):
        TFRecordFile(paths[2])[-5]


@pytest.mark.parametrize("dataset", [False, True])
def test_close_during_a_read_of_another_thread_lets_the_read_finish(backend, tmp_path, monkeypatch, dataset):
    # close() closed the descriptor under a read in flight: the read failed with EBADF, or
    # read whichever file was given the number next (here a decoy of other bytes).
    import threading

    (path,) = write_files(tmp_path, [4], size=50)
    decoy = str(tmp_path / "decoy")
    with open(decoy, "wb") as f:
        f.write(b"\xff" * 4096)
    source = IndexedDataset([path]) if dataset else TFRecordFile(path)
    source[0]
    entered, go, real_pread = threading.Event(), threading.Event(), os.pread

    def gated_pread(fd, n, offset):
        entered.set()
        go.wait(10)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", gated_pread)
    got = []
    reader = threading.Thread(target=lambda: got.append(source[2]))
    reader.start()
    assert entered.wait(10)
    source.close()
    fd = os.open(decoy, os.O_RDONLY)  # takes the number close() freed, if it freed it
    try:
        go.set()
        reader.join(10)
    finally:
        os.close(fd)
    assert got == [record(0, 2, 50)]
    files = source.files if dataset else [source]
    assert not any(f._fds for f in files)  # closed by the read, once it ended
    monkeypatch.setattr(os, "pread", real_pread)
    assert source[3] == record(0, 3, 50)  # a read after close() opens it again
    source.close()
    assert not any(f._fds for f in files)


@pytest.mark.parametrize("dataset", [False, True])
def test_a_pickle_carries_the_index_file_not_the_offsets(backend, tmp_path, dataset):
    # A pickled IndexedDataset (or TFRecordFile) carried every record's offset and length, 16
    # bytes a record to each worker process; an index that came from a file is now read again
    # where it is unpickled, and refused there if it is not the one the pickle was made with.
    paths = write_files(tmp_path, [10_000, 3], size=1)
    for path in paths:
        build_index(path)
    make = (lambda: IndexedDataset(paths)) if dataset else (lambda: TFRecordFile(paths[0]))
    source = make()
    data = pickle.dumps(source)
    assert len(data) < 2000
    clone = pickle.loads(data)
    assert len(clone) == len(source) and clone[9_999] == record(0, 9_999, 1) and clone[-1] == source[-1]
    assert len(pickle.dumps(clone)) < 2000
    rebuilt = pickle.loads(data)
    with open(paths[0] + ".index") as f:
        text = f.read()
    write_files(tmp_path, [10_000], size=2)  # rewritten: another index
    build_index(paths[0])
    with pytest.raises(TFRecordError, match="changed after it was opened and pickled") as info:
        rebuilt[5]
    assert info.value.path == paths[0] + ".index"
    os.remove(paths[0] + ".index")
    with pytest.raises(TFRecordError, match="cannot be read again where it was unpickled") as info:
        pickle.loads(data)[5]
    assert info.value.path == paths[0] + ".index"
    write_files(tmp_path, [10_000], size=1)  # the file as it was (the writer drops its sidecar)
    with open(paths[0] + ".index", "w") as f:
        f.write(text)  # and the same index again: unpickled as it was
    clone = pickle.loads(data)
    assert len(clone) == len(source) and clone[9_999] == record(0, 9_999, 1)


@settings(max_examples=80, deadline=None)
@given(counts=st.lists(st.integers(0, 5), min_size=1, max_size=4), data=st.data())
def test_indexed_dataset_reads_any_indices_as_a_list_of_the_records_would(backend, tmp_path_factory, counts, data):
    paths = write_files(tmp_path_factory.mktemp("ds"), counts)
    want = [record(f, j) for f, n in enumerate(counts) for j in range(n)]
    assume(want)
    n = len(want)
    ds = IndexedDataset(paths, max_open_files=2)
    keys = data.draw(st.lists(st.integers(-n - 2, n + 1), max_size=12))
    as_array = data.draw(st.sampled_from([list, np.array, lambda k: np.array(k, np.int32), tuple]))
    if all(-n <= k < n for k in keys):
        assert ds[as_array(keys)] == [want[k] for k in keys] == ds._getitems(keys)
    else:
        first = next(k for k in keys if not -n <= k < n)
        with pytest.raises(IndexError, match=rf"record index {first} out of range for {n} records$"):
            ds[as_array(keys)]
    start, stop, step = (data.draw(st.none() | st.integers(-n - 2, n + 2)) for _ in range(3))
    step = step or None
    assert ds[start:stop:step] == want[start:stop:step]
    if n:
        positive = [k for k in keys if 0 <= k < n]
        assert ds[np.array(positive, np.uint64)] == [want[k] for k in positive]
    ds.close()


def test_a_slice_of_an_indexed_dataset_takes_no_python_step_per_record(backend, tmp_path, monkeypatch):
    # records() located each index in Python (a few microseconds each, seconds for a slice
    # of a million records that is then read with one pread per file).
    paths = write_files(tmp_path, [30_000, 30_000])
    ds = IndexedDataset(paths)
    located = []
    position = random_access_module._position
    monkeypatch.setattr(random_access_module, "_position", lambda *a: located.append(a) or position(*a))
    got = ds[10:50_000]
    assert len(got) == 49_990 and got[0] == record(0, 10) and got[-1] == record(1, 19_999)
    assert ds[np.arange(59_990, 60_000)] == [record(1, j) for j in range(29_990, 30_000)]
    assert len(located) == 0
    with pytest.raises(IndexError, match="record index 60000 out of range"):
        ds[np.array([5, 60_000])]
    with pytest.raises(TFRecordError, match="not float"):
        ds[[0, 1.0]]
    with pytest.raises(IndexError, match="record index 60000 out of range"):
        ds.records(range(59_999, 60_001))


def test_read_range_refuses_records_out_of_range(backend, tmp_path):
    # read_range(3, 9) of 5 records failed with NumPy's IndexError, and read_range(-2, 5)
    # read from the fourth frame's offset to the end and blamed a truncated record on the file.
    (path,) = write_files(tmp_path, [5])
    f = TFRecordFile(path)
    for start, stop in ((3, 9), (-2, 5), (-2, 1), (0, 6)):
        with pytest.raises(IndexError, match=rf"^{path}: records {start}\.\.{stop - 1} out of range for 5 records$"):
            f.read_range(start, stop)
    assert f.read_range(np.int64(1), 3) == [record(0, 1), record(0, 2)] and f.read_range(4, 2) == []
    assert f.read_range(5, 5) == [] and f.read_range(0, 5) == [record(0, j) for j in range(5)]
    with pytest.raises(TFRecordError, match="read_range takes integers, not float and int"):
        f.read_range(1.0, 3)


def test_a_file_reads_runs_of_a_batch_at_once_and_takes_index_lists(backend, tmp_path, monkeypatch):
    # TFRecordFile._getitems (Grain's batched read) made one pread per record, where
    # IndexedDataset reads each run of consecutive records with one; f[[i, j]] was refused.
    (path,) = write_files(tmp_path, [12])
    f = TFRecordFile(path)
    reads, pread = [], TFRecordFile.pread
    monkeypatch.setattr(TFRecordFile, "pread", lambda self, a, b: reads.append((a, b)) or pread(self, a, b))
    keys = [3, 4, 5, -1, 0, 1, 1]
    want = [record(0, k % 12) for k in keys]
    assert f._getitems(keys) == want and len(reads) == 4
    assert f[keys] == f[np.array(keys)] == want and f[[]] == [] and f[2:9] == [record(0, j) for j in range(2, 9)]
    with pytest.raises(IndexError, match=rf"^{path}: record index 12 out of range for 12 records$"):
        f[[0, 12]]
    with pytest.raises(TFRecordError, match="not float"):
        f[[0, 1.5]]


def test_a_read_that_differs_from_the_file_read_again_says_it_changed(backend, tmp_path, monkeypatch):
    # Bytes read while the file changed, which it holds right again when the error is made,
    # were reported as "the frame there is 70 bytes but the index says 70".
    (path,) = write_files(tmp_path, [4], size=50)
    f = TFRecordFile(path)
    pread = TFRecordFile.pread
    monkeypatch.setattr(TFRecordFile, "pread", lambda self, a, b: b"\xff" + pread(self, a, b)[1:])
    with pytest.raises(CorruptRecordError) as info:
        f[2]
    assert (info.value.index, info.value.offset) == (2, 140)
    assert "did not hold the 70-byte frame the index lists, which the file holds now" in str(info.value)
    assert info.value.hint == f"read it again once nothing writes to {path}"


def test_a_pickle_of_a_scanned_file_carries_its_frame_lengths_alone(backend, tmp_path):
    # The scan of a file without a sidecar was carried as offsets and lengths, 16 bytes a
    # record; the frames tile the file, so the lengths (4 bytes each) are enough.
    (path,) = write_files(tmp_path, [10_000], size=3)
    f = TFRecordFile(path)
    data = pickle.dumps(IndexedDataset([path]))
    assert f.index_file is None and len(data) < 4 * 10_000 + 2000
    clone = pickle.loads(data).files[0]
    assert clone.offsets.dtype == clone.lengths.dtype == np.int64
    assert np.array_equal(clone.offsets, f.offsets) and np.array_equal(clone.lengths, f.lengths)
    assert clone[9_999] == record(0, 9_999, 3) and pickle.loads(pickle.dumps(clone))[5] == record(0, 5, 3)


@pytest.mark.parametrize("sidecar", [False, True])
def test_a_relative_path_reads_its_own_file_after_a_chdir_and_once_unpickled(backend, tmp_path, monkeypatch, sidecar):
    # Paths were kept as given: after os.chdir, or in a copy unpickled in a process started
    # in another directory (a Grain or torch worker), a relative path opened the file (and
    # read the sidecar) of that name there, or none.
    name = "part-00000.tfrecord"
    for where, f in (("here", 0), ("there", 9)):  # same name, same frame sizes, other records
        (tmp_path / where).mkdir()
        write_files(tmp_path / where, [6], make=lambda _, j, f=f: record(f, j))
        if sidecar:
            build_index(str(tmp_path / where / name))
    want = [record(0, j) for j in range(6)]
    monkeypatch.chdir(tmp_path / "here")
    sources = [TFRecordFile(name), IndexedDataset([name]), IndexedDataset(".")]
    if sidecar:
        sources.append(TFRecordFile(name, index_file=name + ".index"))
    data = pickle.dumps(sources)
    monkeypatch.chdir(tmp_path / "there")
    for source in [*sources, *pickle.loads(data)]:
        assert source[:] == want and source[np.array([5, 0])] == [want[5], want[0]]
    monkeypatch.chdir(tmp_path / "here")
    clones = pickle.loads(data)
    monkeypatch.chdir(tmp_path)
    assert all(clone[:] == want for clone in clones)
    # The repr names the files as given: Grain compares it with the one in a checkpoint,
    # which a run started from another directory (or another machine) restores.
    assert repr(sources[0]) == f"TFRecordFile({name!r}, records=6)"
    assert repr(sources[1]).startswith(f"IndexedDataset([{name!r}]")


class _NotIterated(np.ndarray):
    """Indices that fail when a Python step per index (iter, list) walks them."""

    def __iter__(self):
        raise AssertionError("the index array was walked in Python")


@pytest.mark.parametrize("parsed", [False, True])
def test_an_index_array_is_located_in_numpy_not_made_a_list(backend, tmp_path, parsed):
    # ds[array] and ds._getitems(array) made a Python list of the array first, one NumPy
    # scalar per index (about 0.4 s a million), before locating them in NumPy.
    from tfrecord_lite import FixedLenFeature
    from tfrecord_lite.errors import ExampleDecodeError

    paths = write_files(tmp_path, [7, 5])
    want = [record(f, j) for f, n in enumerate((7, 5)) for j in range(n)]
    keys = np.array([11, 0, 1, 2, -1, 6, 7], np.int32)
    if not parsed:
        ds, f = IndexedDataset(paths), TFRecordFile(paths[0])
        assert ds[keys.view(_NotIterated)] == ds._getitems(keys.view(_NotIterated)) == [want[k] for k in keys]
        assert f[keys[1:4].view(_NotIterated)] == f._getitems(keys[1:4].view(_NotIterated)) == want[:3]
        with pytest.raises(IndexError, match="record index 12 out of range for 12 records$"):
            ds._getitems(np.array([1, 12]).view(_NotIterated))
    else:  # the records are no Examples: the error names the file and record of the first
        ds = IndexedDataset(paths, {"x": FixedLenFeature([], np.int64)})
        for read in (ds.__getitem__, ds._getitems):
            with pytest.raises(ExampleDecodeError) as info:
                read(keys.view(_NotIterated))
            assert (info.value.path, info.value.index) == (paths[1], 4)


def test_a_boolean_mask_is_refused_saying_what_to_pass(backend, tmp_path):
    # A mask as a list of bools read records 1 and 0 (True and False as integers), and one
    # as a NumPy array was refused as "not bool"; NumPy reads either as a mask.
    (path,) = write_files(tmp_path, [4])
    mask = np.array([False, True, True, False])
    for source in (TFRecordFile(path), IndexedDataset([path])):
        for key in (mask, mask.tolist()):
            for read in (source.__getitem__, source._getitems):
                with pytest.raises(TFRecordError, match=r"not booleans.*np\.flatnonzero\(mask\)"):
                    read(key)
        assert source[np.flatnonzero(mask)] == [record(0, 1), record(0, 2)]


def test_a_bytes_path_is_read_as_its_decoded_name(backend, tmp_path):
    # os.open takes bytes paths, but TFRecordFile(b"...") failed with "can't concat str to
    # bytes" looking for its sidecar.
    (path,) = write_files(tmp_path, [3])
    build_index(path)
    want = [record(0, j) for j in range(3)]
    for source in (TFRecordFile(os.fsencode(path)), TFRecordFile(os.fsencode(path), os.fsencode(path + ".index")),
                   IndexedDataset([os.fsencode(path)])):
        assert source[:] == pickle.loads(pickle.dumps(source))[:] == want
    assert TFRecordFile(os.fsencode(path)).path == path


@pytest.mark.parametrize("bad", [0, -3, None, 2.5, "4"])
def test_max_open_files_is_checked_as_tfrecord_dataset_checks_it(tmp_path, bad):
    # IndexedDataset made 0 and -3 one, 2.5 two, and failed on None with int()'s TypeError;
    # TFRecordDataset refuses them all, saying which argument.
    paths = write_files(tmp_path, [2])
    for make in (IndexedDataset, TFRecordDataset):
        with pytest.raises(TFRecordError, match=rf"^max_open_files must be a positive integer, not {bad!r}"):
            make(paths, max_open_files=bad)
    assert IndexedDataset(paths, max_open_files=np.int64(1))[:] == [record(0, 0), record(0, 1)]


@pytest.mark.parametrize("key", [b"ab", bytearray(b"\x01"), {1, 2}, {1: 2}])
def test_bytes_sets_and_mappings_are_not_index_lists(backend, tmp_path, key):
    # ds[b"ab"] read records 97 and 98, ds[{2, 1}] the records in the set's order and
    # ds[{1: 2}] record 1; lists and NumPy refuse them all as indices.
    (path,) = write_files(tmp_path, [120])
    for source in (TFRecordFile(path), IndexedDataset([path])):
        for read in (source.__getitem__, source._getitems):
            with pytest.raises(TFRecordError, match=rf"not {type(key).__name__}$"):
                read(key)
