"""Writing at scale: tfrecord_lite against what people do with TensorFlow today.

1. Encode W2-shaped rows (tabular Examples: 10 scalar floats, 5 scalar int64, 2 short
   strings, one list of 32 floats) from NumPy columns and write them to 8 shards, with 1
   and 2 workers. tfrecord_lite: write_parallel with a vectorised Example encoder. TensorFlow:
   tf.train.Example + tf.io.TFRecordWriter, one shard per task in a multiprocessing pool.
2. Merge the 8 shards into one file. tfrecord_lite: merge (verbatim frames). TensorFlow:
   read with TFRecordDataset and rewrite with tf.io.TFRecordWriter.

TensorFlow runs in its own subprocess; this process never imports it. Figures are medians
of several runs. Usage: python benchmarks/bench_write.py [--rows N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tfrecord_lite  # noqa: E402

SHARDS = 8
BLOCK_ROWS = 2048

FLOATS = [f"f{i}" for i in range(10)]
INTS = [f"i{i}" for i in range(5)]
STRINGS = ["s0", "s1"]
LIST = "emb"


def make_columns(rows: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    cols = {name: rng.standard_normal(rows).astype(np.float32) for name in FLOATS}
    cols.update({name: rng.integers(-(10**6), 10**9, rows, dtype=np.int64) for name in INTS})
    words = np.array([b"red", b"green", b"blue", b"category_%d" % 7, b"", b"a-longer-label"])
    cols.update({name: words[rng.integers(0, len(words), rows)] for name in STRINGS})
    cols[LIST] = rng.standard_normal((rows, 32)).astype(np.float32)
    return cols


# -- the Example encoder -----------------------------------------------------------------
# A stand-in until tfrecord_lite ships its Example codec: swap encode_examples for
# tfrecord_lite.encode_examples then. Hand-written protobuf wire format, vectorised over
# rows with NumPy; map entries in sorted key order, as SerializeToString(deterministic=True).

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append(n & 0x7F | 0x80)
        n >>= 7


def _varints(values) -> tuple[np.ndarray, np.ndarray]:
    """(N, 10) padded varint bytes and their lengths, for int64 values (two's complement)."""
    v = np.asarray(values).astype(np.int64).view(np.uint64)
    n = np.ones(len(v), np.int64)
    for k in range(1, 10):
        n += v >= np.uint64(1 << (7 * k))
    out = np.zeros((len(v), 10), np.uint8)
    for k in range(10):
        byte = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        out[:, k] = byte | np.where(k < n - 1, 0x80, 0).astype(np.uint8)
    return out, n


def _const(b: bytes, rows: int):
    return np.frombuffer(b, np.uint8)[None, :], np.full(rows, len(b), np.int64)


def _entry_head(key: str, feature_len: int) -> bytes:
    k = key.encode()
    inner = b"\x0a" + _varint(len(k)) + k + b"\x12" + _varint(feature_len)
    return b"\x0a" + _varint(len(inner) + feature_len) + inner


def _assemble(segments, rows):
    """Lay every segment out at its maximum width, then drop the unused bytes with one mask:
    row-major order makes each row the concatenation of its segments. Returns (buf, ends)."""
    width = sum(data.shape[1] for data, _ in segments)
    mat = np.empty((rows, width), np.uint8)
    keep = np.empty((rows, width), bool)
    col = 0
    for data, n in segments:
        w = data.shape[1]
        mat[:, col:col + w] = data
        keep[:, col:col + w] = True if np.isscalar(n) and n == w else np.arange(w)[None, :] < np.reshape(n, (-1, 1))
        col += w
    return mat[keep], np.cumsum(keep.sum(axis=1))


def encode_examples(cols: dict) -> list:
    """Serialized tf.train.Example bytes for each row of the W2 columns."""
    rows = len(cols[FLOATS[0]])
    entries = []  # (key, segments) in sorted key order
    for name in FLOATS:
        head = _entry_head(name, 8) + b"\x12\x06\x0a\x04"
        entries.append((name, [_const(head, rows), (cols[name].view(np.uint8).reshape(rows, 4), 4)]))
    head = _entry_head(LIST, 134) + b"\x12\x83\x01\x0a\x80\x01"
    entries.append((LIST, [_const(head, rows), (cols[LIST].view(np.uint8).reshape(rows, 128), 128)]))
    for name in INTS:
        vb, vn = _varints(cols[name])
        k = name.encode()
        # entry = 0a len [0a klen key 12 flen [1a illen [0a vn varint]]]
        feat = vn + 4
        entry = 2 + len(k) + 2 + feat
        head = np.zeros((rows, 2 + 2 + len(k) + 4), np.uint8)
        head[:, 0] = 0x0A
        head[:, 1] = entry
        head[:, 2:4 + len(k)] = np.frombuffer(b"\x0a" + bytes([len(k)]) + k, np.uint8)
        off = 4 + len(k)
        head[:, off] = 0x12
        head[:, off + 1] = feat
        head[:, off + 2] = 0x1A
        head[:, off + 3] = vn + 2
        tail = np.zeros((rows, 2), np.uint8)
        tail[:, 0] = 0x0A
        tail[:, 1] = vn
        entries.append((name, [(head[:, : off + 4], off + 4), (tail, 2), (vb, vn)]))
    for name in STRINGS:
        s = cols[name]
        sn = np.char.str_len(s).astype(np.int64)
        sb = np.frombuffer(s.tobytes(), np.uint8).reshape(rows, s.dtype.itemsize)
        k = name.encode()
        head = np.zeros((rows, 4 + len(k) + 6), np.uint8)
        head[:, 0] = 0x0A
        head[:, 1] = 2 + len(k) + 2 + sn + 4
        head[:, 2:4 + len(k)] = np.frombuffer(b"\x0a" + bytes([len(k)]) + k, np.uint8)
        off = 4 + len(k)
        head[:, off] = 0x12
        head[:, off + 1] = sn + 4
        head[:, off + 2] = 0x0A
        head[:, off + 3] = sn + 2
        head[:, off + 4] = 0x0A
        head[:, off + 5] = sn
        entries.append((name, [(head, off + 6), (sb, sn)]))
    segments = [seg for _, segs in sorted(entries, key=lambda e: e[0]) for seg in segs]
    body_len = sum(np.broadcast_to(n, rows) for _, n in segments)
    assert (body_len < 16384).all() and (body_len >= 128).all()  # a 2-byte length varint
    prefix = np.empty((rows, 3), np.uint8)
    prefix[:, 0] = 0x0A
    prefix[:, 1] = (body_len & 0x7F) | 0x80
    prefix[:, 2] = body_len >> 7
    buf, ends = _assemble([(prefix, 3)] + segments, rows)
    mv = memoryview(buf)
    bounds = np.concatenate([[0], ends]).tolist()
    return [mv[bounds[i]:bounds[i + 1]] for i in range(rows)]


def encode_blocks(chunk):
    """write_parallel's batched encoder: each item is a dict of column blocks."""
    for block in chunk:
        yield from encode_examples(block)


def blocks(cols: dict, rows: int):
    for start in range(0, rows, BLOCK_ROWS):
        yield {k: v[start:start + BLOCK_ROWS] for k, v in cols.items()}


# -- TensorFlow, in its own process ---------------------------------------------------------

_TF_PEER = r'''
import json, multiprocessing as mp, os, sys, time
sys.path.insert(0, {bench_dir!r})
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def write_shard(args):
    import tensorflow as tf
    path, cols = args
    F = tf.train.Feature
    with tf.io.TFRecordWriter(path) as w:
        for r in range(len(cols["f0"])):
            feature = {{}}
            for name in {floats!r}:
                feature[name] = F(float_list=tf.train.FloatList(value=[cols[name][r]]))
            for name in {ints!r}:
                feature[name] = F(int64_list=tf.train.Int64List(value=[cols[name][r]]))
            for name in {strings!r}:
                feature[name] = F(bytes_list=tf.train.BytesList(value=[cols[name][r]]))
            feature["emb"] = F(float_list=tf.train.FloatList(value=cols["emb"][r]))
            ex = tf.train.Example(features=tf.train.Features(feature=feature))
            w.write(ex.SerializeToString())
    return path


def warm(_):
    import tensorflow as tf  # noqa: F401
    return os.getpid()


def main():
    from bench_write import make_columns
    rows, workers, runs, tmp = {rows}, {workers}, {runs}, {tmp!r}
    cols = make_columns(rows)
    bounds = [rows * i // {shards} for i in range({shards} + 1)]
    tasks = [(os.path.join(tmp, f"tf-{{i:05d}}-of-{shards:05d}.tfrecord"),
              {{k: v[bounds[i]:bounds[i + 1]] for k, v in cols.items()}}) for i in range({shards})]
    result = {{}}
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(warm, range(workers * 4))  # TensorFlow imported in every worker before timing
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            pool.map(write_shard, tasks, chunksize=1)
            times.append(time.perf_counter() - t)
        result["write"] = times
    if {merge}:
        import tensorflow as tf
        paths = [t[0] for t in tasks]
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            with tf.io.TFRecordWriter(os.path.join(tmp, "tf-merged.tfrecord")) as w:
                for rec in tf.data.TFRecordDataset(paths):
                    w.write(rec.numpy())
            times.append(time.perf_counter() - t)
        result["merge"] = times
    print(json.dumps(result))


if __name__ == "__main__":
    main()
'''


def run_tf(rows, workers, runs, tmp, merge):
    script = os.path.join(tmp, "tf_peer.py")
    with open(script, "w") as f:
        f.write(_TF_PEER.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), floats=FLOATS,
                                ints=INTS, strings=STRINGS, rows=rows, workers=workers, runs=runs,
                                tmp=tmp, shards=SHARDS, merge=merge))
    out = subprocess.run([sys.executable, script], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the TensorFlow peer failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    assert "tensorflow" not in sys.modules
    rows, runs = args.rows, args.runs
    cols = make_columns(rows)
    print(f"tfrecord_lite {tfrecord_lite.__version__} ({tfrecord_lite.implementation} core), "
          f"{rows:,} W2 rows -> {SHARDS} shards, medians of {runs} runs")
    with tempfile.TemporaryDirectory(prefix="bench-write-") as tmp:
        results = {}
        for workers in (1, 2):
            prefix = os.path.join(tmp, f"lite{workers}")
            lite = timed(lambda: tfrecord_lite.write_parallel(
                blocks(cols, rows), encode_blocks, prefix, SHARDS, num_workers=workers,
                chunk_size=1, batched=True, progress=False), runs)
            tf = statistics.median(run_tf(rows, workers, runs, tmp, merge=False)["write"])
            results[f"write, {workers} worker(s)"] = (lite, tf)
        shards = [tfrecord_lite.sharded.shard_path(os.path.join(tmp, "lite2"), i, SHARDS) for i in range(SHARDS)]
        out = os.path.join(tmp, "merged.tfrecord")
        lite_merge = timed(lambda: tfrecord_lite.merge(shards, out), runs)
        lite_verify = timed(lambda: tfrecord_lite.merge(shards, out, verify=True), runs)
        tf_merge = statistics.median(run_tf(rows, 1, runs, tmp, merge=True)["merge"])
        results["merge 8 shards"] = (lite_merge, tf_merge)
        results["merge 8 shards, verify=True"] = (lite_verify, tf_merge)
        nbytes = os.path.getsize(out)
    assert "tensorflow" not in sys.modules
    print(f"{'':32}{'tfrecord_lite':>14}{'TensorFlow':>12}{'speed-up':>10}")
    for name, (lite, tf) in results.items():
        print(f"{name:32}{lite:>13.3f}s{tf:>11.3f}s{tf / lite:>9.1f}x")
    print(f"({nbytes / 1e6:.1f} MB of records; write rates: "
          + ", ".join(f"{name.split(', ')[1]}: {rows / v[0]:,.0f} rows/s" for name, v in results.items()
                      if name.startswith("write")) + ")")


if __name__ == "__main__":
    main()
