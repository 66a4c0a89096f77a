"""``tfrecord-lite demo``: write a sharded dataset of image-like Examples, read it back
through TFRecordDataset, check every record against what was written, and print the
throughput of each side."""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

from . import _native
from ._version import __version__
from .dataset import TFRecordDataset
from .encoding import encode_examples
from .features import FixedLenFeature, RawTensorFeature
from .sharded import write_parallel

__all__ = ["run_demo"]


def run_demo(n: int = 20000, shards: int = 4) -> int:
    """Write n Examples (a 48x48x3 uint8 image, its label and name) into ``shards`` files,
    read them back with 2 threads, verify each one; 0 when all match, else 1 (reported on
    stderr)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(n, 48, 48, 3), dtype=np.uint8)
    labels = rng.integers(0, 1000, size=n)
    names = [f"img-{i:06d}.raw".encode() for i in range(n)]
    spec = {
        "image": RawTensorFeature((48, 48, 3), np.uint8),
        "label": FixedLenFeature([], np.int64),
        "name": FixedLenFeature([], bytes),
    }
    print(f"tfrecord_lite {__version__} ({_native.implementation} core, "
          f"CRC32C: {_native.framing.crc32c_backend()})")
    with tempfile.TemporaryDirectory(prefix="tfrecord-lite-demo-") as tmp:
        batch = 256

        def encode(rows):  # one call per chunk of row numbers
            rows = np.asarray(rows)
            return encode_examples({"image": images[rows], "label": labels[rows],
                                    "name": [names[i] for i in rows]}, raw=("image",))

        t0 = time.perf_counter()
        written = write_parallel(range(n), encode, os.path.join(tmp, "images"), num_shards=shards,
                                 num_workers=2, batched=True, chunk_size=batch)
        t_write = time.perf_counter() - t0
        paths = [shard.path for shard in written]
        nbytes = sum(os.path.getsize(p) for p in paths)
        print(f"wrote {n} Examples ({nbytes / 1e6:.1f} MB) into {len(paths)} shards under {tmp}")
        print(f"  encode+write: {n / t_write:,.0f} records/s, {nbytes / t_write / 1e6:,.0f} MB/s")

        t0 = time.perf_counter()
        t_check = 0.0  # comparing against the originals is the demo's work, not reading
        seen = np.zeros(n, dtype=bool)
        for parsed in TFRecordDataset(paths, spec, batch_size=batch, num_threads=2):
            t1 = time.perf_counter()
            rows = [int(name[4:10]) for name in parsed["name"]]
            if (not np.array_equal(parsed["image"], images[rows])
                    or not np.array_equal(parsed["label"], labels[rows])):
                print(f"MISMATCH in the batch holding {parsed['name'][0]!r}", file=sys.stderr)
                return 1
            seen[rows] = True
            t_check += time.perf_counter() - t1
        t_read = time.perf_counter() - t0 - t_check
        if not seen.all():
            print(f"{int((~seen).sum())} records missing", file=sys.stderr)
            return 1
        print(f"  read+CRC check+parse: {n / t_read:,.0f} records/s, {nbytes / t_read / 1e6:,.0f} MB/s")
        print(f"all {n} records verified (CRC32C, every feature equal to what was written)")
    return 0
