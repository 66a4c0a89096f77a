"""Index sidecars: building, reading and writing them byte for byte, refusing stale,
malformed or misplaced ones; and the counts they serve (count_records,
TFRecordDataset.num_elements)."""

import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ._records import record, write_files

from tfrecord_lite import IndexedDataset, TFRecordDataset, TFRecordFile, TFRecordWriter, build_index
from tfrecord_lite.index import count_records
from tfrecord_lite.errors import CorruptRecordError, TFRecordError


def test_stale_index_is_reported(tmp_path):
    (path,) = write_files(tmp_path, [6], size=10)
    stale = open(build_index(path)).read()
    write_files(tmp_path, [3], size=2)  # rewriting drops the sidecar; put the old one back
    with open(path + ".index", "w") as f:
        f.write(stale)
    with pytest.raises(TFRecordError, match="stale"):
        TFRecordFile(path)[5]


def test_hostile_index_lengths_fail_without_allocating(tmp_path):
    (path,) = write_files(tmp_path, [2], size=10)
    with open(path + ".index", "w") as f:
        f.write(f"0 {2**60}\n")  # one frame claiming an exabyte
    with pytest.raises(TFRecordError, match="stale"):
        TFRecordFile(path)


def test_compressed_cannot_be_indexed(tmp_path):
    (path,) = write_files(tmp_path, [3], compression="gzip")
    with pytest.raises(TFRecordError, match="compressed"):
        TFRecordFile(path)


def test_sidecar_of_part_of_the_file_is_stale(backend, tmp_path):
    """Records appended after the sidecar was written are not hidden: random access refuses
    the sidecar, naming it, and count_records does not count by it either."""
    (path,) = write_files(tmp_path, [3])
    build_index(path)
    with open(path, "ab") as f:  # not through a TFRecordWriter: that removes the sidecar
        f.write(backend.framing.encode_frames([b"r3", b"r4"]))
    for make in (TFRecordFile, lambda p: IndexedDataset([p])):
        with pytest.raises(TFRecordError, match=r"frames span bytes 0\.\.\d+ but .* has \d+ bytes") as err:
            make(path)
        assert err.value.path == path + ".index"
        assert f"The index is stale: rebuild it with `tfrecord-lite index {path}`" in str(err.value)
    assert count_records(path) == 5  # and rewrites the sidecar
    assert len(TFRecordFile(path)) == 5 and TFRecordFile(path)[-1] == b"r4"


def test_a_count_is_not_kept_past_a_rewrite_that_keeps_the_mtime(backend, tmp_path):
    """A file replaced by one of the same size with its old mtime (cp -p, rsync -t, tar) is
    counted again, not by the count kept in memory for it."""
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path) as w:
        w.write(b"x" * 16)
    assert count_records(path) == 1
    st = os.stat(path)
    with open(path, "wb") as f:
        f.write(backend.framing.encode_frames([b"", b""]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.path.getsize(path) == st.st_size
    assert count_records(path) == 2 == TFRecordDataset(path).num_elements()


@settings(max_examples=100, deadline=None)
@given(old=st.lists(st.integers(0, 40), min_size=1, max_size=6), data=st.data())
def test_sidecar_of_a_file_rewritten_to_the_same_size_is_stale(backend, tmp_path_factory, old, data):
    """A file rewritten in place by another writer, to the same size, keeps its old sidecar,
    which still tiles it: count_records (and so len() and num_elements) counted the old
    records by it. The headers of its first and last frames give it away."""
    total = sum(old) + 16 * len(old)
    k = data.draw(st.integers(1, total // 16))
    cuts = sorted(data.draw(st.lists(st.integers(0, total - 16 * k), min_size=k - 1, max_size=k - 1)))
    new = [b - a for a, b in zip([0, *cuts], [*cuts, total - 16 * k])]
    path = str(tmp_path_factory.mktemp("d") / "a.tfrecord")
    with TFRecordWriter(path, index=True) as w:
        w.write_many(bytes(n) for n in old)
    frames = backend.framing.encode_frames([b"n" * n for n in new])
    with open(path, "r+b") as f:  # in place: the sidecar stays
        f.write(frames)
    assert os.path.getsize(path) == total and os.path.exists(path + ".index")
    if old[0] == new[0] and old[-1] == new[-1]:
        return  # both ends are frames of the file: the sidecar looks right (reads still check)
    with pytest.raises(TFRecordError, match="The index is stale") as err:
        TFRecordFile(path)
    assert err.value.path == path + ".index"
    assert count_records(path) == len(new) == TFRecordDataset(path).num_elements()
    assert TFRecordFile(path)[:] == [b"n" * n for n in new]  # the count rewrote the sidecar


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=4), data=st.data(),
       on_corrupt=st.sampled_from(["raise", "skip", "stop"]), check_crc=st.booleans(),
       shard=st.none() | st.integers(1, 5).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n))))
def test_num_elements_of_damaged_files_is_what_a_read_yields(backend, tmp_path_factory, counts, data, on_corrupt,
                                                             check_crc, shard):
    """num_elements (and so the torch adapter's len()) raised the count scan's "pass
    on_corrupt='skip'" under on_corrupt='skip' too, and failed on a data-CRC flip under
    check_crc=False, while reading the same dataset worked."""
    paths = write_files(tmp_path_factory.mktemp("d"), counts, size=3)
    for path in paths:
        size = os.path.getsize(path)
        if size and data.draw(st.booleans()):
            damaged = bytearray(open(path, "rb").read())
            damaged[data.draw(st.integers(0, size - 1))] ^= 1 << data.draw(st.integers(0, 7))
            open(path, "wb").write(damaged)
    ds = TFRecordDataset(paths, on_corrupt=on_corrupt, check_crc=check_crc, shard=shard)
    try:
        want = len(list(ds))
    except TFRecordError as exc:
        with pytest.raises(type(exc)):
            ds.num_elements()
    else:
        assert ds.num_elements() == want
        assert ds.num_elements() == want  # counted again, from the sidecars that clean files got


def test_sidecar_missing_the_first_frames_is_stale(backend, tmp_path):
    (path,) = write_files(tmp_path, [4])
    lines = open(build_index(path)).read().splitlines()
    open(path + ".index", "w").write("\n".join(lines[1:]) + "\n")  # ends at the file's end
    with pytest.raises(TFRecordError, match="stale"):
        TFRecordFile(path)
    assert count_records(path) == 4
    assert TFRecordFile(path)[0] == record(0, 0)


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(16, 145), max_size=8), keep=st.lists(st.booleans(), min_size=8, max_size=8),
       data=st.data())
def test_a_sidecar_that_cuts_the_file_elsewhere_is_refused_at_its_first_wrong_frame(backend, tmp_path, cuts,
                                                                                   keep, data):
    """A sidecar that tiles the file but not along its frames: one whose first or last entry
    is not a frame is refused as stale up front, by those frames' headers. Otherwise each read
    of an entry, or of a run of entries, gives the records only where every entry is a frame
    of the file, else a CorruptRecordError naming the first wrong entry. A run whose wrong
    entries add up to frames handed out the records of the wrong entries, where each of them
    alone failed."""
    records = [b"alpha", b"", b"gamma-gamma", bytes(range(40)), b"", b"xyz"]
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path) as w:
        w.write_many(records)
    starts = [0]
    for r in records:
        starts.append(starts[-1] + 16 + len(r))
    size = starts[-1]
    real = {(s, e - s): r for s, e, r in zip(starts, starts[1:], records)}
    ends = sorted({0, size, *cuts, *(s for s, k in zip(starts, keep) if k)})
    entries = [(a, b - a) for a, b in zip(ends, ends[1:])]
    assume(all(n >= 16 for _, n in entries))
    open(path + ".index", "w").write("".join(f"{o} {n}\n" for o, n in entries))
    outer = [k for k in sorted({0, len(entries) - 1}) if entries[k] not in real]
    if outer:
        for make in (TFRecordFile, lambda p: IndexedDataset([p])):
            with pytest.raises(TFRecordError, match=f"record {outer[0]} at byte {entries[outer[0]][0]} .*stale"):
                make(path)
        assert count_records(path) == len(records)  # counted by a scan instead
        return
    f, ds = TFRecordFile(path), IndexedDataset([path])
    start = data.draw(st.integers(0, len(entries) - 1))
    stop = data.draw(st.integers(start + 1, len(entries)))
    wrong = [k for k in range(start, stop) if entries[k] not in real]
    for read in (lambda: f[start:stop], lambda: ds[start:stop], lambda: [f[k] for k in range(start, stop)]):
        if not wrong:
            assert read() == [real[e] for e in entries[start:stop]]
            continue
        with pytest.raises(CorruptRecordError) as info:
            read()
        assert (info.value.path, info.value.index, info.value.offset) == (path, wrong[0], entries[wrong[0]][0])
        assert f"record {wrong[0]}, byte offset {entries[wrong[0]][0]}" in str(info.value)
    f.close()
    ds.close()


def test_build_index_refuses_a_pipe(backend, tmp_path):
    # scan_index opened its file twice (a look at the first bytes, then the read): a FIFO's
    # second open waited for a writer forever, /dev/stdin's read came up "corrupted at 0".
    from tfrecord_lite.errors import TFRecordError

    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with pytest.raises(TFRecordError, match="byte offsets to seek to in a file, but this is a pipe") as info:
        build_index(fifo)
    assert info.value.path == fifo and not os.path.exists(fifo + ".index")


def test_a_file_under_dev_is_indexed_and_a_descriptor_link_is_not(backend, tmp_path):
    # Every path under /dev/ was taken for a device: a file staged in /dev/shm (a RAM disk)
    # could not be indexed, nor read at random without a sidecar. /dev/stdin, /dev/fd/N
    # and /proc/self/fd/N lead to a descriptor's file, and are still refused.
    import subprocess
    import sys
    import tempfile

    from tfrecord_lite.index import not_a_file

    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        (path,) = write_files(shm, [3])
        os.symlink(path, os.path.join(shm, "link.tfrecord"))
        assert len(TFRecordFile(path)) == 3 and build_index(path) == path + ".index"
        assert not not_a_file(path) and not not_a_file(os.path.join(shm, "link.tfrecord"))
    (path,) = write_files(tmp_path, [3])
    with open(path, "rb") as stdin:
        for link in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"):
            code = f"from tfrecord_lite.index import not_a_file; assert not_a_file({link!r})"
            subprocess.run([sys.executable, "-c", code], stdin=stdin, check=True)
    assert not not_a_file(path) and not not_a_file("s3://bucket/dev/x.tfrecord")


def test_a_compressed_file_with_a_sidecar_is_refused_as_compressed(backend, tmp_path):
    # A sidecar beside a compressed file (one left from before it was compressed) was
    # reported as stale, with a hint to rebuild it, which then failed: compressed.
    (plain,) = write_files(tmp_path, [3])
    (packed,) = write_files(tmp_path, [3], compression="gzip", name="gz-{}.tfrecord")
    os.replace(build_index(plain), packed + ".index")
    for make in (TFRecordFile, lambda p: IndexedDataset([p])):
        with pytest.raises(TFRecordError, match="compressed TFRecord files cannot be indexed") as info:
            make(packed)
        assert info.value.path == packed and "Decompress it first" in str(info.value)


@pytest.mark.parametrize("sidecar", ["0 19\n19 19\n38", "0 19\n19 19\n38 1\n", "0 19\n19 x\n", "\x00" * 8])
def test_a_malformed_sidecar_is_counted_past_as_a_stale_one_is(backend, tmp_path, sidecar):
    # A sidecar cut short (an indexer killed mid-write) or garbled made count_records, and
    # so num_elements and the torch adapter's len(), raise, while a stale but well-formed
    # one was scanned past and rewritten; reading the file worked all along.
    (path,) = write_files(tmp_path, [3], size=3)
    with open(path + ".index", "w") as f:
        f.write(sidecar)
    assert count_records(path) == 3 == TFRecordDataset(path).num_elements()
    assert TFRecordFile(path)[2] == record(0, 2, 3)  # by the sidecar the count rewrote


def test_build_index_refuses_to_write_the_index_over_its_file(backend, tmp_path):
    # build_index(path, path) (or another name of it) replaced the data with its own index.
    (path,) = write_files(tmp_path, [3])
    data = open(path, "rb").read()
    os.link(path, str(tmp_path / "hard.tfrecord"))
    for index_file in (path, str(tmp_path / "hard.tfrecord"), tmp_path / "." / os.path.basename(path)):
        with pytest.raises(TFRecordError, match="would replace the file it indexes") as info:
            build_index(path, index_file)
        assert info.value.path == os.fspath(index_file)
    assert open(path, "rb").read() == data and not os.path.exists(path + ".index")


def test_a_large_sidecar_is_read_without_an_object_per_number(tmp_path):
    # read_index split the text into one bytes object per number and converted each: for a
    # sidecar of millions of records, seconds per file and several times its size in memory,
    # paid by every IndexedDataset over the files at start. Malformed text is still refused.
    import tracemalloc

    from tfrecord_lite.index import read_index, write_index

    n = 200_000
    lengths = np.arange(n, dtype=np.int64) % 1000 + 16
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    index_file = str(tmp_path / "big.index")
    write_index(index_file, offsets, lengths)
    size = os.path.getsize(index_file)
    tracemalloc.start()
    try:
        got = read_index(index_file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got[0], offsets) and np.array_equal(got[1], lengths)
    assert peak < 6 * size  # the text and a few arrays of the numbers: no object per number
    for text in ("0 19\n19 x\n", "0 19\n19 -19\n", "0 19.0\n", "+0 19\n", "0 19\n1e3 19\n", "0 0x13\n",
                 f"0 {2**70}\n", "0\xa019\n"):
        open(index_file, "w").write(text)
        with pytest.raises(TFRecordError, match="index sidecar"):
            read_index(index_file)


@pytest.mark.parametrize("text", ["", "\n", " \n\t\r\n"])
def test_an_empty_sidecar_lists_no_records(tmp_path, text):
    from tfrecord_lite.index import read_index

    open(tmp_path / "a.index", "w").write(text)
    assert [len(a) for a in read_index(str(tmp_path / "a.index"))] == [0, 0]


def _sidecar_text(offsets, lengths):
    """The sidecar format, one line per frame, as the tfrecord package writes it."""
    return "".join(f"{o} {n}\n" for o, n in zip(offsets, lengths)).encode()


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), max_size=40),
       pairs=st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)), max_size=40))
def test_write_index_writes_the_sidecar_format_byte_for_byte(tmp_path_factory, sizes, pairs):
    from tfrecord_lite.index import read_index, write_index

    directory = tmp_path_factory.mktemp("index")
    (path,) = write_files(directory, [len(sizes)], make=lambda f, j: b"r" * sizes[j])
    offsets = np.cumsum([0] + [n + 16 for n in sizes])[:-1]
    with open(build_index(path), "rb") as f:
        assert f.read() == _sidecar_text(offsets.tolist(), [n + 16 for n in sizes])
    assert [a.tolist() for a in read_index(path + ".index")] == [offsets.tolist(), [n + 16 for n in sizes]]
    write_index(str(directory / "any.index"), [o for o, _ in pairs], [n for _, n in pairs])
    with open(directory / "any.index", "rb") as f:
        assert f.read() == (_sidecar_text(*zip(*pairs)) if pairs else b"")


def test_write_index_formats_without_an_object_per_number_and_refuses_what_it_cannot_write(tmp_path):
    # write_index made a Python string per line (seconds per million records, and several
    # times the sidecar's size in memory), and zip() dropped the frames of the longer of
    # offsets and lengths without a word; negative numbers made a sidecar nothing reads.
    import tracemalloc

    from tfrecord_lite.errors import InvalidArgumentError
    from tfrecord_lite.index import write_index

    n = 200_000
    lengths = np.arange(n, dtype=np.int64) % 100_000 + 16
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    index_file = str(tmp_path / "big.index")
    tracemalloc.start()
    try:
        write_index(index_file, offsets, lengths)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    with open(index_file, "rb") as f:
        text = f.read()
    assert text == _sidecar_text(offsets.tolist(), lengths.tolist())
    assert peak < 2 * len(text)  # work arrays for a chunk of lines, no object per number
    for bad in (([0, 19], [19]), ([[0, 19]], [[19, 19]]), ([0, -19], [19, 19])):
        with pytest.raises(InvalidArgumentError) as info:
            write_index(index_file, *bad)
        assert info.value.path == index_file
    with open(index_file, "rb") as f:
        assert f.read() == text  # a refused write leaves the old sidecar
