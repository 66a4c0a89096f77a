"""A file truncated while it is mapped (memory_map=True): the compiled core's scans, decodes and
copies of raw records (iterating, indexing, to_numpy) raise TruncatedRecordError naming the
file, the first lost record's frame offset and its index, after delivering every record before
it, instead of ending the process with SIGBUS, and keep raising once the pages they faulted on
read as zeros; a read of the pages outside the core (the user's own, through a batch's
segments) still ends it, as with numpy.memmap, and so do the pure-Python twin's reads, which
go through Python's mmap unguarded.

The files here are cut after they were mapped, never while a read runs, so each test is
deterministic: a page wholly past the new end faults, the page the new end falls in reads
zeros after it without a fault, and both are tested."""

import concurrent.futures
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tfrecord_lite as tfl
from tfrecord_lite import _native
from tfrecord_lite.errors import CorruptRecordError, TruncatedRecordError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Windows does not let a mapped file be cut short")

PAGE = os.sysconf("SC_PAGESIZE") if hasattr(os, "sysconf") else 4096
SIZE = 3000  # a record spans pages, so that a cut lands inside records and between them


@pytest.fixture(autouse=True)
def compiled():
    """Only the compiled core guards its reads (the module docstring)."""
    if "cython" not in _native.available():
        pytest.fail("the compiled core is not built; run `pip install .` (or build_ext --inplace)")
    with _native.use("cython"):
        yield


def _records(n=60):
    return [bytes([i % 251]) * SIZE + b"%d" % i for i in range(n)]


def _write(path, records):
    with tfl.TFRecordWriter(path) as w:
        w.write_many(records)
    return path


def _frames(records):
    """(offset, end) of each frame."""
    out, at = [], 0
    for r in records:
        out.append((at, at + 16 + len(r)))
        at += 16 + len(r)
    return out


def _first_lost(records, cut):
    return next(k for k, (_, end) in enumerate(_frames(records)) if end > cut)


# Cuts: inside the first header, inside the first frame, at page boundaries, inside pages, further in.
CUTS = [0, 7, 3000, PAGE, 3 * PAGE, 3 * PAGE + 100, 10 * PAGE - 1, 150_000]


def _read(reader, mode):
    if mode == "records":
        return list(reader)
    if mode == "record_batches":
        return [r for b in reader.record_batches() for r in b]
    if mode == "frame_blocks":
        return [bytes(f[s:s + n]) for f, starts, lengths in reader.frame_blocks()
                for s, n in zip(starts.tolist(), lengths.tolist())]
    return [(o, n) for offsets, lengths in reader.record_spans() for o, n in zip(offsets.tolist(), lengths.tolist())]


@pytest.mark.parametrize("mode", ["records", "record_batches", "frame_blocks", "record_spans"])
@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("chunk", [None, 5000])
def test_reading_a_file_cut_short_under_its_mapping_raises(tmp_path, mode, cut, chunk):
    records = _records()
    path = _write(str(tmp_path / "cut.tfrecord"), records)
    reader = tfl.TFRecordReader(path, memory_map=True, chunk_size=chunk)
    assert reader.mapped
    os.truncate(path, cut)
    lost = _first_lost(records, cut)
    got = []
    with pytest.raises(TruncatedRecordError) as info:
        if mode == "records":
            for record in reader:
                got.append(record)
        else:
            _read(reader, mode)
    err = info.value
    assert (err.path, err.offset, err.index) == (path, _frames(records)[lost][0], lost)
    assert "while it was mapped" in str(err)
    assert got == (records[:lost] if mode == "records" else [])


@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("mode", ["records", "record_batches", "record_spans"])
def test_skipping_keeps_the_records_before_the_cut(tmp_path, cut, mode):
    records = _records()
    path = _write(str(tmp_path / "cut.tfrecord"), records)
    reader = tfl.TFRecordReader(path, memory_map=True, on_corrupt="skip")
    os.truncate(path, cut)
    lost = _first_lost(records, cut)
    got = _read(reader, mode)
    want = records[:lost] if mode != "record_spans" else [(o + 12, len(r)) for (o, _), r in
                                                          zip(_frames(records)[:lost], records)]
    assert got == want
    assert [type(e) for e in reader.skipped] == [TruncatedRecordError]
    assert (reader.skipped[0].offset, reader.skipped[0].index) == (_frames(records)[lost][0], lost)


def test_a_corrupt_record_before_the_cut_is_skipped_and_the_cut_reported(tmp_path):
    records = _records()
    path = _write(str(tmp_path / "cut.tfrecord"), records)
    frames = _frames(records)
    with open(path, "r+b") as f:  # a data byte of record 5
        f.seek(frames[5][0] + 12 + 100)
        f.write(b"\xff")
    reader = tfl.TFRecordReader(path, memory_map=True, on_corrupt="skip")
    cut = 20 * PAGE + 5
    os.truncate(path, cut)
    lost = _first_lost(records, cut)
    assert list(reader) == records[:5] + records[6:lost]
    assert [(type(e), e.index) for e in reader.skipped] == [(CorruptRecordError, 5), (TruncatedRecordError, lost)]


def test_resynchronising_into_the_lost_pages_reports_the_cut(tmp_path):
    # A damaged length field sends the reader looking for the next header: it walks into the
    # pages past the new end, where it must not find one made of zeros, and says why it stopped.
    records = _records()
    path = _write(str(tmp_path / "cut.tfrecord"), records)
    frames = _frames(records)
    cut = frames[30][0] + 5
    with open(path, "r+b") as f:
        f.seek(frames[29][0])
        f.write(b"\xff" * 12)
    reader = tfl.TFRecordReader(path, memory_map=True, on_corrupt="skip")
    os.truncate(path, cut)
    assert list(reader) == records[:29]
    assert [type(e) for e in reader.skipped] == [CorruptRecordError, TruncatedRecordError]


def _examples(n=60):
    return list(tfl.encode_examples({"img": [bytes([i % 251]) * SIZE for i in range(n)], "i": np.arange(n)}))



SPEC = {"img": tfl.FixedLenFeature([], bytes), "i": tfl.FixedLenFeature([], np.int64)}


@pytest.mark.parametrize("cut", [0, PAGE, 10 * PAGE, 10 * PAGE + 1000, 10 * PAGE - 1, 40 * PAGE + 7])
@pytest.mark.parametrize("bytes_output", ["object", "column"])
def test_parsing_records_of_a_file_cut_short_under_its_mapping_raises(tmp_path, cut, bytes_output):
    # The records were scanned whole; the file is cut before they are parsed where they lie.
    records = _examples()
    path = _write(str(tmp_path / "cut.tfrecord"), records)
    batch, = tfl.TFRecordReader(path, memory_map=True).record_batches()
    assert len(batch) == len(records)
    before = tfl.parse_example(batch[:5], SPEC, bytes_output=bytes_output)
    os.truncate(path, cut)
    lost = next(k for k, (_, end) in enumerate(_frames(records)) if end - 4 > cut)  # its data ends past the cut
    with pytest.raises(TruncatedRecordError) as info:
        tfl.parse_example(batch, SPEC, bytes_output=bytes_output)
    err = info.value
    assert (err.path, err.offset, err.index, err.batch_index) == (path, _frames(records)[lost][0], lost, lost)
    assert "while mapped" in str(err)
    if lost >= 5:  # what was parsed before the cut is the parser's own copy
        assert before["i"].tolist() == list(range(5)) and list(before["img"])[4] == bytes([4]) * SIZE


def test_the_guard_is_each_threads_own(tmp_path):
    # Threads parse at once, without the GIL: one reads a file cut short (its faults), the
    # others intact files, whose results must come out whole.
    records = _examples(200)
    paths = [_write(str(tmp_path / f"{f}.tfrecord"), records) for f in range(4)]
    batches = [next(tfl.TFRecordReader(p, memory_map=True).record_batches()) for p in paths]
    os.truncate(paths[0], PAGE)
    barrier = threading.Barrier(4)

    def parse(batch):
        barrier.wait()
        outs = []
        for _ in range(20):
            try:
                outs.append(tfl.parse_example(batch, SPEC)["i"].tolist())
            except TruncatedRecordError as exc:
                outs.append(exc.index)
        return outs

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(parse, batches))
    lost = _first_lost(records, PAGE)
    assert results[0] == [lost] * 20
    assert all(r == [list(range(200))] * 20 for r in results[1:])


def _raw_reads(batch, lost):
    """Each way the library hands out a raw batch's records, as (name, callable)."""
    return [("iter", lambda: list(batch)), ("index", lambda: batch[lost]), ("last", lambda: batch[-1]),
            ("to_numpy", batch.to_numpy), ("parse", lambda: tfl.parse_example(batch, SPEC))]


@pytest.mark.parametrize("gathered", [False, True])
@pytest.mark.parametrize("cut", [PAGE, 10 * PAGE, 10 * PAGE + 1000])
def test_raw_batches_of_a_file_cut_short_raise_every_time(tmp_path, gathered, cut):
    # The first read past the cut faults (or, in the page the cut falls in, reads zeros);
    # the pages it faulted on read as zeros from then on, so each later read must still
    # raise, about the same record.
    records = _examples()
    path = _write(str(tmp_path / "cut.tfrecord"), records)
    if gathered:  # records alternating between two mappings: index arrays over both
        other = _write(str(tmp_path / "other.tfrecord"), records)
        batch = next(iter(tfl.TFRecordDataset([path, other], batch_size=2 * len(records), memory_map=True,
                                              cycle_length=2)))
        assert batch._gathered is not None
    else:
        batch, = tfl.TFRecordReader(path, memory_map=True).record_batches()
    assert list(batch) == (records if not gathered else [r for pair in zip(records, records) for r in pair])
    os.truncate(path, cut)
    lost = next(k for k, (_, end) in enumerate(_frames(records)) if end - 4 > cut)
    position = 2 * lost if gathered else lost
    for _ in range(2):
        for name, read in _raw_reads(batch, position):
            if name == "last" and gathered:
                assert read() == records[-1]  # the other file's, intact
                continue
            first = len(records) - 1 if name == "last" else lost  # the record read, else the first lost
            with pytest.raises(TruncatedRecordError) as info:
                read()
            err = info.value
            assert (err.path, err.offset, err.index) == (path, _frames(records)[first][0], first), name


@pytest.mark.parametrize("threads", [1, 3])
def test_a_dataset_over_a_file_cut_short_raises_after_the_batches_before(tmp_path, threads):
    # Records of 32 KiB: the pipeline reads a few MiB ahead of the batch taken, so the pages
    # past 40 MiB are read (and parsed) after the cut, whichever way they go.
    n = 1_500
    records = list(tfl.encode_examples({"img": [bytes([i % 251]) * 32768 for i in range(n)], "i": np.arange(n)}))
    path = _write(str(tmp_path / "big.tfrecord"), records)
    ds = tfl.TFRecordDataset(path, SPEC, batch_size=16, num_threads=threads, memory_map=True)
    it = iter(ds)
    seen = next(it)["i"].tolist()
    os.truncate(path, (40 << 20) + 100)
    with pytest.raises(TruncatedRecordError) as info:
        for batch in it:
            assert list(batch["img"]) == [bytes([i % 251]) * 32768 for i in batch["i"].tolist()]
            seen += batch["i"].tolist()
    assert info.value.path == path
    assert seen == list(range(len(seen))) and 16 <= len(seen) < n


def test_a_dataloader_worker_over_a_file_cut_short_raises_in_the_main_process(tmp_path):
    import torch

    from tfrecord_lite.torch import TFRecordIterableDataset

    n = 1_500
    records = list(tfl.encode_examples({"img": [bytes([i % 251]) * 32768 for i in range(n)], "i": np.arange(n)}))
    path = _write(str(tmp_path / "big.tfrecord"), records)
    ds = TFRecordIterableDataset(path, SPEC, batch_size=16, memory_map=True)
    it = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="fork"))
    seen = [int(i) for i in next(it)["i"]]
    os.truncate(path, (40 << 20) + 100)
    with pytest.raises(TruncatedRecordError, match="while it was mapped|while mapped"):
        for batch in it:
            seen += [int(i) for i in batch["i"]]
    assert seen == list(range(len(seen))) and 16 <= len(seen) < n


def _run(code, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


_VIEW_PAST_THE_END = """
    import os, sys, faulthandler
    import tfrecord_lite as tfl
    path = sys.argv[1] if len(sys.argv) > 1 else {path!r}
    with tfl.TFRecordWriter(path) as w:
        w.write_many([b"x" * 3000] * 50)
    {before}
    batch = next(tfl.TFRecordReader(path, memory_map=True).record_batches())
    os.truncate(path, 4096)
    try:
        tfl.parse_example(batch, {{"x": tfl.FixedLenFeature([], bytes)}})
    except tfl.TFRecordError:
        print("guarded", flush=True)
    frames, starts, lengths = batch.segments[0]
    bytes(memoryview(frames)[starts[40]:starts[40] + lengths[40]])  # the user's own read of the pages
    print("not reached", flush=True)
"""


@pytest.mark.parametrize("before", [
    "",
    # faulthandler enabled after the handler was installed: each hands the fault on once
    "next(tfl.TFRecordReader(path, memory_map=True).record_batches()); faulthandler.enable()",
])
def test_a_read_of_a_view_past_the_new_end_still_ends_the_process(tmp_path, before):
    done = _run(_VIEW_PAST_THE_END.format(path=str(tmp_path / "f.tfrecord"), before=before))
    assert done.returncode == -signal.SIGBUS, done.stderr
    assert done.stdout.split() == ["guarded"]
    if before:
        assert "Fatal Python error: Bus error" in done.stderr


def test_the_pure_python_twin_does_not_guard_its_mapped_reads(tmp_path):
    done = _run(_VIEW_PAST_THE_END.format(path=str(tmp_path / "f.tfrecord"), before=""), TFRECORD_LITE_PURE_PYTHON="1")
    assert done.returncode == -signal.SIGBUS, done.stderr
    assert "guarded" not in done.stdout
