"""Regenerate the golden files in this folder with TensorFlow (run by hand, never by tests):

    python tests/data/make_golden.py

Each file holds GOLDEN_RECORDS written by tf.io.TFRecordWriter with the named options.
"""

import os

GOLDEN_RECORDS = [b"hello", b"", b"world" * 100, bytes(range(256)) * 40]
FILES = {"golden.tfrecord": "", "golden.tfrecord.gz": "GZIP", "golden.tfrecord.zlib": "ZLIB"}

if __name__ == "__main__":
    import tensorflow as tf

    here = os.path.dirname(os.path.abspath(__file__))
    for name, option in FILES.items():
        with tf.io.TFRecordWriter(os.path.join(here, name), options=option) as w:
            for record in GOLDEN_RECORDS:
                w.write(record)
        print(name, tf.__version__)
