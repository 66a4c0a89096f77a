"""Frames and the reader/writer on top of them: vectors, round trips, buffers, streams,
hostile lengths and random bytes, on both backends."""

import ctypes
import io
import os
import threading
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite
from tfrecord_lite import DataLossError, RecordBatch, TFRecordReader, TFRecordWriter, _native
from tfrecord_lite.errors import InvalidArgumentError, RecordTooLargeError, TFRecordError, TruncatedRecordError

from .data.make_golden import FILES, GOLDEN_RECORDS

HERE = os.path.dirname(os.path.abspath(__file__))
COMPRESSIONS = [None, "gzip", "zlib"]
records_st = st.lists(st.binary(max_size=300), max_size=20)


def frames(backend, records):
    return bytes(backend.framing.encode_frames(records))


# FORMAT.md's frame: uint64 length, uint32 masked CRC of it, the data, uint32 masked CRC of
# the data; "each record costs 16 bytes of overhead".
FORMAT_SIZES = {"HEADER_BYTES": 8 + 4, "FOOTER_BYTES": 4, "OVERHEAD_BYTES": 16}


def test_frame_sizes_are_the_format_and_the_same_in_both_backends(backend):
    mine = {name: getattr(backend.framing, name) for name in FORMAT_SIZES}
    with _native.use(backend.other):
        theirs = {name: getattr(_native.framing, name) for name in FORMAT_SIZES}
    assert mine == theirs == FORMAT_SIZES
    assert {type(v) for v in mine.values()} == {int}
    # They describe the frames this backend writes.
    frame = frames(backend, [b"hello"])
    assert len(frame) == len(b"hello") + mine["OVERHEAD_BYTES"]
    assert frame[mine["HEADER_BYTES"]:-mine["FOOTER_BYTES"]] == b"hello"


def test_hello_vector(backend):
    assert frames(backend, [b"hello"]).hex() == "0500000000000000eab2043e68656c6c6fbb1f1c19"
    out = io.BytesIO()
    with TFRecordWriter(out) as w:
        w.write(b"hello")
    assert out.getvalue() == bytes.fromhex("0500000000000000eab2043e68656c6c6fbb1f1c19")


@pytest.mark.parametrize("name", sorted(FILES))
def test_golden_files_read(backend, name):
    path = os.path.join(HERE, "data", name)
    assert list(TFRecordReader(path)) == GOLDEN_RECORDS
    assert list(TFRecordReader(path, compression=FILES[name] or None)) == GOLDEN_RECORDS


@pytest.mark.parametrize("name", sorted(FILES))
def test_golden_files_written_byte_identical(backend, name):
    out = io.BytesIO()
    with TFRecordWriter(out, compression=FILES[name]) as w:
        for record in GOLDEN_RECORDS:
            w.write(record)
    with open(os.path.join(HERE, "data", name), "rb") as f:
        assert out.getvalue() == f.read()


@pytest.mark.parametrize("spelling", [None, "", "GZIP", "ZLIB", "gzip", "zlib"])
def test_compression_spellings(backend, spelling, tmp_path):
    path = tmp_path / "x.tfrecord"
    with TFRecordWriter(path, compression=spelling) as w:
        w.write(b"abc")
    assert list(TFRecordReader(path)) == [b"abc"]
    assert list(TFRecordReader(path, compression=spelling)) == [b"abc"]


def test_unknown_compression_is_a_clear_error(backend, tmp_path):
    with pytest.raises(TFRecordError, match="unknown compression 'lz4'"):
        TFRecordWriter(tmp_path / "x", compression="lz4")
    with pytest.raises(TFRecordError, match="on_corrupt"):
        TFRecordReader(b"", on_corrupt="ignore")


@settings(max_examples=60, deadline=None)
@given(records=records_st, compression=st.sampled_from(COMPRESSIONS), chunk=st.integers(64, 512))
def test_round_trip_any_records(backend, records, compression, chunk):
    out = io.BytesIO()
    with TFRecordWriter(out, compression=compression) as w:
        for r in records[: len(records) // 2]:
            w.write(r)
        w.write_many(records[len(records) // 2 :])
    data = out.getvalue()
    assert list(TFRecordReader(data)) == records
    assert list(TFRecordReader(io.BytesIO(data), compression=compression, chunk_size=chunk)) == records


@settings(max_examples=30, deadline=None)
@given(records=records_st)
def test_backends_agree(backend, records):
    from tfrecord_lite import _native

    def everything():
        F = _native.framing
        data = bytes(F.encode_frames(records))
        starts, lengths, *spans_rest = F.scan_spans(data)
        assert [starts.dtype, lengths.dtype] == [np.dtype(np.int64)] * 2
        skip = len(F.encode_frames(records[:1]))  # scan_block from the second frame on
        block, b_starts, b_lengths, *block_rest = F.scan_block(b"pad" + data, 3 + skip)
        appended = bytearray(b"prefix")
        sizes = [F.append_frame(appended, r) for r in records]
        return (data, F.scan_frames(data), starts.tolist(), lengths.tolist(), spans_rest, block,
                b_starts.tolist(), b_lengths.tolist(), block_rest, bytes(appended), sizes)

    ours = everything()
    with _native.use(backend.other):
        assert everything() == ours
    data, _, _, _, _, block, b_starts, b_lengths, _, appended, sizes = ours
    skip = len(frames(backend, records[:1]))
    assert block == data[skip:]
    assert [block[s:s + n] for s, n in zip(b_starts, b_lengths)] == records[1:]
    assert appended == b"prefix" + data
    assert sizes == [6 + len(frames(backend, records[: i + 1])) for i in range(len(records))]


def _read_all_spans(F, path, size, step):
    """Every read_spans result over the file as a reader uses it: the unverified tail kept
    and the buffer doubled when full. (absolute starts, lengths, status, absolute pos, value,
    eof) per call."""
    out, buf, pos, filled, base = [], bytearray(size), 0, 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            starts, lengths, pos, filled, status, value, eof = F.read_spans(fd, buf, pos, filled, base + filled,
                                                                            step, True, 1 << 20)
            assert [starts.dtype, lengths.dtype] == [np.dtype(np.int64)] * 2 and filled <= len(buf)
            out.append(((starts + base).tolist(), lengths.tolist(), status, base + pos, value, eof))
            if status != F.FRAME_OK or eof:
                return out
            assert filled == len(buf)  # it returns early only at a bad frame or the end
            rest = bytes(buf[pos:filled])
            base, filled, pos = base + pos, len(rest), 0
            if filled == len(buf):
                buf = bytearray(2 * len(buf))
            buf[:filled] = rest
    finally:
        os.close(fd)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.binary(max_size=300), max_size=40), size=st.integers(1, 1500), step=st.integers(1, 600),
       bad=st.none() | st.integers(0, 39), flip=st.sampled_from([0, 8, 12]), tail=st.integers(0, 20))
def test_read_spans_reads_and_verifies_what_a_scan_of_the_file_does(backend, tmp_path_factory, records, size,
                                                                    step, bad, flip, tail):
    """A file read into a buffer a step at a time, each read verified as it lands: the same
    records, and the same stop at a damaged frame or a cut-off tail, as a scan of the whole
    file; on both backends, call for call."""
    F = _native.framing
    data = bytearray(F.encode_frames(records))
    if bad is not None and bad < len(records):
        data[sum(16 + len(r) for r in records[:bad]) + flip] ^= 1
    data = bytes(data[:len(data) - tail])
    path = str(tmp_path_factory.mktemp("spans") / "f.tfrecord")
    with open(path, "wb") as f:
        f.write(data)
    calls = _read_all_spans(F, path, size, step)
    with _native.use(backend.other):
        assert _read_all_spans(_native.framing, path, size, step) == calls
    starts, lengths, pos, status, value = F.scan_spans(data, 0, -1, True, 1 << 20)
    assert [s for c in calls for s in c[0]] == starts.tolist()
    assert [n for c in calls for n in c[1]] == lengths.tolist()
    assert calls[-1][2:4] == (status, pos)
    assert calls[-1][5] == (status == F.FRAME_OK)  # the file's end, unless a bad frame came first


def test_read_spans_never_buffers_what_a_hostile_length_claims(backend, tmp_path):
    """A frame claiming 2**40 bytes (its length CRC valid) fills the buffer it was given and
    says how much more the frame wants; nothing larger is allocated."""
    F = _native.framing
    header = bytearray(F.encode_frames([b"x"]))[:12]
    header[:8] = (1 << 40).to_bytes(8, "little")
    header[8:12] = F.masked_crc32c(bytes(header[:8])).to_bytes(4, "little")
    path = tmp_path / "hostile.tfrecord"
    path.write_bytes(bytes(F.encode_frames([b"ok"])) + bytes(header) + b"y" * 5000)
    buf = bytearray(1024)
    fd = os.open(path, os.O_RDONLY)
    try:
        tracemalloc.start()
        starts, lengths, pos, filled, status, value, eof = F.read_spans(fd, buf, 0, 0, 0, 100)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        os.close(fd)
    assert (lengths.tolist(), pos, filled, status, eof) == ([2], 18, 1024, F.FRAME_OK, False)
    assert value == (1 << 40) + 4 - (1024 - 18 - 12) and peak < 1 << 20


def test_read_spans_rejects_what_cannot_be_read(backend, tmp_path):
    F = _native.framing
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory: read() fails with EISDIR
    try:
        with pytest.raises(OSError):
            F.read_spans(fd, bytearray(64), 0, 0, 0, 64)
        for pos, filled, offset, step in [(1, 0, 0, 8), (0, 65, 0, 8), (0, 0, -1, 8), (0, 0, 0, 0)]:
            with pytest.raises(InvalidArgumentError, match="do not fit a buffer of 64 bytes"):
                F.read_spans(fd, bytearray(64), pos, filled, offset, step)
    finally:
        os.close(fd)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3000), max_records=st.sampled_from([-1, 0, 1, 1023, 1024, 1025, 2048, 2500]),
       bad=st.none() | st.integers(0, 2999), flip=st.sampled_from([0, 8, 12]), tail=st.integers(0, 20))
def test_long_scans_agree(backend, n, max_records, bad, flip, tail):
    # Thousands of frames in one scan: the compiled scan grows its spans as it goes (and
    # makes records in batches of 1,024); a damaged frame (its length, length CRC or data)
    # or a cut-off tail stops it at the same place, with the same outcome, on both backends.
    F = _native.framing
    records = [b"r%d" % i for i in range(n)]
    data = bytearray(F.encode_frames(records))
    if bad is not None and bad < n:
        data[sum(16 + len(r) for r in records[:bad]) + flip] ^= 1
    data = bytes(data[:len(data) - tail])

    def scans():
        starts, lengths, *rest = F.scan_spans(data, 0, -1, True, 1 << 20, max_records)
        block, b_starts, b_lengths, *b_rest = F.scan_block(data, 0, -1, True, 1 << 20, max_records)
        got, *f_rest = F.scan_frames(data, 0, -1, True, 1 << 20, max_records)
        assert [data[a:a + m] for a, m in zip(starts.tolist(), lengths.tolist())] == got
        return starts.tolist(), lengths.tolist(), rest, block, b_starts.tolist(), b_rest, got, f_rest

    ours = scans()
    with _native.use(backend.other):
        assert scans() == ours
    got, (pos, status, _) = ours[6], ours[7]
    assert got == records[:len(got)]
    want = n if max_records < 0 else min(n, max_records)
    if bad is not None and bad < want and not tail:  # stopped at the damaged frame, which it names
        assert len(got) == bad and status != F.FRAME_OK
        assert pos == sum(16 + len(r) for r in records[:bad])
    elif bad is None and not tail:
        assert len(got) == want and status == F.FRAME_OK


class Trickle(io.RawIOBase):
    """A stream that hands out at most `step` bytes per read."""

    def __init__(self, data, step):
        self.data, self.pos, self.step = data, 0, step

    def readable(self):
        return True

    def readinto(self, b):
        n = min(self.step, len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_stream_in_chunk_sizes_1_to_32(backend, compression):
    out = io.BytesIO()
    records = [os.urandom(n) for n in (0, 1, 11, 12, 13, 100, 0, 700)]
    with TFRecordWriter(out, compression=compression) as w:
        w.write_many(records)
    for step in range(1, 33):
        assert list(TFRecordReader(Trickle(out.getvalue(), step), chunk_size=64)) == records, step


def test_buffer_types_scanned_in_place(backend):
    records = [b"a" * 10, b"", b"b" * 1000]
    data = frames(backend, records)
    import mmap

    mm = mmap.mmap(-1, len(data))
    mm.write(data)
    for buf in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8), mm):
        assert list(TFRecordReader(buf)) == records
    mm.close()


def test_no_over_read_past_view(backend):
    records = [b"xyz" * 7, b"q"]
    data = frames(backend, records)
    # The byte past the view would complete nothing, but a reader that ignores the view's
    # length would see it; the frame must still be reported as truncated.
    clipped = memoryview(data + b"x")[:-1]
    assert list(TFRecordReader(clipped)) == records
    short = memoryview(data[:-1] + b"\x00")[:-1]
    with pytest.raises(TruncatedRecordError):
        list(TFRecordReader(short))
    records_, pos, status, value = backend.framing.scan_frames(data, 0, len(data) - 1)
    assert records_ == records[:1] and status == backend.framing.FRAME_OK and value == 1


def hostile_header(length):
    head = length.to_bytes(8, "little")
    return head + tfrecord_lite.masked_crc32c(head).to_bytes(4, "little")


@pytest.mark.parametrize("length", [2**64 - 1, 2**63, 2**40, 2**31 + 1])
def test_maximal_length_header_fails_without_allocating(backend, length, tmp_path):
    data = hostile_header(length) + b"tiny"
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError) as info:
            list(TFRecordReader(data))
        assert info.value.offset == 0 and info.value.index == 0
        # Within max_record_bytes but past the end of a file or stream: truncation, not a giant buffer.
        path = tmp_path / "hostile.tfrecord"
        path.write_bytes(data)
        for source in (str(path), io.BytesIO(data)):
            with pytest.raises(TruncatedRecordError):
                list(TFRecordReader(source, max_record_bytes=2**64 - 1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_too_large_limit_is_configurable(backend):
    data = frames(backend, [b"x" * 100])
    assert list(TFRecordReader(data, max_record_bytes=100)) == [b"x" * 100]
    with pytest.raises(RecordTooLargeError, match="max_record_bytes=99"):
        list(TFRecordReader(data, max_record_bytes=99))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), compression=st.sampled_from(["auto", None, "gzip", "zlib"]))
def test_random_bytes_give_records_or_data_loss(backend, data, compression):
    try:
        for record in TFRecordReader(data, compression=compression):
            assert isinstance(record, bytes)
    except DataLossError as exc:
        assert exc.path == "<buffer>"


@settings(max_examples=100, deadline=None)
@given(records=st.lists(st.binary(max_size=40), min_size=1, max_size=5), junk=st.binary(max_size=50))
def test_valid_prefix_then_junk(backend, records, junk):
    data = frames(backend, records) + junk
    got = []
    try:
        for record in TFRecordReader(data, compression=None):
            got.append(record)
    except DataLossError as exc:
        assert exc.index >= len(records) and exc.offset >= len(data) - len(junk)
    assert got[: len(records)] == records


def test_check_crc_false_skips_data_crc_only(backend):
    data = bytearray(frames(backend, [b"payload"]))
    data[-1] ^= 1
    assert list(TFRecordReader(bytes(data), check_crc=False)) == [b"payload"]
    data[3] ^= 1  # length CRC still guards the length field
    with pytest.raises(DataLossError):
        list(TFRecordReader(bytes(data), check_crc=False))


def test_paths_and_file_objects(backend, tmp_path):
    path = tmp_path / "f.tfrecord"
    with TFRecordWriter(str(path)) as w:
        w.write(b"one")
        w.write(memoryview(b"two"))
        w.write(np.arange(3, dtype=np.uint8))
    expected = [b"one", b"two", b"\x00\x01\x02"]
    assert list(TFRecordReader(path)) == expected
    with open(path, "rb") as f:
        assert list(TFRecordReader(f)) == expected
    with TFRecordReader(str(path)) as r:
        assert next(r) == b"one"
        assert r.path == str(path)


def test_errors_name_file_offset_index(backend, tmp_path):
    path = tmp_path / "bad.tfrecord"
    data = bytearray(frames(backend, [b"a", b"bb", b"ccc"]))
    data[17 + 18 + 12] ^= 0x40  # first data byte of record 2
    path.write_bytes(bytes(data))
    with pytest.raises(tfrecord_lite.CorruptRecordError) as info:
        list(TFRecordReader(path))
    err = info.value
    assert (err.path, err.offset, err.index) == (str(path), 35, 2)
    assert str(path) in str(err) and "record 2" in str(err) and "byte offset 35" in str(err)
    assert "corrupted record at 47" in str(err)  # TensorFlow's wording and offset
    assert "on_corrupt='skip'" in str(err)


def test_truncated_compressed_stream(backend):
    out = io.BytesIO()
    with TFRecordWriter(out, compression="gzip") as w:
        w.write_many([os.urandom(500) for _ in range(10)])
    data = out.getvalue()
    for cut in (5, len(data) // 2, len(data) - 1):
        with pytest.raises(DataLossError):
            list(TFRecordReader(data[:cut]))


# -- RecordBatch: records kept in their read blocks ----------------------------------------

@settings(max_examples=60, deadline=None)
@given(records=records_st, chunk=st.integers(64, 700), data=st.data())
def test_record_batches_behave_as_the_record_list(backend, records, chunk, data):
    from tfrecord_lite import RecordBatch

    blob = frames(backend, records)
    blocks = list(TFRecordReader(io.BytesIO(blob), chunk_size=chunk).record_batches())
    assert all(isinstance(b, RecordBatch) for b in blocks)
    whole = RecordBatch.concat(blocks)
    assert len(whole) == len(records) and list(whole) == records
    assert [whole[i] for i in range(-len(records), len(records))] == records + records
    start = data.draw(st.integers(-25, 25) | st.none())
    stop = data.draw(st.integers(-25, 25) | st.none())
    step = data.draw(st.integers(1, 4) | st.none())
    sliced = whole[start:stop:step]
    assert isinstance(sliced, RecordBatch) and list(sliced) == records[start:stop:step]
    assert list(whole[::-1]) == records[::-1]  # negative steps give a list
    assert list(sliced + whole) == records[start:stop:step] + records
    with pytest.raises(IndexError):
        whole[len(records)]
    size = data.draw(st.integers(1, 7))
    batches = list(TFRecordReader(io.BytesIO(blob), chunk_size=chunk).record_batches(size))
    assert [list(b) for b in batches] == [records[i:i + size] for i in range(0, len(records), size)]
    dropped = list(TFRecordReader(io.BytesIO(blob), chunk_size=chunk).record_batches(size, drop_remainder=True))
    assert [len(b) for b in dropped] == [size] * (len(records) // size)


@settings(max_examples=60, deadline=None)
@given(records=records_st, chunk=st.integers(64, 700), start=st.integers(0, 5), source=st.sampled_from(["stream", "bytes"]))
def test_blocks_in_place_locate_every_record_and_say_where_each_block_starts(backend, records, chunk, start, source):
    blob = frames(backend, records)
    offsets = np.cumsum([0] + [16 + len(r) for r in records]).tolist()  # each frame's offset
    start = min(start, len(records))
    reader = TFRecordReader(io.BytesIO(blob) if source == "stream" else blob, chunk_size=chunk,
                            start_offset=offsets[start], start_index=start)
    got = []
    for frames_, starts, lengths in reader.blocks_in_place():
        assert starts.dtype == lengths.dtype == np.int64 and len(starts) == len(lengths) > 0
        # The block's first frame: its offset in the file and its number there.
        assert (reader.batch_offset, reader.batch_index) == (offsets[start + len(got)], start + len(got))
        assert (frames_ is blob) == (source == "bytes")  # immutable bytes are scanned where they lie
        with memoryview(frames_) as view:
            got += [bytes(view[s:s + n]) for s, n in zip(starts.tolist(), lengths.tolist())]
    assert got == records[start:]


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.binary(max_size=300), min_size=1, max_size=120), chunk=st.integers(64, 700),
       holds=st.lists(st.integers(0, 6), min_size=120, max_size=120))
def test_read_buffers_are_reused_only_once_their_blocks_are_gone(backend, records, chunk, holds):
    """Block i is held for holds[i] more blocks (6: to the end) while the reader goes on:
    every block held keeps its records though the reader refills freed buffers."""
    blob = frames(backend, records)
    reader = TFRecordReader(io.BytesIO(blob), chunk_size=chunk)
    held, at, got = {}, 0, []
    for i, block in enumerate(reader.record_batches()):
        held = {j: b for j, b in held.items() if holds[j] == 6 or j + holds[j] >= i}
        held[i] = (block, records[at:at + len(block)])
        got += list(block)
        at += len(block)
        for j, (b, want) in held.items():
            assert list(b) == want, (i, j)
    assert got == records


def test_buffer_pool_hands_out_only_free_buffers():
    from tfrecord_lite.reader import BufferPool

    pool = BufferPool(keep=2000)  # bytes: two buffers of 1,000
    a = pool.take(1000)
    b = pool.take(1000)  # a new one
    assert a is not b and len(a) == len(b) == 1000
    view = memoryview(b)[10:20]  # what a block keeps of its buffer
    del b
    c = pool.take(1000)  # both in use: a third, not kept
    assert all(c is not x for x in pool._buffers) and len(pool._buffers) == 2
    del a
    ids = [id(x) for x in pool._buffers]  # ids: a reference would keep a buffer in use
    assert id(pool.take(1000)) == ids[0]
    assert [id(x) for x in pool._buffers] == ids[::-1]  # a buffer taken goes to the back of the search
    assert id(pool.take(501)) == ids[0]  # up to twice the size asked for
    assert id(pool.take(499)) not in ids  # a buffer more than twice as long is not taken
    assert id(pool.take(1001)) not in ids  # nor one too short
    del view
    assert id(pool.take(1000)) == ids[1]  # free again, and first in line
    assert [id(x) for x in pool._buffers] == ids


def test_readers_given_one_buffer_pool_share_its_buffers(backend, monkeypatch):
    """A reader reads into the pool it is given: once the first reader's blocks are gone,
    the second reads into the same buffers and makes none."""
    from tfrecord_lite.reader import BufferPool

    blob = frames(backend, [b"r%d" % i * 50 for i in range(2000)])
    made, new_buffer = [], _native.framing.new_buffer
    monkeypatch.setattr(_native.framing, "new_buffer", lambda n: made.append(n) or new_buffer(n))
    pool = BufferPool(keep=4 * 4096)
    first = [list(b) for b in TFRecordReader(io.BytesIO(blob), chunk_size=4096, buffers=pool).record_batches()]
    assert made and pool._buffers and len(first) > 4
    made.clear()
    second = [list(b) for b in TFRecordReader(io.BytesIO(blob), chunk_size=4096, buffers=pool).record_batches()]
    assert second == first and made == []


def test_readers_given_no_pool_share_one(backend, monkeypatch):
    """Readers made without a pool read into one the process shares: a reader of the next
    file reads into the buffers the last one's blocks left, and makes none."""
    from tfrecord_lite import reader

    monkeypatch.setattr(reader, "_shared_pool", reader.BufferPool(reader._SHARED_POOL_BYTES))
    blob = frames(backend, [b"r%d" % i * 50 for i in range(2000)])
    made, new_buffer = [], _native.framing.new_buffer
    monkeypatch.setattr(_native.framing, "new_buffer", lambda n: made.append(n) or new_buffer(n))
    first = [list(b) for b in TFRecordReader(io.BytesIO(blob), chunk_size=4096).record_batches()]
    assert made and len(first) > 4
    made.clear()
    second = [list(b) for b in TFRecordReader(io.BytesIO(blob), chunk_size=4096).record_batches()]
    assert second == first and made == []


def test_reads_take_a_chunk_whatever_buffer_the_pool_hands_out(backend):
    """A pool hands out buffers of up to twice the size asked for. A reader still reads a
    chunk at a time (more only for a record that needs it), so what a damaged compressed
    stream loses at its end does not depend on what the pool held before."""
    from tfrecord_lite.reader import BufferPool

    class Reads(io.BytesIO):
        def readinto(self, b):
            sizes.append(len(b))
            return super().readinto(b)

    records = [b"r%03d" % i * 5 for i in range(100)]  # 36-byte frames
    pool = BufferPool(keep=1 << 20)
    pool.take(127)  # left free in the pool, and what take(64) hands out
    sizes = []
    got = list(TFRecordReader(Reads(frames(backend, records)), chunk_size=64, buffers=pool))
    assert got == records and max(sizes) == 64


def test_a_buffer_pool_holds_no_more_than_its_bytes_and_buffers():
    from tfrecord_lite.reader import BufferPool

    pool = BufferPool(keep=1 << 20, most=2)
    held = [pool.take(100) for _ in range(3)]  # all in use: the third is not kept
    assert [id(b) for b in pool._buffers] == [id(b) for b in held[:2]] and sum(map(len, pool._buffers)) == 200
    pool = BufferPool(keep=3000)
    held = [pool.take(1000), pool.take(1500), pool.take(1000)]  # the third does not fit
    assert [len(b) for b in pool._buffers] == [1000, 1500] and sum(map(len, pool._buffers)) == 2500
    assert all(b is not held[2] for b in pool._buffers)
    pool.drop_held()  # both in use: let go of them, to go with whatever holds them
    assert pool._buffers == [] and sum(map(len, pool._buffers)) == 0
    held.append(pool.take(3000))  # fits now
    assert pool._buffers == [held[-1]] and sum(map(len, pool._buffers)) == 3000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_pool_of_its_own():
    """A fork while another thread held the shared pool's lock: the child takes buffers from
    a pool of its own instead of waiting on a lock no thread of its will release."""
    from tfrecord_lite import reader

    pool = reader._shared_pool
    with pool._lock:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 once it has a buffer from an empty pool of its own
            try:
                os._exit(0 if len(pool.take(100)) == 100 and sum(map(len, pool._buffers)) <= 100 else 1)
            finally:
                os._exit(2)
    for _ in range(200):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the child waited on the parent's lock")


def test_a_dataset_leaves_interleaved_raw_batches_in_its_read_buffers(tmp_path, monkeypatch):
    """Batches interleaved record by record from 2 files (2 threads) are RecordBatches over
    the buffers the files were read into, records in any order: no copy, no buffer of
    another kind, and the order is TF's."""
    N = 45000
    paths = []
    for f in range(2):
        paths.append(str(tmp_path / f"g{f}.tfrecord"))
        with TFRecordWriter(paths[-1]) as w:
            for i in range(N):
                w.write(b"%d-%d-" % (f, i) + b"x" * 200)
    made, new_buffer = [], _native.framing.new_buffer
    monkeypatch.setattr(_native.framing, "new_buffer", lambda n: made.append(new_buffer(n)) or made[-1])
    batches = list(tfrecord_lite.TFRecordDataset(paths, batch_size=64, num_threads=2))
    assert [r for b in batches for r in b] == [b"%d-%d-" % (f, i) + b"x" * 200 for i in range(N) for f in range(2)]
    assert all(type(b) is RecordBatch and b.framed for b in batches)
    read_into = {id(buf) for buf in made}
    assert all(id(s[0]) in read_into for b in batches for s in b.segments)
    # Record by record: a run per record, over the blocks of both files.
    assert len(batches[5].segments) == 64 and len({id(s[0]) for s in batches[5].segments}) == 2
    # Every batch kept: the files' bytes held once, in 1 MiB read buffers (each a little
    # short of full: a chunk's unfinished last record moves on to the next buffer).
    assert sum(map(len, made)) <= 1.25 * sum(map(os.path.getsize, paths))


def test_a_dataset_reuses_read_buffers_that_whole_batches_keep(tmp_path, monkeypatch):
    """Records left in their read buffers keep them for as long as their batch lives: with
    batches of many buffers in flight (prefetch, the one the consumer holds), the pool must
    keep as many as are in use at once, or every chunk is read into a fresh buffer.
    Scaled down: 64 KiB chunks, a 512 KiB read-ahead, batches of 2 MiB (32 chunks)."""
    from tfrecord_lite import _pipeline

    monkeypatch.setattr(_pipeline, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(_pipeline, "BLOCK_CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(_pipeline, "_PIECE_BYTES_PER_THREAD", 512 << 10)
    paths = []
    for f in range(2):
        paths.append(str(tmp_path / f"big{f}.tfrecord"))
        with TFRecordWriter(paths[-1]) as w:
            w.write_many([b"%d-%d-" % (f, i) + b"x" * 4000 for i in range(4000)])
    made, new_buffer = [], _native.framing.new_buffer
    monkeypatch.setattr(_native.framing, "new_buffer", lambda n: made.append(n) or new_buffer(n))
    got = 0
    for i, batch in enumerate(tfrecord_lite.TFRecordDataset(paths, batch_size=512)):
        assert batch[0] == b"%d-%d-" % divmod(512 * i, 4000) + b"x" * 4000
        got += len(batch)
    assert got == 8000
    fresh = made.count(64 << 10)
    # 32 MB read in 64 KiB chunks: about 500 reads, of which the pipeline holds about 200 at
    # once (2 prefetched tasks of 2 batches, the pieces read ahead). A pool of the
    # read-ahead's size, 24 buffers, made a fresh one for 454 of them.
    assert 0 < fresh < 300, fresh


def test_record_batches_rejects_bad_batch_size(backend):
    with pytest.raises(TFRecordError, match="batch_size"):
        TFRecordReader(b"").record_batches(0)


def test_record_batch_indexing_is_strict(backend):
    from tfrecord_lite import RecordBatch

    whole = RecordBatch.concat(list(TFRecordReader(frames(backend, [b"a", b"bc"])).record_batches()))
    assert whole[np.int64(1)] == b"bc" and whole[-2] == b"a"
    with pytest.raises(TypeError):
        whole[1.0]
    assert tfrecord_lite.decode_examples(RecordBatch()) == []


# -- record_spans: where the records are, nothing copied -----------------------------------

@settings(max_examples=60, deadline=None)
@given(records=records_st, compression=st.sampled_from(COMPRESSIONS), chunk=st.integers(64, 700),
       check_crc=st.booleans())
def test_record_spans_locate_every_record(backend, records, compression, chunk, check_crc):
    out = io.BytesIO()
    with TFRecordWriter(out, compression) as w:
        w.write_many(records)
    reader = TFRecordReader(out.getvalue(), check_crc=check_crc, chunk_size=chunk)
    spans = list(reader.record_spans())
    assert all(o.dtype == n.dtype == np.int64 and len(o) == len(n) > 0 for o, n in spans)
    offsets = np.concatenate([o for o, _ in spans] or [np.zeros(0, np.int64)])
    lengths = np.concatenate([n for _, n in spans] or [np.zeros(0, np.int64)])
    stream = frames(backend, records)  # the decompressed stream the offsets count in
    assert [stream[o:o + n] for o, n in zip(offsets.tolist(), lengths.tolist())] == records
    assert reader.records_read == len(records)


@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.binary(min_size=1, max_size=60), min_size=3, max_size=12), data=st.data())
def test_record_spans_skip_what_the_records_skip(backend, records, data):
    stream = bytearray(frames(backend, records))
    bad = data.draw(st.integers(0, len(records) - 1))
    at = sum(len(r) + 16 for r in records[:bad]) + data.draw(st.integers(0, len(records[bad]) + 15))
    stream[at] ^= 0xFF
    skipping = TFRecordReader(bytes(stream), on_corrupt="skip", chunk_size=64)
    spans = [(o, n) for offsets, lengths in skipping.record_spans() for o, n in zip(offsets, lengths)]
    kept = TFRecordReader(bytes(stream), on_corrupt="skip", chunk_size=64)
    assert [bytes(stream[o:o + n]) for o, n in spans] == list(kept)
    assert [(e.offset, e.index) for e in skipping.skipped] == [(e.offset, e.index) for e in kept.skipped]
    assert len(skipping.skipped) >= 1


# -- damaged compressed streams: errors name the file, the record and its offset -------------

def _read_until_error(path, **kw):
    got = []
    with pytest.raises(DataLossError) as info:
        for record in TFRecordReader(path, **kw):
            got.append(record)
    return got, info.value


def _check_location(err, path, records, got):
    assert got == records[:len(got)]
    assert (err.path, err.index, err.offset) == (str(path), len(got), sum(len(r) + 16 for r in got))
    assert f"record {len(got)}" in str(err) and f"byte offset {err.offset}" in str(err) and str(path) in str(err)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 4000), min_size=1, max_size=12), compression=st.sampled_from(["gzip", "zlib"]),
       cut=st.floats(0, 1, exclude_max=True), chunk=st.sampled_from([64, 1000, 1 << 18]))
def test_truncated_compressed_stream_error_names_path_offset_and_record(backend, tmp_path, sizes, compression,
                                                                       cut, chunk):
    rng = np.random.default_rng(len(sizes))
    records = [rng.bytes(n) for n in sizes]  # incompressible: a cut lands among the records
    path = tmp_path / f"a.tfrecord.{compression}"
    with TFRecordWriter(path, compression) as w:
        w.write_many(records)
    data = path.read_bytes()
    path.write_bytes(data[:1 + int(cut * (len(data) - 1))])
    got, err = _read_until_error(path, compression=compression, chunk_size=chunk)
    assert type(err) is DataLossError and "ends before its end marker" in str(err)
    _check_location(err, path, records, got)


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_corrupt_compressed_stream_error_names_path_offset_and_record(backend, tmp_path, compression):
    records = [bytes([i]) * (300 * i) for i in range(1, 9)]
    path = tmp_path / "a.tfrecord.z"
    with TFRecordWriter(path, compression) as w:
        w.write_many(records)
    data = bytearray(path.read_bytes())
    # gzip ends with CRC32 and size, zlib with Adler-32: a wrong checksum fails at the end,
    # which small reads reach with at most the output of the last one (in the last record) lost.
    data[-8 if compression == "gzip" else -4] ^= 0x55
    path.write_bytes(bytes(data))
    got, err = _read_until_error(path, chunk_size=64)
    assert type(err) is DataLossError and f"corrupt {compression} stream" in str(err)
    _check_location(err, path, records, got)
    assert len(got) >= len(records) - 1
    # Damage inside the deflate data: whatever is reported names the record it stopped at.
    for at in range(12, len(data) - 8, 37):
        broken = bytearray(path.read_bytes())
        broken[at] ^= 0xFF
        path.write_bytes(bytes(broken))
        got, err = _read_until_error(path)
        _check_location(err, path, records, got)
        path.write_bytes(bytes(data))


def test_shared_words_store_and_load(backend):
    """The flag a batch segment shares with another process: one int32 word, written with
    release and read with acquire ordering, in place in any writable buffer."""
    import mmap

    shared = mmap.mmap(-1, 64)
    _native.framing.store_release(shared, 0, 1)
    _native.framing.store_release(shared, 15, -7)
    assert _native.framing.load_acquire(shared, 0) == 1 and _native.framing.load_acquire(shared, 15) == -7
    assert np.frombuffer(shared, np.int32).tolist() == [1] + [0] * 14 + [-7]
    _native.framing.store_release(shared, 0, 0)
    assert _native.framing.load_acquire(shared, 0) == 0
    for index in (-1, 16):
        with pytest.raises(InvalidArgumentError, match="aligned int32"):
            _native.framing.load_acquire(shared, index)
    with pytest.raises(InvalidArgumentError, match="aligned int32"):
        _native.framing.store_release(memoryview(shared)[1:9], 0, 1)  # not 4-byte aligned
    with pytest.raises(BufferError, match="not writable"):
        _native.framing.store_release(b"\0\0\0\0", 0, 1)


def test_input_offset_follows_a_file_read_for_spans(backend, tmp_path):
    """A file read by path for spans or blocks in place (read_spans, by offset) still says how
    far it has read, as progress bars ask: rising, and the file's size at its end."""
    path = tmp_path / "f.tfrecord"
    with TFRecordWriter(str(path)) as w:
        w.write_many(b"%06d" % i * 100 for i in range(3000))  # 1.8 MB: several chunks
    size = path.stat().st_size
    for blocks in (lambda r: r.record_spans(), lambda r: r.blocks_in_place()):
        reader = TFRecordReader(str(path), chunk_size=1 << 18)
        seen = [reader.input_offset for _ in blocks(reader)]
        assert seen == sorted(seen) and 0 < seen[0] < size and seen[-1] == reader.input_offset == size


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_input_offset_counts_what_came_through_a_pipe(backend, tmp_path, compression):
    """A pipe has no position to tell: input_offset was None on one, so progress bars stood
    still and stats reported 0 bytes. It counts the bytes read from it (compressed ones)."""
    path = tmp_path / "f.tfrecord"
    with TFRecordWriter(str(path), compression=compression) as w:
        w.write_many(os.urandom(2000) for _ in range(1000))  # 2 MB: several chunks
    data = path.read_bytes()
    rfd, wfd = os.pipe()
    feeder = threading.Thread(target=lambda: (_write_all(wfd, data), os.close(wfd)))
    feeder.start()
    with open(rfd, "rb") as pipe:
        reader = TFRecordReader(pipe, compression=compression, chunk_size=1 << 18)
        seen = [reader.input_offset for _ in reader.frame_blocks()]
        assert len(seen) > 2 and seen == sorted(seen) and reader.records_read == 1000
        assert reader.input_offset == len(data)
    feeder.join(10)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@settings(max_examples=50, deadline=None)
@given(records=st.lists(st.binary(max_size=40_000), max_size=8), kinds=st.lists(st.integers(0, 3), min_size=8, max_size=8),
       start=st.binary(max_size=20))
def test_encode_frames_takes_every_buffer_kind_at_once(backend, records, kinds, start):
    """The core frames a whole list in one pass (without the GIL past 64 KiB): bytes,
    bytearray, memoryview and uint8 arrays, after whatever out holds, as the twin does and
    as frames appended one at a time are."""
    made = [(bytes, bytearray, memoryview, lambda r: np.frombuffer(r, np.uint8))[k](r) for k, r in zip(kinds, records)]
    out = backend.framing.encode_frames(made, bytearray(start))
    one_by_one = bytearray(start)
    for r in records:
        backend.framing.append_frame(one_by_one, r)
    assert out == one_by_one
    with _native.use(backend.other):
        assert _native.framing.encode_frames(made, bytearray(start)) == out


@pytest.mark.parametrize("bad", [3, "text", None, np.arange(4)[::2]])
def test_encode_frames_with_a_bad_record_appends_nothing(backend, bad):
    out = bytearray(b"kept")
    with pytest.raises((TypeError, ValueError, BufferError)):
        backend.framing.encode_frames([b"a", bad, b"b"], out)
    assert out == b"kept"


OBJECT_BUFFERS = {
    "object array": lambda: np.array([b"alice", b"bob"], dtype=object),
    "memoryview of one": lambda: memoryview(np.array([b"alice"], dtype=object)),
    "object field": lambda: np.zeros(2, [("a", "i4"), ("b", "O")]),
    "ctypes py_object": lambda: (ctypes.py_object * 2)(),
}


@pytest.mark.parametrize("make", OBJECT_BUFFERS.values(), ids=list(OBJECT_BUFFERS))
def test_a_buffer_of_object_pointers_is_not_a_record(backend, make):
    """Its bytes are the objects' addresses: framed, they would read back as garbage."""
    F = backend.framing
    out = bytearray(b"kept")
    with pytest.raises(TypeError, match="pointers to Python objects .*encode the values to bytes first"):
        F.encode_frames([b"a", make()], out)
    with pytest.raises(TypeError, match="pointers to Python objects"):
        F.append_frame(out, make())
    with pytest.raises(TypeError, match="pointers to Python objects"):
        F.check_buffer(make())
    assert out == b"kept"
    # A field named O is a name, not an object type; numbers and bytes stay records.
    for ok in (np.zeros(2, [("O", "i4")]), np.arange(3.0), memoryview(b"abc")[1:], bytearray(b"x"), b"y"):
        F.check_buffer(ok)
        assert F.encode_frames([ok]) == F.encode_frames([bytes(memoryview(ok).cast("B"))])


@pytest.mark.parametrize("make", OBJECT_BUFFERS.values(), ids=list(OBJECT_BUFFERS))
def test_a_buffer_of_object_pointers_is_not_input(backend, make):
    """Read, checksummed, parsed or encoded as a value, the addresses would be taken for data:
    a reader saw a 'corrupt' file, parse_example a 'malformed' Example, and encode_example
    wrote the pointers as a bytes value."""
    with pytest.raises(tfrecord_lite.ArgumentTypeError, match="<buffer>: cannot read records .*pointers to Python"):
        TFRecordReader(make())
    with pytest.raises(TypeError, match="pointers to Python objects"):
        tfrecord_lite.crc32c(make())
    spec = {"a": tfrecord_lite.VarLenFeature(np.bytes_)}
    good = tfrecord_lite.encode_example({"a": [b"x"]})
    with pytest.raises(tfrecord_lite.ArgumentTypeError, match="record 1: .* is not a serialized record .*pointers"):
        tfrecord_lite.parse_example([good, make()], spec)
    with pytest.raises(tfrecord_lite.FeatureSpecError, match="feature 'a': cannot encode a memoryview .*pointers"):
        tfrecord_lite.encode_example({"a": [memoryview(make())]})
    # What stays input: byte buffers of any type, and a memoryview value's bytes.
    assert list(TFRecordReader(np.frombuffer(F_ONE, np.uint8))) == [b"x"]
    assert tfrecord_lite.crc32c(np.frombuffer(b"abc", np.uint8)) == tfrecord_lite.crc32c(b"abc")
    assert tfrecord_lite.encode_example({"a": [memoryview(b"xyz")[1:]]}) == tfrecord_lite.encode_example({"a": [b"yz"]})


F_ONE = bytes(_native.framing.encode_frames([b"x"]))
