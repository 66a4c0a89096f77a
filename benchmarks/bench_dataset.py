"""Multi-file pipeline benchmark: tfrecord_lite.TFRecordDataset vs tf.data vs the `tfrecord`
package's MultiTFRecordDataset in a DataLoader. Standalone: builds its own data.

Workloads
  W1  8 files x 1,250 image-like Examples (~32 KiB each)
  W2  1 file of 200,000 tabular Examples (10 floats, 5 int64, 2 short strings, 32 floats)
  DIR 1,000 small files in one directory, read with max_open_files=8

Each peer runs in its own subprocess (TensorFlow and `tfrecord` never share a process, and
tfrecord_lite's process never imports TensorFlow); the child reports wall time and peak RSS
(getrusage). tfrecord_lite batches raw records: set FEATURES below to a spec to parse too.
The `tfrecord` peer always decodes Examples (it has no raw mode), so it does more work.

    python benchmarks/bench_dataset.py [--data DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import time

FEATURES = None  # e.g. {"x": FixedLenFeature([32], np.float32), ...} once the codec is merged
BATCH = 256
HERE = os.path.dirname(os.path.abspath(__file__))


# -- data: Examples encoded by hand (protobuf wire format), so no TensorFlow is needed -----

def _varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field, payload):
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _feature(kind, values):
    if kind == "bytes":
        body = b"".join(_ld(1, v) for v in values)
        return _ld(1, body)
    if kind == "float":
        return _ld(2, _ld(1, struct.pack(f"<{len(values)}f", *values)))
    return _ld(3, _ld(1, b"".join(_varint(v) for v in values)))


def example(features: dict) -> bytes:
    entries = b"".join(_ld(1, _ld(1, k.encode()) + _ld(2, _feature(*v))) for k, v in sorted(features.items()))
    return _ld(1, entries)


def generate(data, quick):
    sys.path.insert(0, os.path.dirname(HERE))
    import random

    from tfrecord_lite import TFRecordWriter, build_index

    rng = random.Random(0)
    w1 = os.path.join(data, "w1")
    n1, n2, ndir = (150, 20_000, 200) if quick else (1250, 200_000, 1000)
    if not os.path.isdir(w1):
        os.makedirs(w1)
        for f in range(8):
            with TFRecordWriter(os.path.join(w1, f"part-{f}.tfrecord")) as w:
                for i in range(n1):
                    w.write(example({"image": ("bytes", [rng.randbytes(32 * 1024)]),
                                     "label": ("int", [i % 1000]), "shape": ("int", [64, 128, 4])}))
    w2 = os.path.join(data, "w2")
    if not os.path.isdir(w2):
        os.makedirs(w2)
        with TFRecordWriter(os.path.join(w2, "tabular.tfrecord")) as w:
            for i in range(n2):
                feats = {f"f{k}": ("float", [rng.random()]) for k in range(10)}
                feats.update({f"i{k}": ("int", [rng.randrange(-10**6, 10**6)]) for k in range(5)})
                feats.update({f"s{k}": ("bytes", [b"cat-%d" % rng.randrange(100)]) for k in range(2)})
                feats["vec"] = ("float", [rng.random() for _ in range(32)])
                w.write(example(feats))
    d = os.path.join(data, "dir")
    if not os.path.isdir(d):
        os.makedirs(d)
        for f in range(ndir):
            with TFRecordWriter(os.path.join(d, f"{f:04d}.tfrecord")) as w:
                for i in range(20):
                    w.write(rng.randbytes(200))
    for sub in ("w1", "w2"):  # the `tfrecord` package needs index files
        for name in os.listdir(os.path.join(data, sub)):
            path = os.path.join(data, sub, name)
            if name.endswith(".tfrecord") and not os.path.exists(path + ".index"):
                build_index(path)


# -- peers (each runs in a child process) ------------------------------------------------

def files_of(data, workload):
    d = os.path.join(data, workload.lower())
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".tfrecord"))


def run_lite(data, workload, threads):
    sys.path.insert(0, os.path.dirname(HERE))
    from tfrecord_lite import TFRecordDataset

    if workload == "DIR":
        ds = TFRecordDataset(os.path.join(data, "dir"), FEATURES, batch_size=BATCH, num_threads=threads,
                             max_open_files=8, cycle_length=8)
    else:
        files = files_of(data, workload)
        ds = TFRecordDataset(files, FEATURES, batch_size=BATCH, num_threads=threads,
                             cycle_length=min(len(files), max(threads, 1) * 2), max_open_files=16)
    n = 0
    for batch in ds:
        n += len(batch) if FEATURES is None else len(next(iter(batch.values())))
    assert "tensorflow" not in sys.modules
    return n


def run_tf(data, workload):
    import tensorflow as tf

    files = files_of(data, workload) if workload != "DIR" else sorted(
        os.path.join(data, "dir", n) for n in os.listdir(os.path.join(data, "dir")))
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .batch(BATCH, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
    n = 0
    for batch in ds.as_numpy_iterator():
        n += len(batch)
    return n


def run_tfrecord_pkg(data, workload):
    import torch
    from tfrecord.torch.dataset import MultiTFRecordDataset

    files = files_of(data, workload)
    names = {os.path.basename(p)[: -len(".tfrecord")]: 1.0 for p in files}
    d = os.path.dirname(files[0])
    ds = MultiTFRecordDataset(os.path.join(d, "{}.tfrecord"), os.path.join(d, "{}.tfrecord.index"),
                              names, infinite=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, collate_fn=lambda b: b)
    return sum(len(b) for b in loader)


def child(args):
    # Imports are not timed: TensorFlow alone takes seconds to import.
    if args.peer.startswith("lite"):
        sys.path.insert(0, os.path.dirname(HERE))
        import tfrecord_lite  # noqa: F401
    elif args.peer == "tf":
        import tensorflow  # noqa: F401
    else:
        import tfrecord.torch.dataset  # noqa: F401
        import torch  # noqa: F401
    start = time.perf_counter()
    if args.peer.startswith("lite"):
        n = run_lite(args.data, args.workload, int(args.peer[len("lite"):]))
    elif args.peer == "tf":
        n = run_tf(args.data, args.workload)
    else:
        n = run_tfrecord_pkg(args.data, args.workload)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"records": n, "seconds": seconds, "peak_rss_mb": rss}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(HERE, "data", "dataset"))
    p.add_argument("--quick", action="store_true", help="small data, for a smoke run")
    p.add_argument("--peer")
    p.add_argument("--workload")
    p.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peer:
        return child(args)
    if args.generate:
        return generate(args.data, args.quick)
    # Generate in a child too: a fork inherits the parent's peak RSS, which would then show
    # up in every peer's getrusage figure.
    subprocess.run([sys.executable, __file__, "--data", args.data, "--generate"] + ["--quick"] * args.quick,
                   check=True)
    plan = [(w, peer) for w in ("W1", "W2") for peer in ("lite1", "lite2", "tf", "tfrecord")]
    plan += [("DIR", "lite1"), ("DIR", "lite2"), ("DIR", "tf")]
    print(f"{'workload':8} {'peer':10} {'records':>8} {'seconds':>8} {'rec/s':>10} {'MB/s':>8} {'peak RSS MB':>11}")
    for workload, peer in plan:
        out = subprocess.run([sys.executable, __file__, "--data", args.data, "--peer", peer,
                              "--workload", workload], capture_output=True, text=True)
        if out.returncode:
            print(f"{workload:8} {peer:10} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        size = _bytes(args.data, workload)
        print(f"{workload:8} {peer:10} {r['records']:8d} {r['seconds']:8.2f} {r['records'] / r['seconds']:10.0f} "
              f"{size / r['seconds'] / 1e6:8.0f} {r['peak_rss_mb']:11.0f}", flush=True)


def _bytes(data, workload):
    d = os.path.join(data, workload.lower())
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if not n.endswith(".index"))


if __name__ == "__main__":
    main()
