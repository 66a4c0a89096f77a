"""Exhaustive corruption of a small file: every truncation point and every bit flip, under
each on_corrupt policy, on both backends, from memory, from a stream, from a file read by
path (its spans read and verified in one core call) and from a mapped file; and damaged
compressed streams."""

import gzip
import io
import itertools
import os
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfrecord_lite import (
    CorruptRecordError,
    DataLossError,
    RecordTooLargeError,
    TFRecordReader,
    TruncatedRecordError,
)

RECORDS = [b"alpha", b"", b"gamma-gamma", bytes(range(40))]


@pytest.fixture
def clean(backend):
    data = bytes(backend.framing.encode_frames(RECORDS))
    starts = [0]
    for r in RECORDS:
        starts.append(starts[-1] + 16 + len(r))
    return data, starts


def record_at(starts, offset):
    """Index of the record whose frame contains byte offset."""
    return max(i for i, s in enumerate(starts[:-1]) if s <= offset)


_FILES = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("corrupt")


def _open(data, on_corrupt, source):
    if source in ("file", "mapped"):  # data: the path of a file holding them
        reader = TFRecordReader(data, compression=None, on_corrupt=on_corrupt, chunk_size=64,
                                memory_map=source == "mapped")
        assert reader.mapped == (source == "mapped")  # an empty file too (nothing to map, nothing to read)
        return reader
    return TFRecordReader(io.BytesIO(data) if source == "stream" else data, compression=None,
                          on_corrupt=on_corrupt, chunk_size=64)


def read(data, on_corrupt, source, folder=None):
    """The reader's records and skipped errors; record_batches() must agree exactly."""
    if source in ("file", "mapped"):  # a new file each time: no file is rewritten under a mapping
        path = os.path.join(folder, f"{next(_FILES)}.tfrecord")
        with open(path, "wb") as f:
            f.write(data)
        data = path
    batches = _open(data, on_corrupt, source)
    try:
        in_place = ("ok", [r for b in batches.record_batches() for r in b], [str(e) for e in batches.skipped])
    except DataLossError as exc:
        in_place = ("error", type(exc), str(exc))
    reader = _open(data, on_corrupt, source)
    try:
        records = list(reader)
    except DataLossError as exc:
        assert in_place == ("error", type(exc), str(exc))
        raise
    assert in_place == ("ok", records, [str(e) for e in reader.skipped])
    return records, reader.skipped


@pytest.mark.parametrize("source", ["buffer", "stream", "file", "mapped"])
def test_truncation_at_every_offset(clean, source, folder):
    data, starts = clean
    for cut in range(len(data)):
        if cut in starts:
            k = starts.index(cut)
            assert read(data[:cut], "raise", source, folder)[0] == RECORDS[:k]
            continue
        k = record_at(starts, cut)
        with pytest.raises(TruncatedRecordError) as info:
            read(data[:cut], "raise", source, folder)
        assert (info.value.offset, info.value.index) == (starts[k], k), cut
        assert f"byte offset {starts[k]}" in str(info.value)
        for policy in ("skip", "stop"):
            got, skipped = read(data[:cut], policy, source, folder)
            assert got == RECORDS[:k], (cut, policy)
            assert len(skipped) == 1 and isinstance(skipped[0], TruncatedRecordError)


@pytest.mark.parametrize("source", ["buffer", "stream", "file", "mapped"])
def test_every_bit_flip(clean, source, folder):
    data, starts = clean
    for bit in range(len(data) * 8):
        bad = bytearray(data)
        bad[bit // 8] ^= 1 << (bit % 8)
        bad = bytes(bad)
        k = record_at(starts, bit // 8)
        in_header = bit // 8 - starts[k] < 12
        with pytest.raises(DataLossError) as info:
            read(bad, "raise", source, folder)
        err = info.value
        assert type(err) in (CorruptRecordError, RecordTooLargeError, TruncatedRecordError)
        assert (err.offset, err.index) == (starts[k], k), bit
        if not in_header:
            assert type(err) is CorruptRecordError
            assert f"corrupted record at {starts[k] + 12}" in str(err)
        else:
            assert f"corrupted record at {starts[k]}" in str(err)

        got, skipped = read(bad, "stop", source, folder)
        assert got == RECORDS[:k] and len(skipped) == 1

        got, skipped = read(bad, "skip", source, folder)
        assert got == RECORDS[:k] + RECORDS[k + 1 :], bit
        assert skipped[0].index == k and skipped[0].offset == starts[k]


def test_skip_resynchronises_after_garbage(backend, tmp_path):
    good = bytes(backend.framing.encode_frames(RECORDS))
    garbage = bytes(range(256)) * 3
    for source in ("buffer", "stream", "file"):
        got, skipped = read(garbage + good, "skip", source, tmp_path)
        assert got == RECORDS
        assert [(e.offset, e.index) for e in skipped] == [(0, 0)]
        # A valid header whose data runs into garbage: the frame is dropped whole, then the
        # garbage after it is skipped until the next valid header.
        got, skipped = read(good[:16] + garbage + good, "skip", source, tmp_path)
        assert got == RECORDS
        assert [(e.offset, e.index) for e in skipped] == [(0, 0), (21, 1)]


def test_skip_logs_what_it_dropped(backend, caplog):
    data = bytearray(backend.framing.encode_frames(RECORDS))
    data[13] ^= 1
    with caplog.at_level("WARNING", logger="tfrecord_lite"):
        got, skipped = read(bytes(data), "skip", "buffer")
    assert got == RECORDS[1:]
    assert "record 0" in caplog.text and "on_corrupt='skip'" in caplog.text


def test_trailing_garbage_dropped_under_skip(backend):
    data = bytes(backend.framing.encode_frames(RECORDS)) + b"\x07" * 30
    got, skipped = read(data, "skip", "buffer")
    assert got == RECORDS and len(skipped) == 1


@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.binary(max_size=200), max_size=8), trailing=st.sampled_from([b"\0", b"xx", None]),
       chunk=st.sampled_from([64, 100, 1 << 18]), source=st.sampled_from(["buffer", "stream", "file"]))
def test_bytes_after_a_zlib_stream_are_reported_after_its_records(backend, tmp_path, records, trailing, chunk,
                                                                 source):
    """Every record of the stream comes first, then the error names the end of the stream as
    record len(records). The output of the read that found the end marker was dropped with
    the error, so it named record 0 at byte 0 of a file whose records were all intact."""
    framed = bytes(backend.framing.encode_frames(records))
    packed = zlib.compress(framed)
    packed += packed if trailing is None else trailing  # None: a second zlib stream
    path = tmp_path / "t.tfrecord.zz"
    path.write_bytes(packed)
    src = {"buffer": packed, "stream": io.BytesIO(packed), "file": path}[source]
    got = []
    with pytest.raises(DataLossError, match="trailing bytes after the end of the zlib stream") as info:
        got.extend(TFRecordReader(src, compression="zlib", chunk_size=chunk))
    assert got == records
    assert (info.value.index, info.value.offset) == (len(records), len(framed))
    assert info.value.path == (str(path) if source == "file" else f"<{source}>")


def test_bytes_after_a_zlib_stream_are_found_whatever_the_read_size(backend):
    """Also when the stream's last byte ends a read of the compressed file, and the bytes after
    it come in the next (they were inflated as a second stream, or failed as a corrupt one)."""
    from tfrecord_lite.io import DecompressingStream

    framed = bytes(backend.framing.encode_frames(RECORDS))
    packed = zlib.compress(framed)
    for tail in (packed, b"xx"):
        for size in range(1, len(packed) + 2):
            stream, out = DecompressingStream(io.BytesIO(packed + tail), "zlib", read_size=size), bytearray()
            with pytest.raises(DataLossError, match="trailing bytes") as info:
                while n := stream.readinto(memoryview(chunk := bytearray(50))):
                    out += chunk[:n]
            assert bytes(out) == framed, size
            assert "TensorFlow reads the first stream" in info.value.hint


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_truncation_at_every_offset(clean, compression, folder):
    """A compressed stream cut at any byte: every record its bytes decompress to, then the
    error for the first record it lost, named by its offset in the decompressed stream. Under
    "skip" and "stop" the read ends there with that error in .skipped, as TensorFlow's
    ignore_errors() ends the file; both raised it, where a file cut short uncompressed ends."""
    data, starts = clean
    packed = gzip.compress(data, mtime=0) if compression == "gzip" else zlib.compress(data)
    for cut in range(1, len(packed)):
        inflate = zlib.decompressobj(zlib.MAX_WBITS | (16 if compression == "gzip" else 0))
        have = len(inflate.decompress(packed[:cut]))
        k = max(i for i, s in enumerate(starts) if s <= have)  # records whole in what decompresses
        path = os.path.join(folder, f"{next(_FILES)}.tfrecord")
        with open(path, "wb") as f:
            f.write(packed[:cut])
        for source in ("buffer", "stream", "file"):
            got, err = _read_compressed(packed[:cut], compression, "raise", source, path)
            assert got == RECORDS[:k], (cut, source)
            assert type(err) is DataLossError and "ends before its end marker" in str(err)
            assert (err.offset, err.index) == (starts[k], k), (cut, source)
            assert "on_corrupt='skip' or 'stop'" in err.hint
            for policy in ("skip", "stop"):
                kept, skipped = _read_compressed(packed[:cut], compression, policy, source, path)
                assert kept == got and [str(e) for e in skipped] == [str(err)], (cut, source, policy)


def _read_compressed(data, compression, on_corrupt, source, path):
    """(records, the error raised) under "raise"; (records, .skipped) otherwise. path: a file
    holding data."""
    src = path if source == "file" else io.BytesIO(data) if source == "stream" else data
    reader, got = TFRecordReader(src, compression=compression, on_corrupt=on_corrupt, chunk_size=64), []
    if on_corrupt != "raise":
        got.extend(reader)
        return got, reader.skipped
    with pytest.raises(DataLossError) as info:
        got.extend(reader)
    return got, info.value


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_every_bit_flip_of_a_compressed_file_reads_alike_from_every_source(clean, compression, folder):
    """Whatever a flip does to the deflate data (an inflate error, frames it garbles), the
    records and the error are the same from a buffer, a stream and a path under each policy,
    and the records are among the written ones. Inflate's error lost the output of the call
    that found it, and a buffer was inflated in one piece where a file's first 12 bytes come
    alone: the same bytes raised DataLossError from memory and CorruptRecordError (the garbled
    frame) from the file; under "skip", where the error fell depended on the read buffers
    earlier readers had left in the shared pool."""
    data, _ = clean
    packed = gzip.compress(data, mtime=0) if compression == "gzip" else zlib.compress(data)
    path = os.path.join(folder, f"{next(_FILES)}.tfrecord")
    for bit in range(len(packed) * 8):
        bad = bytearray(packed)
        bad[bit // 8] ^= 1 << (bit % 8)
        with open(path, "wb") as f:
            f.write(bad)
        for policy in ("raise", "skip", "stop"):
            seen = set()
            for src in (bytes(bad), io.BytesIO(bytes(bad)), path):
                reader, got = TFRecordReader(src, on_corrupt=policy, chunk_size=64), []
                try:
                    got.extend(reader)
                    errors = reader.skipped
                except DataLossError as exc:
                    errors = [exc]
                it = iter(RECORDS)
                assert all(r in it for r in got), (bit, policy)
                seen.add((tuple(got), tuple((type(e), e.detail, e.offset, e.index) for e in errors)))
            assert len(seen) == 1, (bit, policy, seen)


def _inflated_before_error(packed, compression):
    """What inflate makes of packed before its first error, fed a byte at a time."""
    inflate, out = zlib.decompressobj(zlib.MAX_WBITS | (16 if compression == "gzip" else 0)), bytearray()
    for i in range(len(packed)):
        try:
            out += inflate.decompress(packed[i:i + 1])
        except zlib.error:
            break
        if inflate.eof:
            break
    return bytes(out)


@settings(max_examples=30, deadline=None)
@given(compression=st.sampled_from(["gzip", "zlib"]), where=st.floats(0.05, 1, exclude_max=True),
       flip=st.integers(1, 255), chunk=st.sampled_from([64, 1000, None]), source=st.sampled_from(["buffer", "stream"]))
def test_records_before_damage_in_deflate_data_do_not_depend_on_read_sizes(backend, compression, where, flip, chunk,
                                                                          source):
    """Every record inflate decodes intact before the damage comes first, then the error names
    the record the damage hit. Inflate's error lost the output of the call that found it,
    which was up to a chunk of records: 20,000 records of 50 bytes with a byte flipped 2 KB
    before the end gave 18,706 records by default, 19,946 with chunk_size=4096 and 19,964 with
    64."""
    rng = np.random.default_rng(3)
    records = [rng.bytes(int(n)) for n in rng.integers(0, 120, 600)]  # incompressible
    framed = bytes(backend.framing.encode_frames(records))
    packed = bytearray(gzip.compress(framed, mtime=0) if compression == "gzip" else zlib.compress(framed))
    packed[int(where * len(packed))] ^= flip
    packed = bytes(packed)
    decoded = _inflated_before_error(packed, compression)
    intact = next((i for i, (a, b) in enumerate(zip(decoded, framed)) if a != b), min(len(decoded), len(framed)))
    ends = np.cumsum([16 + len(r) for r in records])
    k = int(np.searchsorted(ends, intact, side="right"))  # records whose frames are intact
    got = []
    with pytest.raises(DataLossError) as info:
        got.extend(TFRecordReader(packed if source == "buffer" else io.BytesIO(packed), chunk_size=chunk))
    assert got == records[:k]
    assert (info.value.index, info.value.offset) == (k, int(ends[k - 1]) if k else 0)


@pytest.mark.parametrize("actual, given", [(a, g) for a in (None, "gzip", "zlib") for g in (None, "gzip", "zlib")
                                           if a != g])
@pytest.mark.parametrize("source", ["buffer", "stream", "file", "mapped"])
def test_the_wrong_compression_is_named_with_the_right_one(backend, tmp_path, actual, given, source):
    """A file read with another compression= than its own was "damaged" (a corrupt gzip
    stream, or a length CRC that does not match), with a hint to skip bad records."""
    from tfrecord_lite import TFRecordWriter

    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path, compression=actual) as w:
        w.write_many(RECORDS)
    data = open(path, "rb").read()
    source = {"buffer": lambda: (data, {}), "stream": lambda: (io.BytesIO(data), {}),
              "file": lambda: (path, {}), "mapped": lambda: (path, {"memory_map": True})}[source]
    what, fix = ("like an uncompressed TFRecord file", "None") if actual is None else (f"{actual}-compressed",
                                                                                        repr(actual))
    for policy in ("raise", "skip"):
        src, options = source()
        reader = TFRecordReader(src, compression=given, on_corrupt=policy, **options)
        if policy == "raise":
            with pytest.raises(DataLossError) as info:
                list(reader)
            err = info.value
        else:
            list(reader)  # what resynchronising finds in compressed bytes is not checked here
            err = reader.skipped[0]
        assert (err.offset, err.index) == (0, 0)
        assert err.hint == (f"The file looks {what}, but compression={given!r} was given: pass "
                            f"compression={fix}, or 'auto' to detect it")


@pytest.mark.parametrize("head, looks", [(b"id,label\n1,cat\n2,dog\n", "text (starting 'id,label')"),
                                         ("名前,ラベル\n".encode(), "text (starting '名前,ラ"),
                                         (b"PAR1" + bytes(range(40)), "a Parquet file")])
@pytest.mark.parametrize("source", ["buffer", "stream", "pipe", "file", "mapped"])
def test_input_of_another_format_is_named_where_a_reader_starts(backend, tmp_path, head, looks, source):
    """Text or another format read as TFRecord is "corrupted record at 0", as TensorFlow says,
    with what it looks like instead of advice to skip bad records; read from a pipe too, which
    nothing can check ahead of the reader. A damaged TFRecord file keeps its advice."""
    path = tmp_path / "in.bin"
    damaged = bytearray(backend.framing.encode_frames(RECORDS))
    damaged[0] ^= 1
    for data, hint in ((head, f"It looks like {looks}"), (bytes(damaged), "The file is damaged")):
        path.write_bytes(data)
        if source == "pipe":
            r, w = os.pipe()
            os.write(w, data)
            os.close(w)
            src, options, name = open(r, "rb"), {}, f"<file descriptor {r}>"
        else:
            src, options, name = {"buffer": (data, {}, "<buffer>"), "stream": (io.BytesIO(data), {}, "<stream>"),
                                  "file": (str(path), {}, str(path)),
                                  "mapped": (str(path), {"memory_map": True}, str(path))}[source]
        with TFRecordReader(src, **options) as reader, pytest.raises(CorruptRecordError) as info:
            list(reader)
        assert (info.value.path, info.value.offset, info.value.index) == (name, 0, 0)
        assert info.value.detail.startswith("corrupted record at 0")
        assert info.value.hint.startswith(hint), info.value.hint
        if source == "pipe":
            src.close()
