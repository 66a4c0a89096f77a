"""The compiled decoder's large outputs (a bytes column's values, a raw column) come from
recycled blocks: the block of an array that is gone goes to the next batch that fits, never
while the array lives, and what the new batch does not write reads as the twin's output."""

import gc

import numpy as np
import pytest

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


@pytest.fixture
def core():
    if "cython" not in _native.available():
        pytest.fail("the compiled core is not built; run `pip install .` (or build_ext --inplace)")
    with _native.use("cython"):
        gc.collect()
        yield _native.example


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
    batches = [_column(_records(20, 64 << 10, fill=i)) for i in range(8)]  # 8 blocks of 1.25 MiB
    del batches
    kept = core._blocks_kept()
    assert 0 < len(kept) <= 4
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
