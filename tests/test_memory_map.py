"""memory_map=True: a local file scanned in place through a read-only mapping gives exactly
what reading it gives (records, blocks, spans, errors, resumes), holds no descriptor in the
compiled core, outlives its reader for as long as a batch uses it, and falls back to reading
where there is nothing to map (compressed files, streams, devices)."""

import gc
import os
import pickle
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset, TFRecordReader, TFRecordWriter
from tfrecord_lite.errors import CorruptRecordError

from ._records import core_calls, write_files


def _write(path, records, compression=None):
    with TFRecordWriter(path, compression=compression) as w:
        w.write_many(records)
    return path


def _every_mode(path, **options):
    """What each way of reading gives: records, record lists, in-place batches, copied
    blocks, spans."""
    def reader():
        return TFRecordReader(path, **options)

    return {
        "records": list(reader()),
        "batches": [r for b in reader().batches() for r in b],
        "record_batches": [r for b in reader().record_batches() for r in b],
        "frame_blocks": [bytes(f[s:s + n]) for f, starts, lengths in reader().frame_blocks()
                         for s, n in zip(starts.tolist(), lengths.tolist())],
        "spans": [(o, n) for offsets, lengths in reader().record_spans()
                  for o, n in zip(offsets.tolist(), lengths.tolist())],
    }


@settings(max_examples=40)
@given(records=st.lists(st.binary(max_size=300), max_size=40), chunk=st.sampled_from([None, 64, 100, 1000]),
       start=st.integers(0, 40))
def test_a_mapped_file_reads_as_the_file_does(backend, tmp_path_factory, records, chunk, start):
    path = _write(str(tmp_path_factory.mktemp("m") / "f.tfrecord"), records)
    start = min(start, len(records))
    offset = sum(16 + len(r) for r in records[:start])
    options = {"chunk_size": chunk, "start_offset": offset, "start_index": start}
    mapped = _every_mode(path, memory_map=True, **options)
    assert mapped == _every_mode(path, **options)
    assert mapped["records"] == records[start:]


def test_batches_are_views_of_the_mapping(backend, tmp_path):
    records = [b"%d" % i * 50 for i in range(1000)]
    path = _write(str(tmp_path / "f.tfrecord"), records)
    reader = TFRecordReader(path, memory_map=True, chunk_size=4096)
    assert reader.mapped and reader._file is None
    batches = list(reader.record_batches())
    assert len(batches) > 1   # scanned a chunk at a time
    frames = {id(f) for b in batches for f, _, _ in b.segments}
    assert len(frames) == 1   # one mapping, no copies
    mapping = batches[0].segments[0][0]
    assert memoryview(mapping).readonly and len(mapping) == os.path.getsize(path)
    with pytest.raises((BufferError, TypeError)):
        memoryview(mapping)[0:1] = b"x"
    assert [r for b in batches for r in b] == records


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors and mappings through /proc")
@pytest.mark.parametrize("size", [300, 40_000])   # 90 KB, unmapped at once; 12 MB, on a thread
def test_the_compiled_mapping_holds_no_descriptor_and_goes_with_its_last_batch(tmp_path, size):
    from tfrecord_lite import _native

    path = _write(str(tmp_path / "held.tfrecord"), [b"x" * size] * 300)

    def mapped():
        with open("/proc/self/maps") as f:
            return sum(path in line for line in f)

    before = len(os.listdir("/proc/self/fd"))
    with _native.use("cython"):
        reader = TFRecordReader(path, memory_map=True)
        assert len(os.listdir("/proc/self/fd")) == before   # mapped, then closed
        batches = list(reader.record_batches())
    del reader
    gc.collect()
    assert mapped() == 1   # the batches hold it
    assert [len(r) for b in batches for r in b] == [size] * 300
    del batches
    gc.collect()
    # A large mapping is unmapped on a thread of its own: wait for it, a while at most.
    deadline = time.monotonic() + 10
    while mapped() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mapped() == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_a_dataset_keeps_no_descriptor_past_max_open_files(backend, tmp_path):
    """Mappings kept for the next epoch hold no descriptor (Python's mmap, the twin's before
    3.13, would: the twin keeps none of them), so a mapped dataset stays within
    max_open_files while it reads and holds none once an epoch has ended."""
    paths = [_write(str(tmp_path / f"f{k:02d}.tfrecord"), [b"%d:%d" % (k, j) for j in range(20)]) for k in range(12)]

    def held():
        return sum(os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path))
                   for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}"))

    ds = TFRecordDataset(paths, max_open_files=2, memory_map=True)
    for epoch in range(2):
        peak = 0
        for n, record in enumerate(ds, 1):
            peak = max(peak, held())
        assert n == 240 and peak <= 2 and held() == 0, (epoch, peak)
    assert backend.name == tfl.implementation


def test_a_batch_of_a_mapping_pickles_as_bytes(backend, tmp_path):
    records = [os.urandom(n) for n in range(0, 2000, 37)]
    path = _write(str(tmp_path / "p.tfrecord"), records)
    batch = next(TFRecordReader(path, memory_map=True).record_batches(len(records)))
    copy = pickle.loads(pickle.dumps(batch))
    assert list(copy) == records
    assert all(type(f) is bytes for f, _, _ in copy.segments)


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("given_as", ["auto", "named"])
def test_compressed_files_are_read_not_mapped(backend, tmp_path, compression, given_as):
    records = [b"r%d" % i for i in range(500)]
    path = _write(str(tmp_path / "c.tfrecord"), records, compression)
    reader = TFRecordReader(path, "auto" if given_as == "auto" else compression, memory_map=True)
    assert not reader.mapped
    assert list(reader) == records


def test_streams_and_devices_are_read(backend, tmp_path):
    import io

    data = bytes(backend.framing.encode_frames([b"a", b"bc"]))
    assert list(TFRecordReader(io.BytesIO(data), memory_map=True)) == [b"a", b"bc"]
    if os.path.exists("/dev/null"):   # a character device: nothing to map, and nothing in it
        reader = TFRecordReader("/dev/null", memory_map=True)
        assert not reader.mapped and list(reader) == []


def test_a_mapped_file_is_read_to_the_size_it_had_when_opened(backend, tmp_path):
    path = _write(str(tmp_path / "grows.tfrecord"), [b"a" * 10] * 5)
    reader = TFRecordReader(path, memory_map=True)
    with open(path, "ab") as f:   # records appended after it was opened
        f.write(bytes(backend.framing.encode_frames([b"b" * 10] * 3)))
    assert list(reader) == [b"a" * 10] * 5
    assert list(TFRecordReader(path, memory_map=True)) == [b"a" * 10] * 5 + [b"b" * 10] * 3


def test_an_empty_file(backend, tmp_path):
    path = str(tmp_path / "empty.tfrecord")
    open(path, "wb").close()
    reader = TFRecordReader(path, memory_map=True)
    assert reader.mapped and list(reader) == []


def test_errors_name_the_file_offset_and_record(backend, tmp_path):
    records = [b"x" * 100] * 20
    path = _write(str(tmp_path / "bad.tfrecord"), records)
    with open(path, "r+b") as f:   # a data byte of record 7
        f.seek(7 * 116 + 12 + 50)
        f.write(b"y")
    with pytest.raises(CorruptRecordError) as info:
        list(TFRecordDataset(path, memory_map=True, batch_size=4))
    assert (info.value.path, info.value.offset, info.value.index) == (path, 7 * 116, 7)
    got = list(TFRecordDataset(path, memory_map=True, on_corrupt="skip"))
    assert got == records[:19]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("block_length", [1, 7])
def test_datasets_read_mapped_files_in_the_same_order(backend, tmp_path, threads, block_length):
    paths = write_files(tmp_path, [300, 0, 1200, 45, 800], size=40)
    options = {"num_threads": threads, "block_length": block_length}
    assert (list(TFRecordDataset(paths, memory_map=True, **options))
            == list(TFRecordDataset(paths, **options)))
    raw = [list(b) for b in TFRecordDataset(paths, memory_map=True, batch_size=64, **options)]
    assert raw == [list(b) for b in TFRecordDataset(paths, batch_size=64, **options)]


@pytest.mark.parametrize("threads", [1, 3])
def test_mapped_files_in_pieces_of_their_own_size_keep_order_and_resume(backend, tmp_path, monkeypatch, threads):
    # A mapped file's pieces and scan chunks have their own (larger) sizes: with budgets small
    # enough to cut every file into many pieces, records, order and resumes are those of reading.
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_PIECE_BYTES_PER_THREAD", 600)
    monkeypatch.setattr(_pipeline, "_PIECE_BYTES_MIN", 100)
    monkeypatch.setattr(_pipeline, "_MAPPED_CHUNK_BYTES", 700)
    pieces = []
    read_piece = _pipeline.Run._read_piece

    def counted(run, slot):
        piece, piece_map = read_piece(run, slot)
        pieces.append((slot.reader is not None and slot.reader.mapped and slot.reader.chunk_size, len(piece)))
        return piece, piece_map

    monkeypatch.setattr(_pipeline.Run, "_read_piece", counted)
    paths = write_files(tmp_path, [300, 0, 250, 45, 200], size=30)
    opts = dict(batch_size=32, num_threads=threads, block_length=3, seed=1)
    read = [list(b) for b in TFRecordDataset(paths, **opts)]
    pieces.clear()
    ds = TFRecordDataset(paths, memory_map=True, **opts)
    it = iter(ds)
    head = [list(next(it)) for _ in range(7)]
    if _maps(backend):  # else the files are read (see _maps): the order and resume below still hold
        assert {chunk for chunk, _ in pieces if chunk} == {700}  # the mapped scan chunk
        assert len(pieces) > 2 * 4 and max(n for _, n in pieces) < 45  # every file in several pieces
    else:
        assert {chunk for chunk, _ in pieces} == {False}  # no file mapped
    state = ds.state_dict()
    it.close()
    fresh = TFRecordDataset(paths, memory_map=True, **opts)
    fresh.load_state_dict(state)
    assert head + [list(b) for b in fresh] == read


def test_parsed_mapped_batches_equal_read_ones(backend, tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for f in range(3):
        cols = {"x": rng.random(700).astype(np.float32), "s": [b"%d" % i for i in range(700)],
                "img": [rng.bytes(3000) for _ in range(700)]}
        paths.append(_write(str(tmp_path / f"{f}.tfrecord"), tfl.encode_examples(cols)))
    spec = {"x": tfl.FixedLenFeature([], np.float32), "s": tfl.FixedLenFeature([], bytes),
            "img": tfl.FixedLenFeature([], bytes)}
    for bytes_output in ("object", "column"):
        mapped = list(TFRecordDataset(paths, spec, batch_size=100, num_threads=2, memory_map=True,
                                      bytes_output=bytes_output))
        read = list(TFRecordDataset(paths, spec, batch_size=100, num_threads=2, bytes_output=bytes_output))
        assert len(mapped) == len(read) == 21
        for a, b in zip(mapped, read):
            assert a.keys() == b.keys()
            for k in a:
                assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])) if bytes_output == "object" or k == "x" \
                    else list(a[k]) == list(b[k])


def test_a_mapped_run_resumes_where_it_stopped(backend, tmp_path):
    # Mapping is how files are read, not what is read: a state resumes either way.
    paths = write_files(tmp_path, [500, 300, 700], size=20)
    opts = dict(batch_size=50, num_threads=2, shuffle_buffer=100, seed=3, cycle_length=2)
    whole = [list(b) for b in TFRecordDataset(paths, **opts)]
    for first, then in ((True, False), (False, True), (True, True)):
        ds = TFRecordDataset(paths, memory_map=first, **opts)
        it = iter(ds)
        head = [list(next(it)) for _ in range(9)]
        state = ds.state_dict()
        it.close()
        fresh = TFRecordDataset(paths, memory_map=then, **opts)
        fresh.load_state_dict(state)
        assert head + [list(b) for b in fresh] == whole


@pytest.mark.skipif(sys.platform == "win32", reason="the compiled core maps files on POSIX systems only")
def test_map_file_rejects_what_it_cannot_map(backend, tmp_path):
    path = _write(str(tmp_path / "f.tfrecord"), [b"abc"])
    with open(path, "rb") as f:
        with pytest.raises(tfl.errors.InvalidArgumentError):
            backend.framing.map_file(f.fileno(), 0)
        mapping = backend.framing.map_file(f.fileno(), os.path.getsize(path))
    assert bytes(mapping) == open(path, "rb").read()
    with pytest.raises((OSError, ValueError)):
        backend.framing.map_file(-1, 10)


def _mapped_files(monkeypatch):
    """Log each file the core maps (its size)."""
    return core_calls(monkeypatch, "map_file")


def _epoch(ds):
    return [bytes(r) for batch in ds for r in batch]


def _maps(backend) -> bool:
    """Whether a dataset maps its files: the twin's mappings hold a descriptor before Python
    3.13, and the records of many files alive at once would hold one each (past
    max_open_files), so there it reads them."""
    return backend.name == "cython" or sys.version_info >= (3, 13)


def test_the_next_epoch_reuses_the_mappings(backend, tmp_path, monkeypatch):
    """A dataset keeps its files' mappings for its next iteration: a new mapping faults every
    page in again as it is scanned (and TFRecordIterableDataset's epochs do the same)."""
    paths = write_files(tmp_path, [50, 70, 30], size=300)
    expected = [r for p in paths for r in TFRecordReader(p)]
    made = _mapped_files(monkeypatch)
    ds = TFRecordDataset(paths, batch_size=16, memory_map=True)
    assert sorted(_epoch(ds)) == sorted(expected) and len(made) == (3 if _maps(backend) else 0)
    assert sorted(_epoch(ds)) == sorted(expected) and len(made) == (3 if _maps(backend) else 0)
    from tfrecord_lite.torch import TFRecordIterableDataset

    loader_ds = TFRecordIterableDataset(paths, batch_size=16, memory_map=True)
    for _ in range(3):
        assert sorted(_epoch(loader_ds)) == sorted(expected)
    assert len(made) == (6 if _maps(backend) else 0)


def test_a_file_changed_between_epochs_is_mapped_again(backend, tmp_path, monkeypatch):
    paths = write_files(tmp_path, [50, 70], size=300)
    made = _mapped_files(monkeypatch)
    ds = TFRecordDataset(paths, memory_map=True)
    first = list(ds)
    assert first == [r for p in paths for r in TFRecordReader(p)]
    del first  # a batch of the old mapping must not be in use as its file changes
    time.sleep(0.01)  # a new modification time, on file systems with coarse ones
    _write(paths[1], [b"new %d" % i for i in range(80)])
    assert list(ds) == [r for p in paths for r in TFRecordReader(p)]
    assert len(made) == (3 if _maps(backend) else 0)


def test_mappings_past_the_kept_number_are_made_each_epoch(backend, tmp_path, monkeypatch):
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "_MAPS_KEPT", 2)
    paths = write_files(tmp_path, [10, 20, 30, 40], size=100)
    made = _mapped_files(monkeypatch)
    ds = TFRecordDataset(paths, memory_map=True, num_threads=2)
    for _ in range(3):
        assert sorted(ds) == sorted(r for p in paths for r in TFRecordReader(p))
    assert len(made) == (4 + 2 + 2 if _maps(backend) else 0)


def test_a_dataset_pickles_without_its_mappings(backend, tmp_path):
    paths = write_files(tmp_path, [20, 30], size=100)
    ds = TFRecordDataset(paths, memory_map=True)
    assert len(list(ds)) == 50 and (ds._maps is not None) == _maps(backend)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._maps is None and copy._buffers is None
    assert list(copy) == [r for p in paths for r in TFRecordReader(p)]


def test_compressed_files_are_neither_mapped_nor_kept(backend, tmp_path, monkeypatch):
    paths = write_files(tmp_path, [30, 40], size=100, compression="gzip")
    made = _mapped_files(monkeypatch)
    ds = TFRecordDataset(paths, memory_map=True)
    for _ in range(2):
        assert list(ds) == [r for p in paths for r in TFRecordReader(p)]
    assert made == [] and (ds._maps is None or ds._maps._maps == {})
