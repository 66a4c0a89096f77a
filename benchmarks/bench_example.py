"""Example parsing and encoding: tfrecord_lite against TensorFlow and the `tfrecord` package.

Workloads (generated here, scaled by --scale, so the script runs on its own):
  W1  image-like Examples: one raw uint8 (96, 112, 3) image (~32 KiB) + an int64 label
  W2  tabular Examples: 10 scalar floats, 5 scalar int64s, 2 short strings, 32 floats
Each peer runs in its own subprocess, single-threaded, parsing into batches of 1,024 numpy
arrays; encode+write goes from numpy rows to a TFRecord file. Ratios are of medians.

    python benchmarks/bench_example.py [--scale 0.25] [--rounds 3] [--runs 2]
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
from itertools import islice

import numpy as np

BATCH = 1024
IMAGE = (96, 112, 3)
W1_FILES, W1_PER_FILE, W2_RECORDS = 8, 1250, 200_000


def w2_columns(n, seed=0):
    rng = np.random.default_rng(seed)
    cols = {f"f{i}": rng.standard_normal(n).astype(np.float32) for i in range(10)}
    cols.update({f"i{i}": rng.integers(-1000, 1000, n) for i in range(5)})
    words = np.array([b"alpha", b"beta", b"gamma", b"delta", b"epsilon"], dtype=object)
    cols.update({f"s{i}": words[rng.integers(0, 5, n)] for i in range(2)})
    cols["vec"] = rng.standard_normal((n, 32)).astype(np.float32)
    return cols


def w1_columns(n, seed=0):
    rng = np.random.default_rng(seed)
    return {"image": rng.integers(0, 256, (n,) + IMAGE, dtype=np.uint8), "label": rng.integers(0, 1000, n)}


def generate(workdir, scale):
    import tfrecord_lite as tfl
    files = {"W1": [], "W2": []}
    per_file = max(1, int(W1_PER_FILE * scale))
    for i in range(W1_FILES):
        path = os.path.join(workdir, f"w1-{i}.tfrecord")
        with tfl.TFRecordWriter(path) as w:
            w.write_many(tfl.encode_examples(w1_columns(per_file, i), raw=("image",)))
        files["W1"].append(path)
    path = os.path.join(workdir, "w2.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write_many(tfl.encode_examples(w2_columns(max(BATCH, int(W2_RECORDS * scale)))))
    files["W2"].append(path)
    return files


# -- peers (each runs in its own process) --------------------------------------------------

def lite_parse(files, workload):
    import tfrecord_lite as tfl
    if workload == "W1":
        spec = {"image": tfl.RawTensorFeature(IMAGE, np.uint8), "label": tfl.FixedLenFeature([], np.int64)}
    else:
        spec = {f"f{i}": tfl.FixedLenFeature([], np.float32) for i in range(10)}
        spec.update({f"i{i}": tfl.FixedLenFeature([], np.int64) for i in range(5)})
        spec.update({f"s{i}": tfl.FixedLenFeature([], bytes) for i in range(2)})
        spec["vec"] = tfl.FixedLenFeature([32], np.float32)
    n = 0
    for path in files:
        with open(path, "rb") as f:
            records = iter(tfl.TFRecordReader(f.read()))
        while batch := list(islice(records, BATCH)):
            n += len(tfl.parse_example(batch, spec)["label" if workload == "W1" else "f0"])
    return n


def tf_parse(files, workload):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if workload == "W1":
        spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

        def fn(x):
            d = tf.io.parse_example(x, spec)
            d["image"] = tf.reshape(tf.io.decode_raw(d["image"], tf.uint8), (-1,) + IMAGE)
            return d
    else:
        spec = {f"f{i}": tf.io.FixedLenFeature([], tf.float32) for i in range(10)}
        spec.update({f"i{i}": tf.io.FixedLenFeature([], tf.int64) for i in range(5)})
        spec.update({f"s{i}": tf.io.FixedLenFeature([], tf.string) for i in range(2)})
        spec["vec"] = tf.io.FixedLenFeature([32], tf.float32)

        def fn(x):
            return tf.io.parse_example(x, spec)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    ds = tf.data.TFRecordDataset(files).batch(BATCH).map(fn).with_options(options)
    n = 0
    for d in ds:
        arrays = {k: v.numpy() for k, v in d.items()}
        n += len(arrays["label" if workload == "W1" else "f0"])
    return n


def tfrecord_parse(files, workload):
    from tfrecord.reader import tfrecord_loader
    if workload == "W1":
        desc = {"image": "byte", "label": "int"}
    else:
        desc = {f"f{i}": "float" for i in range(10)}
        desc.update({f"i{i}": "int" for i in range(5)})
        desc.update({f"s{i}": "byte" for i in range(2)})
        desc["vec"] = "float"
    n = 0

    def collate(rows):
        out = {}
        for k in rows[0]:
            if workload == "W1" and k == "image":
                out[k] = np.stack([np.frombuffer(r[k], np.uint8) for r in rows]).reshape((-1,) + IMAGE)
            elif k.startswith("s"):
                out[k] = np.array([bytes(r[k]) for r in rows], dtype=object)
            else:
                out[k] = np.stack([r[k] for r in rows])
        return out
    for path in files:
        rows = []
        for row in tfrecord_loader(path, None, desc):
            rows.append(row)
            if len(rows) == BATCH:
                n += len(collate(rows)["label" if workload == "W1" else "f0"])
                rows = []
        if rows:
            n += len(collate(rows)["label" if workload == "W1" else "f0"])
    return n


def lite_write(out, n, columnar):
    import tfrecord_lite as tfl
    cols = w2_columns(n)
    with tfl.TFRecordWriter(out) as w:
        if columnar:
            w.write_many(tfl.encode_examples(cols))
        else:
            names = list(cols)
            for i in range(n):
                w.write(tfl.encode_example({k: cols[k][i] for k in names}))
    return n


def tf_write(out, n):
    import tensorflow as tf
    cols = w2_columns(n)
    names = list(cols)
    with tf.io.TFRecordWriter(out) as w:
        for i in range(n):
            feats = {}
            for k in names:
                v = cols[k][i]
                if k.startswith("s"):
                    feats[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
                elif k.startswith("i"):
                    feats[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
                else:
                    feats[k] = tf.train.Feature(float_list=tf.train.FloatList(value=np.atleast_1d(v)))
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return n


PEERS = {
    "lite": lambda a: lite_parse(a.files, a.workload),
    "tf": lambda a: tf_parse(a.files, a.workload),
    "tfrecord": lambda a: tfrecord_parse(a.files, a.workload),
    "lite_write_columns": lambda a: lite_write(a.out, a.n, True),
    "lite_write_rows": lambda a: lite_write(a.out, a.n, False),
    "tf_write": lambda a: tf_write(a.out, a.n),
}


def run_peer(args):
    """Child process: warm up once, then time `runs` repetitions; print JSON."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    fn = PEERS[args.peer]
    fn(args)
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        count = fn(args)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": times, "records": count}))


def _child(peer, runs, **kw):
    cmd = [sys.executable, os.path.abspath(__file__), "--peer", peer, "--runs", str(runs)]
    for k, v in kw.items():
        cmd += [f"--{k}"] + (v if isinstance(v, list) else [str(v)])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(peers, rounds, runs, **kw):
    """{peer: {"seconds": median, "records": n} or None}. Peers take turns, one process
    per turn, so a busy spell on a shared machine hits all of them alike."""
    times, records, failed = {p: [] for p in peers}, {}, {}
    for _ in range(rounds):
        for peer in peers:
            if peer in failed:
                continue
            try:
                out = _child(peer, runs, **kw)
            except RuntimeError as exc:
                failed[peer] = str(exc)
                print(f"  {peer}: skipped ({exc})")
                continue
            times[peer] += out["seconds"]
            records[peer] = out["records"]
    return {p: {"seconds": statistics.median(times[p]), "records": records[p]} if times[p] else None
            for p in peers}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.25, help="fraction of the full workload sizes")
    ap.add_argument("--rounds", type=int, default=3, help="turns each peer gets (one process each)")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per turn, after a warm-up")
    ap.add_argument("--peer")
    ap.add_argument("--workload")
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--out")
    ap.add_argument("--n", type=int)
    args = ap.parse_args(argv)
    if args.peer:
        return run_peer(args)
    with tempfile.TemporaryDirectory() as workdir:
        files = generate(workdir, args.scale)
        print(f"scale {args.scale}, median of {args.rounds}x{args.runs} runs, batches of {BATCH}, single thread")
        for workload in ("W1", "W2"):
            results = measure(("lite", "tf", "tfrecord"), args.rounds, args.runs, workload=workload,
                              files=files[workload])
            base = results["lite"]
            print(f"{workload} parse: tfrecord_lite {base['records'] / base['seconds']:,.0f} records/s")
            for peer in ("tf", "tfrecord"):
                if results[peer]:
                    print(f"  vs {peer}: {results[peer]['seconds'] / base['seconds']:.1f}x faster")
        n = max(BATCH, int(W2_RECORDS * args.scale))
        out = os.path.join(workdir, "written.tfrecord")
        writes = measure(("lite_write_columns", "lite_write_rows", "tf_write"), args.rounds, args.runs, out=out, n=n)
        tf_s = writes["tf_write"]["seconds"] if writes["tf_write"] else None
        for peer in ("lite_write_columns", "lite_write_rows"):
            r = writes[peer]
            line = f"W2 encode+write ({peer.split('_')[-1]}): {r['records'] / r['seconds']:,.0f} records/s"
            if tf_s:
                line += f", {tf_s / r['seconds']:.1f}x TF"
            print(line)


if __name__ == "__main__":
    main()
