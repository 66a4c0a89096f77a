"""Interleave order against live TensorFlow: TFRecordDataset(deterministic=True) must yield
exactly what Dataset.from_tensor_slices(files).interleave(TFRecordDataset, cycle_length,
block_length) yields."""

import pytest

from tfrecord_lite import TFRecordDataset, TFRecordWriter

COUNTS = [5, 0, 9, 1, 13, 4, 7]


@pytest.mark.interop
def test_interleave_matches_tensorflow(backend, tmp_path):
    import tensorflow as tf  # missing TensorFlow must fail this test, not skip it

    files = []
    for f, n in enumerate(COUNTS):
        path = str(tmp_path / f"{f}.tfrecord")
        with TFRecordWriter(path, compression="gzip" if f % 3 == 2 else None) as w:
            for j in range(n):
                w.write(b"%d:%d" % (f, j))
        files.append(path)
    for cycle, block in [(1, 1), (2, 1), (3, 2), (4, 3), (7, 1), (9, 4)]:
        want = [
            r.numpy()
            for r in tf.data.Dataset.from_tensor_slices(files).interleave(
                lambda p: tf.data.TFRecordDataset(p, compression_type=tf.where(
                    tf.strings.regex_full_match(p, r".*/(2|5)\.tfrecord"), "GZIP", "")),
                cycle_length=cycle, block_length=block)
        ]
        got = list(TFRecordDataset(files, cycle_length=cycle, block_length=block, num_threads=2,
                                   max_open_files=9))
        assert got == want, (backend.name, cycle, block)
