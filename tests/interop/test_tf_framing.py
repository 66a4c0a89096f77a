"""Framing against live TensorFlow: files read both ways, byte-identical output under every
compression, and the same error offsets for truncation and corruption."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfrecord_lite import DataLossError, TFRecordReader, TFRecordWriter

TF_OPTIONS = {None: "", "gzip": "GZIP", "zlib": "ZLIB"}
records_st = st.lists(st.binary(max_size=2000), max_size=12)


def tf_write(tf, path, records, option):
    with tf.io.TFRecordWriter(str(path), options=option) as w:
        for r in records:
            w.write(r)


def tf_read(tf, path, option=""):
    return [t.numpy() for t in tf.data.TFRecordDataset(str(path), compression_type=option)]


@settings(max_examples=25, deadline=None)
@given(records=records_st, compression=st.sampled_from(sorted(TF_OPTIONS, key=str)))
def test_byte_identical_to_tf_writer(tf, backend, tmp_path_factory, records, compression):
    d = tmp_path_factory.mktemp("w")
    tf_write(tf, d / "tf.tfrecord", records, TF_OPTIONS[compression])
    with TFRecordWriter(d / "ours.tfrecord", compression=compression) as w:
        for r in records:
            w.write(r)
    assert (d / "ours.tfrecord").read_bytes() == (d / "tf.tfrecord").read_bytes()
    assert list(TFRecordReader(d / "tf.tfrecord")) == records
    assert tf_read(tf, d / "ours.tfrecord", TF_OPTIONS[compression]) == records


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.one_of(st.binary(max_size=3000), st.integers(0, 300_000), st.none()), max_size=10),
       compression=st.sampled_from(sorted(TF_OPTIONS, key=str)))
def test_flushed_writes_byte_identical_to_tf_writer(tf, backend, tmp_path_factory, steps, compression):
    # None: flush(). TensorFlow's flush() ends deflate's block (Z_PARTIAL_FLUSH); ours kept it
    # until close(), so a compressed file written with flushes differed from TF's.
    d = tmp_path_factory.mktemp("w")
    records = [b"z" * s if isinstance(s, int) else s for s in steps]
    with tf.io.TFRecordWriter(str(d / "tf"), options=TF_OPTIONS[compression]) as w:
        for r in records:
            w.flush() if r is None else w.write(r)
    with TFRecordWriter(d / "ours", compression=compression) as w:
        for r in records:
            w.flush() if r is None else w.write(r)
    assert (d / "ours").read_bytes() == (d / "tf").read_bytes()


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
def test_large_records_byte_identical(tf, backend, tmp_path, compression):
    # Several MiB of mixed data crosses TF's 256 KiB zlib buffers and our 1 MiB flushes.
    import random

    rng = random.Random(7)
    records = [rng.randbytes(rng.randint(0, 300_000)) + b"z" * rng.randint(0, 300_000) for _ in range(20)]
    tf_write(tf, tmp_path / "tf", records, TF_OPTIONS[compression])
    with TFRecordWriter(tmp_path / "ours", compression=TF_OPTIONS[compression]) as w:
        w.write_many(records)
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "tf").read_bytes()
    assert list(TFRecordReader(tmp_path / "tf")) == records


def tf_error_offset(tf, path):
    try:
        tf_read(tf, path)
    except tf.errors.DataLossError as exc:
        m = re.search(r"(truncated|corrupted) record at (\d+)", str(exc))
        return m.group(1), int(m.group(2))
    return None


def test_same_error_offsets_as_tf(tf, backend, tmp_path):
    records = [b"alpha", b"", b"gamma" * 9]
    good = bytes(backend.framing.encode_frames(records))
    path = tmp_path / "bad.tfrecord"
    cases = [good[:cut] for cut in range(1, len(good))]
    for byte in range(len(good)):
        flipped = bytearray(good)
        flipped[byte] ^= 0x10
        cases.append(bytes(flipped))
    for data in cases:
        path.write_bytes(data)
        expected = tf_error_offset(tf, path)
        try:
            list(TFRecordReader(path, compression=None))
            ours = None
        except DataLossError as exc:
            m = re.search(r"(truncated|corrupted) record at (\d+)", str(exc))
            ours = (m.group(1), int(m.group(2)))
        if expected is None and ours is not None and len(data) - ours[1] < 12:
            # Deliberate divergence: TF ends quietly on 1-11 trailing bytes (a partial
            # header); we report the truncation, since those bytes are a cut-off record.
            assert ours[0] == "truncated"
            continue
        assert ours == expected, data.hex()


def test_compressed_streams_without_their_end_read_as_tf_reads_them_then_raise(tf, backend, tmp_path):
    """A GZIP or ZLIB stream cut inside its trailer, or followed by other bytes: TensorFlow
    delivers the records decompressed and stops quietly (it never reads a second zlib stream).
    tfrecord_lite delivers the same records, then raises a DataLossError for the file whose
    writing or copying was cut off (README lists this among the deliberate differences);
    on_corrupt='stop' gives exactly TensorFlow's records."""
    import gzip
    import zlib

    records = [bytes([i]) * (i * 7 % 60) for i in range(25)]
    with TFRecordWriter(tmp_path / "g", compression="gzip") as w:
        w.write_many(records)
    with TFRecordWriter(tmp_path / "z", compression="zlib") as w:
        w.write_many(records)
    g, z = (tmp_path / "g").read_bytes(), (tmp_path / "z").read_bytes()
    tails = [("GZIP", g[:-cut]) for cut in range(1, 9)]  # the CRC32 and ISIZE trailer, cut
    tails += [("GZIP", g + gzip.compress(b"more")[:cut]) for cut in range(1, 12)]  # a second member's start
    tails += [("ZLIB", z[:-cut]) for cut in range(1, 5)]  # the Adler-32 trailer, cut
    tails += [("ZLIB", z + extra) for extra in (b"\x00", b"junk", zlib.compress(b"a second stream"))]
    for option, data in tails:
        path = tmp_path / "case"
        path.write_bytes(data)
        assert tf_read(tf, path, option) == records, (option, data[-12:].hex())
        reader = TFRecordReader(path)
        got = []
        with pytest.raises(DataLossError) as err:
            for r in reader:
                got.append(r)
        assert got == records and err.value.index == len(records), (option, data[-12:].hex())
        stopped = TFRecordReader(path, on_corrupt="stop")
        assert list(stopped) == records and len(stopped.skipped) == 1
