"""ShardedWriter and write_parallel: naming, routing, rolling, group atomicity, failures."""

import collections
import gc
import itertools
import os
import re
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfrecord_lite import EncodeError, TFRecordError, TFRecordReader, TFRecordWriter
from tfrecord_lite.errors import InvalidArgumentError
from tfrecord_lite.index import build_index
from tfrecord_lite.sharded import ShardedWriter, key_to_shard, shard_path, write_parallel

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
records_st = st.lists(st.binary(max_size=40), max_size=60)


def _read(paths):
    return [list(TFRecordReader(p)) for p in paths]


def test_naming():
    assert shard_path("out/data", 3, 16) == "out/data-00003-of-00016.tfrecord"
    assert shard_path("d", 0, 1, ".tfrecord.gz") == "d-00000-of-00001.tfrecord.gz"


def test_key_hash_is_stable():
    # crc32c of the key's bytes: fixed numbers, the same in every process and run.
    assert key_to_shard("123456789", 1 << 32) == 0xE3069283
    assert key_to_shard(b"123456789", 7) == 0xE3069283 % 7
    assert key_to_shard(123456789, 7) == 0xE3069283 % 7
    with pytest.raises(TFRecordError, match="routing key"):
        key_to_shard(1.5, 3)
    # A str that os.fsdecode() made of a file name that is not UTF-8 has no UTF-8 bytes.
    with pytest.raises(InvalidArgumentError, match=r"routing key 'caf\\udce9' has no UTF-8 encoding "
                       r"\(surrogates not allowed at position 3\).*os.fsencode\(key\)"):
        key_to_shard("caf\udce9", 3)
    assert key_to_shard(os.fsencode("caf\udce9"), 1 << 32) == key_to_shard(b"caf\xe9", 1 << 32)


@SETTINGS
@given(records=records_st, n=st.integers(1, 5), compression=st.sampled_from([None, "gzip", "zlib"]))
def test_round_robin_round_trip(backend, tmp_path_factory, records, n, compression):
    d = tmp_path_factory.mktemp("rr")
    with ShardedWriter(d / "x", n, compression=compression) as w:
        w.write_many(records[: len(records) // 2])
        for r in records[len(records) // 2:]:
            w.write(r)
    assert [s.path for s in w.shards] == [shard_path(d / "x", i, n) for i in range(n)]
    assert _read(w.shards) == [records[i::n] for i in range(n)]
    assert [s.records for s in w.shards] == [len(records[i::n]) for i in range(n)]


@SETTINGS
@given(records=records_st, n=st.integers(1, 5))
def test_key_routing_round_trip(backend, tmp_path_factory, records, n):
    d = tmp_path_factory.mktemp("key")
    keys = [r[:3] for r in records]
    with ShardedWriter(d / "x", n) as w:
        half = len(records) // 2
        w.write_many(records[:half], keys=keys[:half])
        for r, k in zip(records[half:], keys[half:]):
            w.write(r, key=k)
    shards = _read(w.shards)
    assert collections.Counter(r for s in shards for r in s) == collections.Counter(records)
    for i, got in enumerate(shards):
        assert got == [r for r, k in zip(records, keys) if key_to_shard(k, n) == i]


@SETTINGS
@given(records=records_st, max_records=st.none() | st.integers(1, 7),
       max_bytes=st.none() | st.integers(1, 200))
def test_rolling_round_trip(backend, tmp_path_factory, records, max_records, max_bytes):
    if max_records is None and max_bytes is None:
        max_records = 5
    d = tmp_path_factory.mktemp("roll")
    with ShardedWriter(d / "x", max_records_per_shard=max_records, max_bytes_per_shard=max_bytes,
                       index=True) as w:
        w.write_many(records)
    n = len(w.shards)
    assert [s.path for s in w.shards] == [shard_path(d / "x", i, n) for i in range(n)]
    shards = _read(w.shards)
    assert [r for s in shards for r in s] == records
    for s in shards:
        assert max_records is None or len(s) <= max_records
        assert max_bytes is None or len(s) == 1 or sum(len(r) + 16 for r in s) <= max_bytes
    for s in w.shards:
        assert open(s.path + ".index").read() == open(build_index(s.path, s.path + ".chk")).read()
    assert sorted(os.listdir(d)) == sorted(
        [os.path.basename(s.path) + e for s in w.shards for e in ("", ".index", ".chk")])


def test_rolling_with_no_records_writes_one_empty_shard(backend, tmp_path):
    with ShardedWriter(tmp_path / "x", max_records_per_shard=3) as w:
        pass
    assert w.shards == [(shard_path(tmp_path / "x", 0, 1), 0)]
    assert _read(w.shards) == [[]]


def test_sharded_writer_is_all_or_nothing(backend, tmp_path):
    with pytest.raises(RuntimeError):
        with ShardedWriter(tmp_path / "x", 4) as w:
            w.write_many([b"a"] * 10)
            raise RuntimeError
    with pytest.raises(RuntimeError):
        with ShardedWriter(tmp_path / "y", max_records_per_shard=2, index=True) as w:
            w.write_many([b"a"] * 10)
            raise RuntimeError
    assert os.listdir(tmp_path) == []


def test_group_commit_failure_removes_committed_shards(backend, tmp_path, monkeypatch):
    w = ShardedWriter(tmp_path / "x", 3)
    w.write_many([b"a", b"b", b"c"])
    target = w._writers[2]._atomic

    def fail():  # the last rename fails, after shards 0 and 1 are in place
        raise OSError("disk full")

    monkeypatch.setattr(target, "commit", fail)
    with pytest.raises(OSError, match="disk full"):
        w.close()
    assert os.listdir(tmp_path) == []


def test_sharded_writer_argument_errors(tmp_path):
    with pytest.raises(TFRecordError, match="neither"):
        ShardedWriter(tmp_path / "x")
    with pytest.raises(TFRecordError, match="both"):
        ShardedWriter(tmp_path / "x", 2, max_records_per_shard=3)
    with pytest.raises(TFRecordError, match="positive"):
        ShardedWriter(tmp_path / "x", 0)
    with pytest.raises(TFRecordError, match="uncompressed"):
        ShardedWriter(tmp_path / "x", 2, compression="gzip", index=True)
    with ShardedWriter(tmp_path / "x", max_records_per_shard=3) as w:
        with pytest.raises(TFRecordError, match="fixed num_shards"):
            w.write(b"a", key="k")
    assert os.listdir(tmp_path) == [os.path.basename(shard_path("x", 0, 1))]
    # A directory as prefix named the shards "out/-00000-of-00002.tfrecord".
    for make in (lambda p: ShardedWriter(p, 2), lambda p: ShardedWriter(p, max_records_per_shard=3),
                 lambda p: write_parallel(range(3), bytes, p, 2)):
        with pytest.raises(InvalidArgumentError, match=r"the shard prefix '.*out/' is a directory: the shards would "
                           r"be named '.*out/-00000-of-00002.tfrecord'.*End it with a file name: '.*out/train' "
                           r"gives '.*out/train-00000-of-00002.tfrecord'"):
            make(f"{tmp_path}/out/")
    assert not (tmp_path / "out").exists()


# -- write_parallel ---------------------------------------------------------------------

def encode_item(i):
    """Module level, so process pools can pickle it."""
    if i == 1234:
        raise ValueError("item 1234 is bad")
    return b"item-%d" % i


def _expected(n_items, num_shards, chunk):
    shards = [[] for _ in range(num_shards)]
    for i in range(n_items):
        shards[(i // chunk) % num_shards].append(b"item-%d" % i)
    return shards


@pytest.mark.parametrize("compression,index", [(None, True), ("gzip", False)])
def test_write_parallel_threads(backend, tmp_path, compression, index):
    out = write_parallel(iter(range(1000)), encode_item, tmp_path / "p", 3, num_workers=2,
                         chunk_size=37, compression=compression, index=index)
    assert [s.path for s in out] == [shard_path(tmp_path / "p", i, 3) for i in range(3)]
    expected = _expected(1000, 3, 37)
    assert _read(out) == expected
    assert [s.records for s in out] == [len(e) for e in expected]
    if index:
        for s in out:
            assert open(s.path + ".index").read() == open(build_index(s.path, s.path + ".chk")).read()


def test_write_parallel_processes(backend, tmp_path):
    out = write_parallel(range(600), encode_item, tmp_path / "p", 4, num_workers=2,
                         executor="process", chunk_size=50)
    assert _read(out) == _expected(600, 4, 50)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_write_parallel_failure_names_item_and_shard(backend, tmp_path, executor):
    with pytest.raises(EncodeError) as info:
        write_parallel(range(5000), encode_item, tmp_path / "p", 4, num_workers=2,
                       executor=executor, chunk_size=100)
    err = info.value
    assert (err.item, err.shard) == (1234, 12 % 4)
    assert err.path == shard_path(tmp_path / "p", 0, 4)
    assert "item 1234 (shard 0 of 4)" in str(err) and "ValueError: item 1234 is bad" in str(err)
    assert os.listdir(tmp_path) == []  # no shard under a final name, no temporary files


def test_write_parallel_rejects_unpicklable_encode_for_processes(tmp_path):
    with pytest.raises(TFRecordError, match="picklable"):
        write_parallel(range(3), lambda i: b"x", tmp_path / "p", 2, executor="process")
    assert os.listdir(tmp_path) == []


def test_write_parallel_bad_return_value(backend, tmp_path):
    """encode did not raise but returned what is no record: the error says so (not "encode
    raised"), and for a batched encode names which of the records it returned is wrong."""
    with pytest.raises(EncodeError, match=r"item 0 \(shard 0 of 2\): encode returned a value of type str, "
                       "not a bytes-like record"):
        write_parallel(range(10), str, tmp_path / "p", 2, num_workers=1)
    with pytest.raises(EncodeError, match=r"items 4..7 \(shard 1 of 2\): encode returned a value of type int "
                       "as record 2 of the 3 it returned, not a bytes-like record") as info:
        write_parallel(range(10), lambda chunk: [b"a", b"b", 0] if chunk[0] == 4 else [b"c"], tmp_path / "p", 2,
                       num_workers=1, chunk_size=4, batched=True)
    assert (info.value.item, info.value.shard) == (4, 1)
    with pytest.raises(EncodeError, match=r"items 0..3 \(shard 0 of 2\): encode returned one bytes; with "
                       "batched=True it returns an iterable"):
        write_parallel(range(10), lambda chunk: b"".join(b"%d" % i for i in chunk), tmp_path / "p", 2,
                       num_workers=1, chunk_size=4, batched=True)
    assert os.listdir(tmp_path) == []


def test_write_parallel_frames_any_contiguous_buffer_and_names_a_bad_one(backend, tmp_path):
    """Workers frame a chunk's records in one call: bytes, bytearray and uint8 arrays go in
    as they are; a buffer that is not contiguous fails as its own item, not the chunk's last."""
    def encode(i):
        return (b"b%d" % i, bytearray(b"a%d" % i), np.frombuffer(b"n%d" % i, np.uint8))[i % 3]

    write_parallel(range(30), encode, tmp_path / "ok", 2, num_workers=2, chunk_size=10)
    got = [r for i in range(2) for r in TFRecordReader(shard_path(tmp_path / "ok", i, 2))]
    assert sorted(got) == sorted(bytes(encode(i)) for i in range(30))
    with pytest.raises(EncodeError, match=r"item 7 \(shard 0 of 2\)"):
        write_parallel(range(10), lambda i: np.arange(4)[::2] if i == 7 else b"x", tmp_path / "bad", 2,
                       num_workers=1, chunk_size=10)
    assert not any(name.startswith("bad") for name in os.listdir(tmp_path))


@pytest.mark.parametrize("batched", [False, True])
def test_write_parallel_refuses_object_arrays(backend, tmp_path, batched):
    """An object array's buffer is its objects' addresses: the item fails, nothing is written."""
    names = np.array([b"alice", b"bob"], dtype=object)

    def encode(i):
        return names[:1] if i == 3 else b"x"

    with pytest.raises(EncodeError, match=(r"items 2..3" if batched else r"item 3") +
                       r" \(shard 1 of 2\).*pointers to Python objects"):
        write_parallel(range(6), (lambda chunk: [encode(i) for i in chunk]) if batched else encode,
                       tmp_path / "p", 2, num_workers=1, chunk_size=2, batched=batched)
    assert os.listdir(tmp_path) == []


def test_write_parallel_is_lazy_and_bounded(backend, tmp_path):
    consumed = []

    def items():
        for i in range(2000):
            consumed.append(i)
            yield i

    seen_ahead = []

    def encode(i):
        seen_ahead.append(len(consumed) - i)
        return b"%d" % i

    write_parallel(items(), encode, tmp_path / "p", 2, num_workers=2, chunk_size=10)
    # At most 2 * workers + 1 chunks beyond the one being encoded have been pulled.
    assert max(seen_ahead) <= 10 * (2 * 2 + 2)


def encode_block(chunk):
    """A batched encoder: each item is a (start, count) block of rows."""
    for start, n in chunk:
        if n == 0:
            raise ValueError("bad block")
        yield from (b"item-%d" % i for i in range(start, start + n))


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_write_parallel_batched(backend, tmp_path, executor):
    blocks = [(i * 7, 7) for i in range(20)]
    out = write_parallel(blocks, encode_block, tmp_path / "b", 3, num_workers=2, executor=executor,
                         chunk_size=1, batched=True)
    assert [s.records for s in out] == [49, 49, 42]
    assert _read(out) == _expected(140, 3, 7)
    with pytest.raises(EncodeError, match=r"items 3..5 \(shard 1 of 2\).*bad block"):
        write_parallel([(0, 1)] * 3 + [(5, 0)] * 3, encode_block, tmp_path / "c", 2, num_workers=1,
                       executor=executor, chunk_size=3, batched=True)
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(s.path) for s in out]


def test_write_many_needs_one_key_per_record(backend, tmp_path):
    recs = [b"r%d" % i for i in range(10)]
    # Sized records: counted first, nothing written.
    for n, (keys, told) in enumerate(((["a", "b"], "2"), (iter(["a", "b"]), "2"), (["k"] * 11, "11"),
                                      (iter(["k"] * 50), "more than 10"), (itertools.count(), "more than 10"))):
        # An iterator is read one past the records: its count was given as 11, whatever it was.
        with ShardedWriter(tmp_path / f"s{n}", 3) as w:
            with pytest.raises(InvalidArgumentError, match=f"write_many got 10 records but {told} keys.*"
                               "Pass one key per record; nothing was written"):
                w.write_many(recs, keys=keys)
            assert w.records_written == 0
    # Unsized records: a chunk short of keys is refused; extra keys are found at the end.
    with ShardedWriter(tmp_path / "g", 3) as w:
        with pytest.raises(InvalidArgumentError, match="got at least 10 records but 2 keys"):
            w.write_many(iter(recs), keys=iter(["a", "b"]))
        assert w.records_written == 0
        with pytest.raises(InvalidArgumentError, match="got 10 records but more than 10 keys"):
            w.write_many(iter(recs), keys=iter(["k"] * 11))
        w.write_many(iter(recs), keys=iter(range(10)))
    assert sorted(r for s in _read(w.shards) for r in s) == sorted(recs * 2)
    with ShardedWriter(tmp_path / "roll", max_records_per_shard=3) as w:
        for keys in (iter(["a"] * 10), ["a"] * 10):
            with pytest.raises(InvalidArgumentError, match="routing by key needs a fixed num_shards"):
                w.write_many(recs, keys=keys)
        assert w.records_written == 0


@pytest.mark.parametrize("limit", ["records", "bytes"])
def test_rolling_limits_hold_under_threads(backend, tmp_path, monkeypatch, limit):
    """The limit check and the write are one step: threads writing at once never take a
    shard past max_records_per_shard or max_bytes_per_shard. Each shard's write is slowed,
    so that without that, other threads' records land between a check and its write."""
    add_shard = ShardedWriter._add_shard

    def slow_shards(self, num_shards):
        add_shard(self, num_shards)
        w = self._writers[-1]
        write = w.write
        w.write = lambda record: (time.sleep(0.002), write(record))

    monkeypatch.setattr(ShardedWriter, "_add_shard", slow_shards)
    options = {"max_records_per_shard": 3} if limit == "records" else {"max_bytes_per_shard": 3 * (16 + 4)}
    records = [[b"%d-%02d" % (t, i) for i in range(20)] for t in range(4)]
    with ShardedWriter(tmp_path / "x", **options) as w:
        threads = [threading.Thread(target=lambda rs=rs: [w.write(r) for r in rs]) for rs in records]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    shards = _read(w.shards)
    assert max(map(len, shards)) == 3 and [s.records for s in w.shards] == list(map(len, shards))
    assert sorted(r for s in shards for r in s) == sorted(r for rs in records for r in rs)


@pytest.mark.parametrize("limit", [{"max_records_per_shard": 2}, {"max_bytes_per_shard": 2 * (16 + 1)}])
def test_a_rolling_write_of_no_record_opens_no_shard(backend, tmp_path, limit):
    """A record that is not bytes-like, arriving when the shard was full, rolled to a new
    shard before its write failed: closing then committed an extra, empty shard."""
    with ShardedWriter(tmp_path / "r", **limit) as w:
        w.write_many([b"a", b"b"])
        with pytest.raises(TFRecordError, match="cannot write a int as a record"):
            w.write(123)
    assert [s.records for s in w.shards] == [2] and _read(w.shards) == [[b"a", b"b"]]


def test_a_write_racing_close_lands_or_fails(backend, tmp_path, monkeypatch):
    """A write that reached a shard after close() had finished it, but before the group
    committed it, returned and was counted, yet never reached the file; it now fails."""
    w = ShardedWriter(tmp_path / "x", 2)
    w.write_many([b"a", b"b"])
    first, second = w._writers
    finish, late = second._finish, []

    def finish_while_another_thread_writes():
        finish()  # shard 0 is finished already, its commit still to come
        t = threading.Thread(target=lambda: late.append(pytest.raises(TFRecordError, first.write, b"late")))
        t.start()
        t.join()

    monkeypatch.setattr(second, "_finish", finish_while_another_thread_writes)
    shards = w.close()
    assert len(late) == 1 and "closed" in str(late[0].value)
    assert _read(shards) == [[b"a"], [b"b"]] and [s.records for s in shards] == [1, 1]


def test_write_parallel_failing_to_open_a_shard_aborts_those_before_it(backend, tmp_path, recwarn):
    """A shard that cannot be opened (a directory stands under its name) fails write_parallel
    before anything is encoded, and the shards opened before it are aborted then, not left to
    the garbage collector (which warned that they were never closed)."""
    os.makedirs(shard_path(tmp_path / "p", 2, 4))
    with pytest.raises(IsADirectoryError, match="names a directory"):
        write_parallel(range(10), bytes, tmp_path / "p", 4, num_workers=2)
    gc.collect()
    assert os.listdir(tmp_path) == [os.path.basename(shard_path(tmp_path / "p", 2, 4))]
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize("batched", [False, True])
def test_write_parallel_progress_counts_what_its_total_counts(backend, tmp_path, monkeypatch, batched):
    """The bar's total is the number of items; a batched encoder returns any number of
    records per chunk, so the bar advances by items too, ending at its total."""
    import tfrecord_lite.sharded as sharded

    bars = []

    class Bar:
        def __init__(self, total=None, **kwargs):
            self.total, self.n = total, 0
            bars.append(self)

        def update(self, n=1):
            self.n += n

        def close(self):
            pass

    monkeypatch.setattr(sharded, "_progress", Bar)
    encode = (lambda chunk: [b"r"] * 100 * len(chunk)) if batched else bytes
    write_parallel(range(20), encode, tmp_path / "p", 2, num_workers=1, chunk_size=3, batched=batched)
    assert [(bar.total, bar.n) for bar in bars] == [(20, 20)]


def test_a_failed_group_commit_puts_back_the_files_it_replaced(backend, tmp_path, monkeypatch):
    """A re-run over an earlier dataset whose last shard failed to commit removed the shards
    already renamed over the old ones, so the earlier dataset was partly gone."""
    prefix = tmp_path / "x"
    old = [s.path for s in write_parallel(range(6), lambda i: b"old%d" % i, prefix, num_shards=3, index=True)]
    before = {p: open(p, "rb").read() for p in old} | {p + ".index": open(p + ".index", "rb").read() for p in old}
    w = ShardedWriter(prefix, 3, index=True)
    w.write_many([b"new"] * 9)
    monkeypatch.setattr(w._writers[2]._atomic, "commit", lambda: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        w.close()
    assert {p: open(p, "rb").read() for p in before} == before
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in before)
    # a commit that stands leaves no copies behind
    with ShardedWriter(prefix, 3, index=True) as w:
        w.write_many([b"new"] * 9)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in before)
    assert all(list(TFRecordReader(p)) == [b"new"] * 3 for p in old)


@pytest.mark.parametrize("index, fsync", [(False, False), (True, True)])
def test_rolling_shards_need_no_descriptor_each(backend, tmp_path, few_descriptors, index, fsync):
    # Every rolled shard used to stay open until close: 200 of them failed with EMFILE
    # under `ulimit -n 64`. A full shard is now closed (and committed with the rest at close).
    with ShardedWriter(tmp_path / "x", max_records_per_shard=2, index=index, fsync=fsync) as w:
        w.write_many(b"%d" % i for i in range(400))
    assert [s.records for s in w.shards] == [2] * 200
    assert [r for s in w.shards for r in TFRecordReader(s)] == [b"%d" % i for i in range(400)]
    assert len(os.listdir(tmp_path)) == (400 if index else 200)
    with pytest.raises(RuntimeError):
        with ShardedWriter(tmp_path / "y", max_records_per_shard=2, index=index) as w:
            w.write_many(b"%d" % i for i in range(400))
            raise RuntimeError
    assert not [n for n in os.listdir(tmp_path) if not n.startswith("x-")]


@pytest.mark.parametrize("index", [False, True])
def test_too_many_fixed_shards_for_the_open_file_limit_say_what_to_do(backend, tmp_path, few_descriptors,
                                                                      recwarn, index):
    # A fixed shard count keeps every shard open; past the limit the error was a bare
    # EMFILE naming one shard.
    need = 400 if index else 200
    with pytest.raises(TFRecordError, match=f"out of file descriptors \\(ulimit -n is \\d+\\): 200 shards "
                       f"written at once keep {need} files open.*Raise the limit.*write fewer shards"):
        ShardedWriter(tmp_path / "x", 200, index=index)
    with pytest.raises(TFRecordError, match=f"keep {need} files open"):
        write_parallel(range(10), bytes, tmp_path / "p", 200, index=index)
    gc.collect()
    assert os.listdir(tmp_path) == []
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]


def test_shards_refuse_an_index_path(backend, tmp_path):
    # index="x.index" was taken as a sidecar path for every shard: each wrote its sidecar
    # over the others', and the one left described one shard (the last committed).
    from tfrecord_lite import TFRecordWriter, split

    src = tmp_path / "in.tfrecord"
    with TFRecordWriter(src) as w:
        w.write_many([b"a", b"bb", b"ccc"])
    for make in (lambda idx: ShardedWriter(tmp_path / "s", 2, index=idx),
                 lambda idx: ShardedWriter(tmp_path / "s", max_records_per_shard=2, index=idx),
                 lambda idx: write_parallel(range(3), bytes, tmp_path / "s", 2, index=idx),
                 lambda idx: split(src, 2, tmp_path / "s", index=idx)):
        with pytest.raises(InvalidArgumentError, match="index must be True or False for shards, not '.*x.index': "
                           "each shard's sidecar is its own path"):
            make(str(tmp_path / "x.index"))
    assert os.listdir(tmp_path) == ["in.tfrecord"]


class _Options:
    """Stands in for tf.io.TFRecordOptions: what TFRecordWriter reads of one."""

    def __init__(self, compression_type, compression_level=None):
        self.compression_type, self.compression_level = compression_type, compression_level


def _written_alone(path, records, compression, level):
    with TFRecordWriter(path, compression, compression_level=level) as w:
        w.write_many(records)
    return path.read_bytes()


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("level", [0, 1, 9])
def test_shards_take_a_compression_level_as_the_writer_does(backend, tmp_path, compression, level):
    records = [bytes(range(i % 7, 200)) * 3 for i in range(40)]
    alone = [_written_alone(tmp_path / f"alone{i}", records[i::2], compression, level) for i in range(2)]
    assert alone[0] != _written_alone(tmp_path / "default", records[::2], compression, None)
    runs = {
        "sharded": lambda p: ShardedWriter(p, 2, compression=compression, compression_level=level),
        "options": lambda p: ShardedWriter(p, 2, compression=_Options(compression.upper(), level)),
    }
    for name, make in runs.items():
        with make(tmp_path / name) as w:
            w.write_many(records)
        assert [open(s, "rb").read() for s in w.shards] == alone, name
    for name, compression_args in {"parallel": dict(compression=compression, compression_level=level),
                                   "parallel-options": dict(compression=_Options(compression, level))}.items():
        shards = write_parallel(records, bytes, tmp_path / name, 2, num_workers=2, chunk_size=1, **compression_args)
        assert [open(s, "rb").read() for s in shards] == alone, name


def test_shards_refuse_a_bad_compression_level_before_writing(tmp_path):
    for make in (lambda: ShardedWriter(tmp_path / "s", 2, compression="gzip", compression_level=10),
                 lambda: write_parallel([b"a"], bytes, tmp_path / "p", 2, compression="gzip", compression_level=10)):
        with pytest.raises(InvalidArgumentError, match="compression_level=10"):
            make()
    assert os.listdir(tmp_path) == []


def test_counts_may_be_numpy_integers_but_not_bools(backend, tmp_path):
    # num_shards=np.int64(2) was refused ("must be a positive int, not np.int64(2)"), and
    # num_shards=True taken for 1.
    from tfrecord_lite import split

    with ShardedWriter(tmp_path / "f", np.int64(2)) as w:
        w.write_many([b"a", b"b", b"c"])
    assert [s.records for s in w.shards] == [2, 1]
    with ShardedWriter(tmp_path / "r", max_records_per_shard=np.int32(2), max_bytes_per_shard=np.uint16(100)) as w:
        w.write_many([b"a", b"b", b"c"])
    assert [s.records for s in w.shards] == [2, 1]
    shards = write_parallel([b"a", b"b", b"c"], bytes, tmp_path / "p", np.int64(2), num_workers=np.int8(2),
                            chunk_size=np.int64(1))
    assert [s.records for s in shards] == [2, 1]
    assert [s.records for s in split(w.shards[0], np.int64(2), tmp_path / "s")] == [1, 1]
    for name, make in {"num_shards": lambda v: ShardedWriter(tmp_path / "x", v),
                       "max_records_per_shard": lambda v: ShardedWriter(tmp_path / "x", max_records_per_shard=v),
                       "chunk_size": lambda v: write_parallel([b"a"], bytes, tmp_path / "x", 2, chunk_size=v),
                       "num_workers": lambda v: write_parallel([b"a"], bytes, tmp_path / "x", 2, num_workers=v),
                       "num_shards ": lambda v: split(w.shards[0], v, tmp_path / "x")}.items():
        for bad in (True, 0, np.int64(-1), 2.0, "2"):
            with pytest.raises(InvalidArgumentError, match=f"{name.strip()} must be a positive int"):
                make(bad)
    assert not [n for n in os.listdir(tmp_path) if n.startswith("x")]


@pytest.mark.parametrize("index", [False, True])
def test_a_rolling_shards_errors_name_it_as_it_will_be_found(backend, tmp_path, monkeypatch, index):
    """A rolled shard is written under a provisional name (its count is known only at
    close) that no file ever has: a write failing there ("File too large") named
    log-00001.tfrecord, which the user cannot find. Errors now name log-00001-of-NNNNN."""
    from tfrecord_lite.io import NamedWriter

    write = NamedWriter.write

    def too_large(self, data):
        if "00001" in self._name():
            raise OSError(27, "File too large", self._name())
        return write(self, data)

    monkeypatch.setattr(NamedWriter, "write", too_large)
    prefix = str(tmp_path / "log")
    shown = re.escape(f"{prefix}-00001-of-NNNNN.tfrecord")
    w = ShardedWriter(prefix, max_records_per_shard=2, index=index)
    with pytest.raises(OSError, match="File too large") as raised:
        for _ in range(6):
            w.write(b"x" * (1 << 17))
            w.write_many([b"y"] * 3000)  # a sidecar's lines too
    assert raised.value.filename.startswith(f"{prefix}-00001-of-NNNNN.tfrecord")
    with pytest.raises(TFRecordError, match=f"^{shown}: an earlier write to the file failed") as raised:
        w.close()
    assert "log-00001.tfrecord" not in str(raised.value)
    assert os.listdir(tmp_path) == []
