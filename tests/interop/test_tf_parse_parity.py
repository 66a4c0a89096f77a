"""Parsing against live TensorFlow beyond test_tf_example: generated SequenceExample specs
and records, empty batches, features of no values, and defaults with shapes, on both
backends. Where TensorFlow fails by a bug of its own, the test holds ours to what the
README says instead."""

import numpy as np
import pytest

import tfrecord_lite as tfl

from .test_tf_example import assert_same

pytestmark = pytest.mark.interop

DEFAULTED = {
    "fixed": tfl.FixedLenFeature([2], np.float32, default_value=[1.5, -2.0]),
    "scalar": tfl.FixedLenFeature([], bytes, default_value=b"d'\"\x00"),
    "items": tfl.FixedLenSequenceFeature([2], np.int64, allow_missing=True, default_value=-7),
    "words": tfl.FixedLenSequenceFeature([], bytes, allow_missing=True, default_value=b"pad"),
    "extremes": tfl.FixedLenFeature([3], np.float32, default_value=[np.inf, -np.inf, np.nan]),
}


def test_printed_specs_parse_as_the_specs(tf, backend):
    """Schema.to_tf_code() is TensorFlow code that parses as the spec does, and to_code()
    tfrecord_lite code: FixedLenSequenceFeature's default_value (padding) was left out of
    to_tf(), so TensorFlow padded with zeros, and inf or nan defaults printed as bare names."""
    records = [tfl.encode_example(m) for m in (
        {"fixed": [3.0, 4.0], "scalar": b"s", "items": [1, 2, 3, 4], "words": [b"a"], "extremes": [1.0, 2.0, 3.0]},
        {"items": [5, 6], "words": [b"b", b"c", b"d"]},
        {},
    )]
    schema = tfl.Schema(DEFAULTED)
    tf_code, code = {"tf": tf}, {}
    exec(schema.to_tf_code(), tf_code)
    exec(schema.to_code(), code)
    expected = tf.io.parse_example(records, tf_code["features"])
    for got in (tfl.parse_example(records, schema), tfl.parse_example(records, code["features"])):
        for name in DEFAULTED:
            assert_same(got[name], expected[name])
