"""The compiled core keeps the bytes objects it makes for long values (4 KiB and more) and
for distinct short ones (2-16 bytes: ids, tokens), and writes a later batch's values into
those nothing else refers to any more: a batch that is gone gives its objects to the next
one, never while anything holds them, and a reused object is a bytes object like a new one
(length, contents, hash). Each module that makes objects (the decoder, and the spans module:
DataLoader batches, raw records) keeps its own pool of long values' objects and its own ring
of short values' objects."""

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import _native

KIB = 1 << 10
MIB = 1 << 20
SPEC = {"img": tfl.FixedLenFeature([], bytes)}


def _values(sizes, fill=0):
    return [bytes([(fill + i) % 251]) * n for i, n in enumerate(sizes)]


def _split(values):
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return _native.spans.split_values(np.frombuffer(b"".join(values), np.uint8), offsets)


def _decode(values):
    return tfl.parse_example([tfl.encode_example({"img": v}) for v in values], SPEC)["img"]


MAKERS = {"split": (_split, "spans"), "decoded": (_decode, "example")}


@pytest.mark.parametrize("how", MAKERS)
def test_a_dropped_batch_gives_its_objects_to_the_next(core, how):
    make, module = MAKERS[how]
    first = make(_values([32 * KIB] * 64))
    ids = {id(v) for v in first}
    assert getattr(_native, module)._pool_kept()[0] == 64
    del first
    # 31 KiB: the same size class; 30 KiB: the one below, which may take a 32 KiB object
    expected = _values([32 * KIB] * 58 + [31 * KIB] * 3 + [30 * KIB] * 3, fill=9)
    second = make(expected)
    assert {id(v) for v in second} == ids
    assert second.tolist() == expected
    assert [hash(v) for v in second] == [hash(v) for v in expected]
    assert [len(v) for v in second] == [len(v) for v in expected]


@pytest.mark.parametrize("how", MAKERS)
def test_a_dropped_batch_gives_its_short_objects_to_the_next(core, how):
    make, module = MAKERS[how]
    sizes = [2 + i % 15 for i in range(90)]  # every length the ring serves, 2-16 bytes
    first = make(_values(sizes))
    ids = {id(v) for v in first}
    [hash(v) for v in first]  # cached in the objects: a reused one must not keep it
    assert getattr(_native, module)._short_kept() == 90
    del first
    expected = _values(sizes[::-1], fill=7)
    second = make(expected)
    assert {id(v) for v in second} == ids
    assert second.tolist() == expected
    assert [hash(v) for v in second] == [hash(v) for v in expected]
    assert [len(v) for v in second] == [len(v) for v in expected]
    assert getattr(_native, module)._short_kept() == 90


@pytest.mark.parametrize("size", [8 * KIB, 8], ids=["long", "short"])
@pytest.mark.parametrize("how", MAKERS)
def test_objects_anything_holds_are_never_written(core, how, size):
    make, _ = MAKERS[how]
    old = _values([size] * 40)
    held = make(old)  # the whole batch
    one = make(old)[3]  # one value of a batch that is gone
    view = memoryview(make(old)[4])
    array = np.frombuffer(make(old)[5], np.uint8)
    keys = {make(old)[6]: "a dict key"}
    hashed = make(old)[7]
    hash(hashed)  # its hash is cached in the object
    new = [make(_values([size] * 40, fill=f)) for f in range(1, 6)]
    assert held.tolist() == old
    assert one == old[3] and view.tobytes() == old[4] and array.tobytes() == old[5]
    assert list(keys) == [old[6]] and hashed == old[7] and hash(hashed) == hash(old[7])
    assert [batch.tolist() for batch in new] == [_values([size] * 40, fill=f) for f in range(1, 6)]
    assert len({id(v) for batch in new for v in batch} & {id(v) for v in held}) == 0


def test_values_between_the_ring_and_the_pool_are_not_kept(core):
    values = _values([4 * KIB - 1, 100, 17, 16, 2, 1, 0, 4 * KIB])
    batch = _split(values)
    assert batch.tolist() == values
    assert _native.spans._pool_kept() == (1, 4 * KIB)  # only the 4 KiB one
    # The 16- and 2-byte ones; b"" and single bytes are CPython's own objects.
    assert _native.spans._short_kept() == 2
    assert batch[5] is bytes([5]) and batch[6] is bytes()


def test_values_of_other_sizes_get_other_objects(core):
    first = _split(_values([64 * KIB] * 8))
    ids = {id(v) for v in first}
    del first
    smaller = _split(_values([16 * KIB] * 8, fill=3))  # a quarter: a 64 KiB object would waste 3/4
    assert not ids & {id(v) for v in smaller}
    assert smaller.tolist() == _values([16 * KIB] * 8, fill=3)


def test_the_pool_is_bounded(core):
    # Batches of 1 MiB all held: the pool keeps 8 batches' worth, the least recently used
    # going first (their batches keep them).
    held = [_split(_values([64 * KIB] * 16, fill=f)) for f in range(20)]
    count, kept = _native.spans._pool_kept()
    assert count == 8 * 16 and kept == 8 * MIB
    assert [b.tolist() for b in held] == [_values([64 * KIB] * 16, fill=f) for f in range(20)]
    # However large the batches, 128 MiB at most.
    big = [_split(_values([4 * MIB] * 16, fill=f)) for f in range(3)]
    assert _native.spans._pool_kept()[1] <= 128 * MIB
    del big, held
    gc.collect()
    _native.spans._pool_clear()
    assert _native.spans._pool_kept() == (0, 0)


def _tokens(count, fill=0):
    """count distinct 8-byte values (none shares an object with another)."""
    return [(fill << 32 | i).to_bytes(8, "little") for i in range(count)]


def test_the_short_ring_is_bounded(core):
    # Short values all held: the ring grows to 2**18 objects, then lets the batches keep the
    # rest; each of them still reads back as made.
    most = 1 << 18
    held = [_split(_tokens(1000, fill=f)) for f in range(most // 1000 + 20)]
    assert _native.spans._short_kept() == most
    assert all(b.tolist() == _tokens(1000, fill=f) for f, b in enumerate(held))
    del held
    gc.collect()
    again = _split(_tokens(1000, fill=3))  # the ring's objects are free again
    assert again.tolist() == _tokens(1000, fill=3) and _native.spans._short_kept() == most
    _native.spans._pool_clear()
    assert _native.spans._short_kept() == 0 and again.tolist() == _tokens(1000, fill=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from([0, 1, 2, 5, 16, 17, 4095, 4096, 4097, 5000, 9000, 16 * KIB,
                                                    20 * KIB]),
                                   max_size=12),
                          st.booleans()), max_size=12))
def test_batches_kept_and_dropped_in_any_order_read_back_as_made(rounds):
    """Whatever batches a consumer holds or drops, every value it holds reads back as made,
    compiled and pure-Python alike."""
    for backend in _native.available():
        with _native.use(backend):
            held = []
            for r, (sizes, keep) in enumerate(rounds):
                values = _values(sizes, fill=r)
                for batch in (_split(values), _decode(values)):
                    assert batch.tolist() == values
                    if keep:
                        held.append((batch, values))
                for batch, values in held:
                    assert batch.tolist() == values and [hash(v) for v in batch] == [hash(v) for v in values]


def test_release_memory_gives_back_what_is_kept_and_leaves_what_is_held(core, tmp_path):
    from tfrecord_lite import reader

    kept_values, held_values = _values([32 * KIB] * 40), _values([32 * KIB] * 40, fill=5)
    held = _decode(held_values)
    _split(kept_values)  # dropped: its objects stay in the pool
    column = tfl.parse_example([tfl.encode_example({"img": v}) for v in kept_values], SPEC, bytes_output="column")
    del column  # its 1.25 MiB values buffer stays as a recycled block
    path = tmp_path / "images.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write_many(tfl.encode_example({"img": v}) for v in kept_values)
    assert sum(1 for _ in tfl.TFRecordReader(path)) == 40  # a reader given no pool: the shared one
    tokens = _tokens(40)
    short_held = _decode(tokens)
    _split(tokens)
    assert _native.spans._pool_kept()[0] and _native.example._pool_kept()[0] and core._blocks_kept()
    assert _native.spans._short_kept() == _native.example._short_kept() == 40
    assert reader._shared_pool._buffers
    tfl.release_memory()
    assert _native.spans._pool_kept() == _native.example._pool_kept() == (0, 0)
    assert _native.spans._short_kept() == _native.example._short_kept() == 0
    assert short_held.tolist() == tokens
    assert core._blocks_kept() == [] and reader._shared_pool._buffers == []
    assert held.tolist() == held_values  # what a batch holds goes on as before
    again = _split(kept_values)
    assert again.tolist() == kept_values and _native.spans._pool_kept()[0] == 40
