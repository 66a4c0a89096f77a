"""The compiled decoder's large outputs (a bytes column's values, a raw column, a numeric
column it grows) come from recycled blocks: the block of an array that is gone goes to the
next batch that fits, never while the array lives, and what the new batch does not write
reads as the twin's output."""

import numpy as np

import tfrecord_lite as tfl
from tfrecord_lite import _native

MIB = 1 << 20


def _records(n, size, fill=0xAB, skip=()):
    """n Examples with an "img" of size bytes (absent in the rows of skip) and a "label"."""
    out = []
    for i in range(n):
        feats = {"label": [i]}
        if i not in skip:
            feats["img"] = [bytes([(fill + i) % 256]) * size]
        out.append(tfl.encode_example(feats))
    return out


def _address(array) -> int:
    return array.__array_interface__["data"][0]


def _column(records):
    return tfl.parse_example(records, {"img": tfl.FixedLenFeature([], bytes)}, bytes_output="column")["img"]


def test_a_gone_batch_block_goes_to_the_next_batch(core):
    first = _column(_records(40, 32 << 10))
    assert first.values.nbytes == 40 * (32 << 10)
    where = _address(first.values)
    del first
    assert where in [a for a, _ in core._blocks_kept()]
    second = _column(_records(38, 32 << 10, fill=7))  # a little smaller: the block still fits
    assert _address(second.values) == where
    assert second.to_list() == [bytes([(7 + i) % 256]) * (32 << 10) for i in range(38)]


def test_a_living_array_keeps_its_block(core):
    first = _column(_records(40, 32 << 10))
    expected = first.to_list()
    second = _column(_records(40, 32 << 10, fill=99))
    assert _address(second.values) != _address(first.values)
    assert first.to_list() == expected  # untouched by the second batch
    assert second.to_list()[0] == bytes([99]) * (32 << 10)


def test_blocks_far_larger_than_asked_are_not_used(core):
    big = _column(_records(40, 128 << 10))  # 5 MiB
    where = _address(big.values)
    del big
    small = _column(_records(40, 32 << 10))  # 1.25 MiB: the 5 MiB block would waste 4x
    assert _address(small.values) != where
    assert where in [a for a, _ in core._blocks_kept()]


def test_the_kept_blocks_are_bounded(core):
    batches = [_column(_records(20, 64 << 10, fill=i)) for i in range(20)]  # 20 blocks of 1.25 MiB
    del batches
    kept = core._blocks_kept()
    assert 0 < len(kept) <= 16
    huge = [_column(_records(2, 24 * MIB, fill=i)) for i in range(3)]  # 48 MiB each: over the budget together
    del huge
    assert sum(size for _, size in core._blocks_kept()) <= 128 * MIB


def test_raw_rows_not_written_are_zero_in_a_recycled_block(core):
    size = 48 << 10
    keys, raw = ["img"], {"img": size}
    full = core.decode_examples(_records(40, size, fill=0xFF), keys, raw)[1][0].values[0]
    where = _address(full)
    del full
    records = _records(40, size, skip={0, 5, 39})
    records[7] = tfl.encode_example({"img": [b"short"], "label": [7]})  # a length that does not fit
    out = core.decode_examples(records, keys, raw)[1][0]
    assert _address(out.values[0]) == where
    with _native.use("python"):
        twin = _native.example.decode_examples(records, keys, raw)[1][0]
    np.testing.assert_array_equal(out.values[0], twin.values[0])
    np.testing.assert_array_equal(out.values[1], twin.values[1])
    assert not out.values[0][[0, 5, 7, 39]].any()


def test_recycled_outputs_match_the_twin_through_parse_example(core):
    spec = {"img": tfl.RawTensorFeature([64, 512], np.uint8, default_value=3), "label": tfl.FixedLenFeature([], np.int64)}
    for fill, skip in [(1, ()), (2, {3, 4}), (3, {0})]:
        records = _records(40, 64 * 512, fill=fill, skip=skip)
        got = tfl.parse_example(records, spec)
        with _native.use("python"):
            want = tfl.parse_example(records, spec)
        np.testing.assert_array_equal(got["img"], want["img"])
        np.testing.assert_array_equal(got["label"], want["label"])
        del got


def _embeddings(n, width, seed):
    rows = np.random.default_rng(seed).standard_normal((n, width)).astype(np.float32)
    return rows, tfl.encode_examples({"emb": rows, "label": np.arange(n, dtype=np.int64)})


def test_a_large_numeric_column_grows_into_recycled_blocks(core):
    spec = {"emb": tfl.FixedLenFeature([768], np.float32), "label": tfl.FixedLenFeature([], np.int64)}
    rows, records = _embeddings(600, 768, 1)  # 1.8 MiB of floats
    first = tfl.parse_example(records, spec)["emb"]
    np.testing.assert_array_equal(first, rows)
    where = _address(first)
    del first
    rows, records = _embeddings(600, 768, 2)
    second = tfl.parse_example(records, spec)["emb"]
    assert _address(second) == where
    np.testing.assert_array_equal(second, rows)


def test_values_survive_a_column_growing_past_its_first_estimate(core):
    """Records that grow: the column is sized from the first record, then grows through
    malloc'd storage into blocks, and into larger blocks, keeping every value."""
    rng = np.random.default_rng(3)
    lists = [rng.standard_normal(8 * i).astype(np.float32) for i in range(1, 400)]  # 2.5 MiB in all
    records = [tfl.encode_example({"v": v}) for v in lists]
    for _ in range(3):  # the later rounds take the blocks the earlier ones left
        got = tfl.parse_example(records, {"v": tfl.VarLenFeature(np.float32)})["v"]
        np.testing.assert_array_equal(got.values, np.concatenate(lists))
        with _native.use("python"):
            want = tfl.parse_example(records, {"v": tfl.VarLenFeature(np.float32)})["v"]
        np.testing.assert_array_equal(got.indices, want.indices)


def test_threads_parsing_at_once_never_share_a_block(core):
    """Columns grow into blocks without the GIL, in several threads at once: each array
    keeps its own values while the others take and give blocks."""
    from concurrent.futures import ThreadPoolExecutor

    spec = {"emb": tfl.FixedLenFeature([512], np.float32), "label": tfl.FixedLenFeature([], np.int64)}
    inputs = [_embeddings(700, 512, seed) for seed in range(4)]  # 1.4 MiB of floats each

    def work(k):
        rows, records = inputs[k]
        kept = []
        for _ in range(6):
            kept.append(tfl.parse_example(records, spec)["emb"])
            if len(kept) > 2:
                kept.pop(0)  # its block goes back while the other threads parse
            for array in kept:  # the older one too, after the other threads' parses
                np.testing.assert_array_equal(array, rows)
        return kept

    with ThreadPoolExecutor(4) as pool:
        alive = [a for got in pool.map(work, range(4)) for a in got]
    assert len({_address(a) for a in alive}) == len(alive) == 8  # arrays alive together: no block twice
    for k, array in enumerate(alive):
        np.testing.assert_array_equal(array, inputs[k // 2][0])


def test_the_encoders_scratch_is_a_recycled_block(core):
    """encode_examples writes its records into a recycled block, then copies each out as
    bytes: the block goes back to be kept, and the next call takes that very block."""
    keys, kinds = [b"x"], [core.KIND_BYTES]
    data = [[bytes([i % 256]) * 1024 for i in range(2048)]]   # 2 MiB of records
    first = core.encode_examples(keys, kinds, data, 2048)
    kept = core._blocks_kept()
    assert len(kept) == 1 and kept[0][1] >= 2 * MIB
    assert core.encode_examples(keys, kinds, data, 2048) == first
    assert core._blocks_kept() == kept
    with _native.use("python"):
        assert _native.example.encode_examples(keys, kinds, data, 2048) == first
