"""merge and split: verbatim frames, order, compression changes, verification, atomicity."""

import io
import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfrecord_lite import (CorruptRecordError, DataLossError, TFRecordError, TFRecordReader, TFRecordWriter,
                           TruncatedRecordError, merge, split)
from tfrecord_lite.index import build_index
from tfrecord_lite.sharded import shard_path

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
COMPRESSIONS = [None, "gzip", "zlib"]


def _write(path, records, compression=None):
    with TFRecordWriter(path, compression) as w:
        w.write_many(records)
    return path


@SETTINGS
@given(records=st.lists(st.binary(max_size=300), max_size=80), n=st.integers(1, 6),
       comp_in=st.sampled_from(COMPRESSIONS), comp_shards=st.sampled_from(COMPRESSIONS),
       verify=st.booleans())
def test_merge_of_split_is_byte_identical(backend, tmp_path_factory, records, n, comp_in,
                                          comp_shards, verify):
    d = tmp_path_factory.mktemp("ms")
    src = _write(d / "in.tfrecord", records, comp_in)
    shards = split(src, n, d / "part", compression=comp_shards, verify=verify)
    sizes = [len(records) // n + (i < len(records) % n) for i in range(n)]
    assert [s.records for s in shards] == sizes
    assert [list(TFRecordReader(s)) for s in shards] == [
        records[sum(sizes[:i]):sum(sizes[:i + 1])] for i in range(n)]
    out = merge(shards, d / "out.tfrecord", compression=comp_in, verify=verify)
    assert (d / "out.tfrecord").read_bytes() == src.read_bytes()
    assert out.records in (len(records), None)


def test_split_order_and_names(backend, tmp_path):
    src = _write(tmp_path / "data.tfrecord.gz", [b"%d" % i for i in range(10)], "gzip")
    shards = split(src, 3)
    prefix = str(tmp_path / "data")
    assert [s.path for s in shards] == [shard_path(prefix, i, 3) for i in range(3)]
    assert [list(TFRecordReader(s)) for s in shards] == [
        [b"0", b"1", b"2", b"3"], [b"4", b"5", b"6"], [b"7", b"8", b"9"]]
    few = split(src, 12, tmp_path / "few", suffix=".tfr")
    assert [s.records for s in few] == [1] * 10 + [0, 0]
    assert few[0].path.endswith("few-00000-of-00012.tfr")


def test_merge_mixed_compressions_with_index(backend, tmp_path):
    a = _write(tmp_path / "a", [b"a1", b"a2"], None)
    b = _write(tmp_path / "b", [b"b1"], "gzip")
    c = _write(tmp_path / "c", [b"c1", b"c2"], "zlib")
    out = merge([a, b, c], tmp_path / "m.tfrecord", index=True)
    assert out.records == 5
    assert list(TFRecordReader(out)) == [b"a1", b"a2", b"b1", b"c1", b"c2"]
    idx = (tmp_path / "m.tfrecord.index").read_text()
    assert idx == open(build_index(out.path, tmp_path / "check.index")).read()
    shards = split(out, 2, tmp_path / "s", index=True)
    for s in shards:
        assert open(s.path + ".index").read() == open(build_index(s.path, s.path + ".chk")).read()


def _corrupt(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def test_verify_catches_corruption_and_leaves_nothing(backend, tmp_path):
    good = _write(tmp_path / "good.tfrecord", [b"x" * 50] * 5)
    bad = _write(tmp_path / "bad.tfrecord", [b"y" * 50] * 5)
    _corrupt(bad, 66 * 3 + 20)  # inside record 3's data
    with pytest.raises(CorruptRecordError) as info:
        merge([good, bad], tmp_path / "m.tfrecord", verify=True)
    assert info.value.path == str(bad) and info.value.index == 3
    with pytest.raises(CorruptRecordError, match="record 3"):
        split(bad, 2, tmp_path / "s", verify=True)
    with pytest.raises(CorruptRecordError, match="record 3"):
        merge([bad], tmp_path / "m.tfrecord.gz", compression="gzip", verify=True)
    assert sorted(os.listdir(tmp_path)) == ["bad.tfrecord", "good.tfrecord"]
    # Without verification a raw-to-raw merge is a plain byte copy.
    merge([good, bad], tmp_path / "m.tfrecord")
    assert (tmp_path / "m.tfrecord").read_bytes() == good.read_bytes() + bad.read_bytes()


def test_truncated_input_is_reported(backend, tmp_path):
    src = _write(tmp_path / "t.tfrecord", [b"z" * 100] * 3)
    src.write_bytes(src.read_bytes()[:-10])
    with pytest.raises(DataLossError, match="record 2"):
        split(src, 2, tmp_path / "s")
    with pytest.raises(DataLossError, match="truncated"):
        merge([src], tmp_path / "m.gz", compression="gzip")
    assert sorted(os.listdir(tmp_path)) == ["t.tfrecord"]


def test_merge_to_file_object(backend, tmp_path):
    a = _write(tmp_path / "a", [b"1", b"2"], "gzip")
    b = _write(tmp_path / "b", [b"3"])
    with open(tmp_path / "out", "wb") as f:
        f.write(b"")
        merge([a, b], f)
    assert list(TFRecordReader(tmp_path / "out")) == [b"1", b"2", b"3"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("index", [False, True])
@pytest.mark.parametrize("change", ["shrinks", "grows"])
def test_split_of_an_input_that_changes_between_its_reads_writes_nothing(backend, tmp_path, monkeypatch,
                                                                         compression, index, change):
    """split reads its input twice, to count and to copy. An input rewritten in between (here
    as the copy's progress bar starts) is an error that says so; before, a shorter one gave shards
    short of the records their ShardInfo claimed, and a longer compressed one an IndexError."""
    import tfrecord_lite.ops as ops

    records = [b"%d" % i * 50 for i in range(10)]
    src = _write(tmp_path / "in.tfrecord", records, compression)
    progress = ops._progress

    def rewrite_first(*args, desc, **kwargs):
        if desc == "split":  # the copy's bar, after the count's
            _write(src, records[:7] if change == "shrinks" else records + [b"more"] * 3, compression)
        return progress(*args, desc=desc, **kwargs)

    monkeypatch.setattr(ops, "_progress", rewrite_first)
    with pytest.raises(TFRecordError, match="in.tfrecord: the input changed while it was split: .*"
                       "Split it again once nothing writes to it; no shard was written"):
        split(src, 3, tmp_path / "out" / "s", compression=compression, index=index and compression is None)
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def _edge_sizes():
    """Record sizes at the edges of the reader's chunks and the writer's drains, and empty."""
    from tfrecord_lite.reader import BLOCK_CHUNK_BYTES, CHUNK_BYTES
    from tfrecord_lite.writer import FLUSH_BYTES

    overhead = 16
    edges = {CHUNK_BYTES, BLOCK_CHUNK_BYTES, FLUSH_BYTES, FLUSH_BYTES // 2}
    return sorted({0, 1} | {e - overhead + d for e in edges for d in (-1, 0, 1)})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.sampled_from(_edge_sizes()), max_size=6), n=st.integers(1, 4),
       comp_in=st.sampled_from(COMPRESSIONS), comp_out=st.sampled_from(COMPRESSIONS), verify=st.booleans(),
       index=st.booleans())
def test_merge_and_split_keep_records_at_buffer_edges(backend, tmp_path_factory, sizes, n, comp_in, comp_out,
                                                      verify, index):
    d = tmp_path_factory.mktemp("edges")
    records = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    src = _write(d / "in.tfrecord", records, comp_in)
    index = index and comp_out is None
    shards = split(src, n, d / "part", compression=comp_out, verify=verify, index=index)
    assert [r for s in shards for r in TFRecordReader(s)] == records
    out = merge(list(shards) + [src], d / "out.tfrecord", compression=comp_out, verify=verify, index=index)
    assert list(TFRecordReader(out)) == records * 2
    if index:
        for path in [s.path for s in shards] + [out.path]:
            assert open(path + ".index").read() == open(build_index(path, path + ".check")).read()


@SETTINGS
@given(records=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=40), data=st.data(),
       n=st.integers(1, 5), comp_in=st.sampled_from(COMPRESSIONS), comp_shards=st.sampled_from(COMPRESSIONS),
       mode=st.sampled_from(["skip", "stop"]), index=st.booleans())
def test_split_with_on_corrupt_deals_out_the_good_records_as_merge_keeps_them(
        backend, tmp_path_factory, records, data, n, comp_in, comp_shards, mode, index):
    # split had no on_corrupt: a damaged input could not be split at all.
    d = tmp_path_factory.mktemp("oc")
    bad = data.draw(st.integers(0, len(records) - 1))
    raw = bytearray(_write(d / "plain.tfrecord", records).read_bytes())
    at = sum(16 + len(r) for r in records[:bad]) + 12 + data.draw(st.integers(0, len(records[bad]) - 1))
    raw[at] ^= 0x01
    damaged = d / "in.tfrecord"
    with TFRecordWriter(damaged, comp_in) as w:  # the damaged frames, compressed as they are
        w._write_frames(bytes(raw), lengths=[len(r) for r in records])
    kept = records[:bad] + records[bad + 1:] if mode == "skip" else records[:bad]
    with pytest.raises(CorruptRecordError, match=f"record {bad}"):
        split(damaged, n, d / "raise", verify=True)
    shards = split(damaged, n, d / "part", compression=comp_shards if not index else None, verify=True,
                   index=index, on_corrupt=mode)
    sizes = [len(kept) // n + (i < len(kept) % n) for i in range(n)]
    assert [s.records for s in shards] == sizes
    assert [list(TFRecordReader(s)) for s in shards] == [kept[sum(sizes[:i]):sum(sizes[:i + 1])] for i in range(n)]
    merged = merge(damaged, d / "merged.tfrecord", verify=True, on_corrupt=mode)
    assert merged.records == len(kept) and list(TFRecordReader(merged.path)) == kept


@pytest.mark.parametrize("compression, index, fsync", [(None, False, False), (None, True, True), ("gzip", False, True)])
def test_split_writes_more_shards_than_files_may_be_open(backend, tmp_path, few_descriptors, compression, index,
                                                         fsync):
    # Every shard used to stay open until the commit: 200 shards failed with EMFILE under
    # `ulimit -n 64`. Shards are now written one after another and closed when full.
    records = [b"r%d" % i for i in range(450)]
    src = _write(tmp_path / "in.tfrecord", records)
    shards = split(src, 200, tmp_path / "part", compression=compression, index=index, fsync=fsync)
    assert [s.records for s in shards] == [3] * 50 + [2] * 150
    assert [r for s in shards for r in TFRecordReader(s, compression)] == records
    assert all(os.path.exists(s.path + ".index") == index for s in shards)
    assert sorted(os.listdir(tmp_path)) == sorted(["in.tfrecord"] + [os.path.basename(s) for s in shards]
                                                  + [os.path.basename(s) + ".index" for s in shards if index])


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("index", [False, True])
def test_a_failed_split_into_many_shards_leaves_nothing(backend, tmp_path, monkeypatch, few_descriptors,
                                                        compression, index):
    # The shards already written and closed when the input turns out shorter are removed too.
    import tfrecord_lite.ops as ops

    records = [b"r%d" % i for i in range(450)]
    src = _write(tmp_path / "in.tfrecord", records, compression)
    progress = ops._progress

    def shrink_first(*args, desc, **kwargs):
        if desc == "split":  # the copy's bar, after the count's
            _write(src, records[:400], compression)
        return progress(*args, desc=desc, **kwargs)

    monkeypatch.setattr(ops, "_progress", shrink_first)
    with pytest.raises(TFRecordError, match="the input changed while it was split"):
        split(src, 200, tmp_path / "part", index=index)
    assert os.listdir(tmp_path) == ["in.tfrecord"]


@pytest.mark.parametrize("verify", [False, True])
def test_merge_into_one_of_its_inputs_refuses_before_copying_anything(backend, tmp_path, verify):
    # `cat big a >> a` used to append big's records (all that was drained before a came up)
    # to a, then refuse a: the failed command changed the file it refused to write.
    big = _write(tmp_path / "big.tfrecord", [b"x" * 1000] * 3000)
    a = _write(tmp_path / "a.tfrecord", [b"a", b"bc"])
    before = a.read_bytes()
    with open(a, "ab") as out, pytest.raises(TFRecordError, match="input file is output file") as err:
        merge([big, a], out, verify=verify)
    assert a.read_bytes() == before
    assert err.value.path == str(a) and "nothing was written" in str(err.value)


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("verify", [False, True])
def test_split_shows_progress_through_both_of_its_reads(backend, tmp_path, monkeypatch, compression, verify):
    # The bar covered only the copy: counting the records first (as long, longer with
    # verify) showed nothing. It has a bar of the input's bytes now.
    import tfrecord_lite.ops as ops

    bars = []

    class Bar:
        def __init__(self, total, desc, enabled, unit="rec"):
            self.total, self.desc, self.unit, self.n = total, desc, unit, 0
            bars.append(self)

        def update(self, n):
            self.n += n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(ops, "_progress", Bar)
    src = _write(tmp_path / "in.tfrecord", [os.urandom(1000) for _ in range(3000)], compression)
    split(src, 3, tmp_path / "s", verify=verify, progress=True)
    size = os.path.getsize(src)
    assert [(b.desc, b.unit, b.total, b.n) for b in bars] == [("split: count", "B", size, size),
                                                              ("split", "rec", 3000, 3000)]


class _Options:
    """Stands in for tf.io.TFRecordOptions: what TFRecordWriter reads of one."""

    def __init__(self, compression_type, compression_level=None):
        self.compression_type, self.compression_level = compression_type, compression_level


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_merge_and_split_take_a_compression_level_as_the_writer_does(backend, tmp_path, compression):
    records = [bytes(range(i % 7, 200)) * 3 for i in range(40)]
    src = _write(tmp_path / "in.tfrecord", records)
    with TFRecordWriter(tmp_path / "alone", compression, compression_level=1) as w:
        w.write_many(records)
    alone = (tmp_path / "alone").read_bytes()
    assert alone != _write(tmp_path / "default", records, compression).read_bytes()
    merge([src], tmp_path / "m", compression=compression, compression_level=1)
    assert (tmp_path / "m").read_bytes() == alone
    for name, args in {"s": dict(compression=compression, compression_level=1),
                       "o": dict(compression=_Options(compression.upper(), 1))}.items():
        (shard,) = split(src, 1, tmp_path / name, **args)
        assert open(shard, "rb").read() == alone, name


def test_a_plain_merge_checks_every_header_and_the_end_of_each_input(backend, tmp_path):
    """An uncompressed input copied as bytes had only its first header checked: one cut
    inside a record, or with a damaged header past the first, was copied as it was."""
    data = _write(tmp_path / "full.tfrecord", [b"x" * 20] * 3).read_bytes()
    good = _write(tmp_path / "good.tfrecord", [b"a"])
    damaged = bytearray(data)
    damaged[36 + 9] ^= 1  # record 1's length CRC
    inputs = {"cut": (data[:-3], TruncatedRecordError, 2, 72),
              "header": (bytes(damaged), CorruptRecordError, 1, 36)}
    for name, (content, error, index, offset) in inputs.items():
        bad = tmp_path / f"{name}.tfrecord"
        bad.write_bytes(content)
        with pytest.raises(error) as info:
            merge([good, bad], tmp_path / "out.tfrecord")
        assert (info.value.path, info.value.index, info.value.offset) == (str(bad), index, offset)
        assert not (tmp_path / "out.tfrecord").exists()
        assert merge([good, bad], tmp_path / "out.tfrecord", check_headers=False).records is None
        assert (tmp_path / "out.tfrecord").read_bytes() == good.read_bytes() + content
        os.remove(tmp_path / "out.tfrecord")
    out = merge([good, tmp_path / "full.tfrecord"], tmp_path / "out.tfrecord")
    assert out.records == 4 and (tmp_path / "out.tfrecord").read_bytes() == good.read_bytes() + data


def test_a_plain_merge_refuses_an_input_that_changes_between_its_check_and_its_copy(backend, tmp_path,
                                                                                  monkeypatch):
    from tfrecord_lite import ops

    src = _write(tmp_path / "in.tfrecord", [b"a", b"b"])
    walk = ops._walk_headers

    def walk_then_append(f, path, bar, max_record_bytes):
        got = walk(f, path, bar, max_record_bytes)
        with open(src, "ab") as grow:
            grow.write(b"more")
        return got

    monkeypatch.setattr(ops, "_walk_headers", walk_then_append)
    with pytest.raises(TFRecordError, match="the input changed while it was merged: its 2 records ended at byte 34"):
        merge([src], tmp_path / "out.tfrecord")
    assert not (tmp_path / "out.tfrecord").exists()


def test_the_header_walk_of_a_plain_merge_finds_what_the_reader_finds(backend, tmp_path):
    from tfrecord_lite import ops
    from tfrecord_lite.index import scan_index

    class Bar:
        n = 0

        def update(self, n):
            self.n += n

    sizes = [0, 1, 50, 3000, 70000, 200000, 7, 65536 - 16, 65536 - 15, 65536]
    data = _write(tmp_path / "all.tfrecord", [bytes([i]) * n for i, n in enumerate(sizes)]).read_bytes()
    ends = list(itertools.accumulate(n + 16 for n in sizes))
    cuts = sorted({c for end in [0] + ends for c in (end - 13, end - 4, end, end + 1, end + 12) if 0 <= c <= len(data)})
    path = tmp_path / "cut.tfrecord"
    for cut in cuts:
        for flip in (None, 9, ends[3] + 2, ends[5] + 20):  # a length CRC, a length, data (not checked)
            content = bytearray(data[:cut])
            if flip is not None and flip < cut:
                content[flip] ^= 1
            path.write_bytes(content)
            try:
                offsets, _ = scan_index(path, check_crc=False)
                want = (len(offsets), cut)
            except DataLossError as exc:
                want = (type(exc), exc.index, exc.offset, str(exc))
            bar = Bar()
            with open(path, "rb") as f:
                try:
                    got = ops._walk_headers(f, str(path), bar, 1 << 31)
                    assert bar.n == cut and f.tell() == 0
                except DataLossError as exc:
                    got = (type(exc), exc.index, exc.offset, str(exc))
            assert got == want, (cut, flip)


def test_the_header_walk_of_a_plain_merge_reads_no_long_records_data(backend, tmp_path):
    from tfrecord_lite import ops

    class Counted(io.FileIO):
        read_bytes = 0

        def readinto(self, b):
            n = super().readinto(b)
            Counted.read_bytes += n
            return n

    path = _write(tmp_path / "big.tfrecord", [b"x" * (8 << 20), b"y", b"z" * (8 << 20)])
    with Counted(path, "rb") as f:
        assert ops._walk_headers(f, str(path), type("Bar", (), {"update": lambda self, n: None})(), 1 << 31) == (
            3, os.path.getsize(path))
    assert Counted.read_bytes < 4 * ops._WALK_BYTES
