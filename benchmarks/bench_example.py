"""Example parsing and encoding: tfrecord_lite against TensorFlow and the `tfrecord` package.

Parsing W1 and W2 (generate_data) into batches of 1,024 numpy arrays, one thread:
  tfrecord_lite  TFRecordReader.record_batches (records read in place, batches of 1,024
                 across files as TF's batch() does) through parse_example
  TensorFlow     tf.data.TFRecordDataset.batch(1024).map(tf.io.parse_example), .numpy() on
                 every tensor, with tf.data and op parallelism set to one thread
  tfrecord       tfrecord.reader.tfrecord_loader, its rows stacked into numpy batches
Encoding W2 rows from numpy columns and writing them to one file:
  tfrecord_lite  encode_examples over blocks of 1,024 rows (columnar) + write_many, and
                 encode_example per row + write
  TensorFlow     tf.train.Example per row + SerializeToString + tf.io.TFRecordWriter
All encoders serialize deterministically, and every output must equal the W2 file byte for
byte. Feature specs for every reader come from generate_data.SPECS.

Each peer runs in its own subprocess (see _harness): one untimed warm-up run, then --repeats
timed runs over page-cached files; with --rounds N the peers take turns N times.

    python -m benchmarks.bench_example [--scale 1.0] [--repeats 5] [--rounds 1] [--write-results]
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import sys

from . import _harness as H
from .generate_data import (DATA_DIR, generate, lite_features, numpy_batch, tf_examples, tf_features,
                            tfrecord_description, w2_columns)

SECTION = "bench_example"
BATCH = 1024
PARSE_TARGETS = {"w1": 2.0, "w2": 5.0}  # tfrecord_lite parse vs TensorFlow, one thread
ENCODE_TARGET = 10.0  # tfrecord_lite encode_examples + write vs tf.train.Example + TFRecordWriter
CHECK_KEY = {"w1": "image/label", "w2": "int_1"}  # summed by every parser: they must agree

PARSE_PEERS = [
    ("lite", "tfrecord_lite parse_example", "parse_lite"),
    ("tf", f"TF batch({BATCH}).map(parse_example)", "parse_tf"),
    ("tfrecord", "tfrecord tfrecord_loader + numpy batches", "parse_tfrecord"),
]
ENCODE_PEERS = [
    ("lite_columns", "tfrecord_lite encode_examples (columnar)", "encode_lite", {"method": "columns"}),
    ("lite_rows", "tfrecord_lite encode_example (per row)", "encode_lite", {"method": "rows"}),
    ("tf", "tf.train.Example + TFRecordWriter", "encode_tf", {}),
]


# -- peers, each run in its own subprocess ---------------------------------------------------

def _no_tensorflow():
    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")


def _parse_result(run, paths, records, repeats, warmup):
    """Time run() -> (records, checksum) and check every run saw the same, full data."""
    H.warm_page_cache(paths)
    seen = []
    cpu = []
    seconds = H.time_repeats(lambda: seen.append(run()), repeats, warmup, cpu_times=cpu)
    if len(set(seen)) != 1 or seen[0][0] != records:
        raise AssertionError(f"parsed {sorted(set(seen))}, expected {records} records each run")
    return {"seconds": seconds, "cpu_seconds": cpu, "checksum": seen[0][1]}


def parse_lite(paths, workload, records, repeats=5, warmup=1):
    import tfrecord_lite
    from tfrecord_lite import TFRecordReader, parse_example
    from tfrecord_lite.batch import rebatch

    _no_tensorflow()
    spec = lite_features(workload)
    key = CHECK_KEY[workload]

    def run():
        n = total = 0
        blocks = itertools.chain.from_iterable(TFRecordReader(p).record_batches() for p in paths)
        for batch in rebatch(blocks, BATCH):
            arrays = parse_example(batch, spec)
            n += len(arrays[key])
            total += int(arrays[key].sum())
        return n, total

    result = _parse_result(run, paths, records, repeats, warmup)
    result["implementation"] = tfrecord_lite.implementation
    return result


def parse_tf(paths, workload, records, repeats=5, warmup=1):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    spec = tf_features(workload)
    key = CHECK_KEY[workload]
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    ds = (tf.data.TFRecordDataset(paths).batch(BATCH)
          .map(lambda x: tf.io.parse_example(x, spec)).with_options(options))

    def run():
        n = total = 0
        for batch in ds:
            arrays = {k: v.numpy() for k, v in batch.items()}
            n += len(arrays[key])
            total += int(arrays[key].sum())
        return n, total

    return _parse_result(run, paths, records, repeats, warmup)


def parse_tfrecord(paths, workload, records, repeats=5, warmup=1):
    from tfrecord.reader import tfrecord_loader

    description = tfrecord_description(workload)
    key = CHECK_KEY[workload]

    def run():
        n = total = 0
        stream = itertools.chain.from_iterable(tfrecord_loader(p, None, description) for p in paths)
        while rows := list(itertools.islice(stream, BATCH)):
            arrays = numpy_batch(rows, workload)
            n += len(arrays[key])
            total += int(arrays[key].sum())
        return n, total

    return _parse_result(run, paths, records, repeats, warmup)


def _encode_result(write_file, rows, out, repeats, warmup):
    """Time write_file(columns) and return the output's sha256 (the same every run)."""
    cols = w2_columns(rows)
    digests = []

    def teardown():
        with open(out, "rb") as f:
            digests.append(hashlib.sha256(f.read()).hexdigest())
        os.remove(out)

    os.makedirs(os.path.dirname(out), exist_ok=True)
    cpu = []
    seconds = H.time_repeats(lambda: write_file(cols), repeats, warmup, teardown=teardown, cpu_times=cpu)
    if len(set(digests)) != 1:
        raise AssertionError("runs wrote different files")
    return {"seconds": seconds, "cpu_seconds": cpu, "sha256": digests[0]}


def encode_lite(rows, out, method="columns", repeats=5, warmup=1):
    import tfrecord_lite
    from tfrecord_lite import TFRecordWriter, encode_example, encode_examples

    _no_tensorflow()

    def write_file(cols):
        with TFRecordWriter(out) as w:
            if method == "columns":
                for start in range(0, rows, BATCH):
                    w.write_many(encode_examples({k: v[start:start + BATCH] for k, v in cols.items()},
                                                 deterministic=True))
            else:
                names = list(cols)
                write = w.write
                for i in range(rows):
                    write(encode_example({k: cols[k][i] for k in names}, deterministic=True))

    result = _encode_result(write_file, rows, out, repeats, warmup)
    result["implementation"] = tfrecord_lite.implementation
    return result


def encode_tf(rows, out, repeats=5, warmup=1):
    import tensorflow as tf

    def write_file(cols):
        with tf.io.TFRecordWriter(out) as w:
            write = w.write
            for record in tf_examples(cols):
                write(record)

    return _encode_result(write_file, rows, out, repeats, warmup)


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, repeats: int = 5, warmup: int = 1, out_dir: str | None = None,
        timeout: float | None = None, log=None, rounds: int = 1) -> dict:
    """Measure every peer; returns {"machine", "workloads", "measurements", "ratios", ...}.
    workloads is what generate_data.generate() returns."""
    out_dir = out_dir or os.path.join(DATA_DIR, "_bench_example_out")
    machine = H.machine_info()
    measurements, ratios = [], []
    try:
        for name in ("w1", "w2"):
            w = workloads[name]
            plan = [(key, label, f"benchmarks.bench_example:{func}",
                     {"paths": w["paths"], "workload": name, "records": w["records"], "repeats": repeats,
                      "warmup": warmup}) for key, label, func in PARSE_PEERS]
            pooled = H.run_rounds(plan, rounds, timeout, log)
            ms = {k: H.measurement(p, name, "parse", w["records"], w["bytes"]) | {"key": k}
                  for k, p in pooled.items()}
            if len({m["checksum"] for m in ms.values()}) != 1:
                raise AssertionError(f"{name}: the parsers disagree: "
                                     f"{ {k: m['checksum'] for k, m in ms.items()} }")
            measurements += ms.values()
            ratios.append(H.ratio(name, "parse", ms["lite"], ms["tf"], PARSE_TARGETS[name]))
            ratios.append(H.ratio(name, "parse", ms["lite"], ms["tfrecord"], None))

        w = workloads["w2"]
        with open(w["paths"][0], "rb") as f:
            expected = hashlib.sha256(f.read()).hexdigest()
        plan = [(key, label, f"benchmarks.bench_example:{func}",
                 {"rows": w["records"], "out": os.path.join(out_dir, f"{key}.tfrecord"), "repeats": repeats,
                  "warmup": warmup, **extra}) for key, label, func, extra in ENCODE_PEERS]
        pooled = H.run_rounds(plan, rounds, timeout, log)
        ms = {k: H.measurement(p, "w2", "encode+write", w["records"], w["bytes"]) | {"key": k}
              for k, p in pooled.items()}
        for k, m in ms.items():
            if m["sha256"] != expected:
                raise AssertionError(f"{m['label']} wrote a file that differs from the W2 file")
        measurements += ms.values()
        ratios.append(H.ratio("w2", "encode+write", ms["lite_columns"], ms["tf"], ENCODE_TARGET))
        ratios.append(H.ratio("w2", "encode+write", ms["lite_rows"], ms["tf"], None))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return H.package_results(SECTION, machine, {n: workloads[n] for n in ("w1", "w2")}, measurements, ratios,
                             repeats, warmup, rounds)


def report(results: dict) -> str:
    """The results as markdown: conditions, one table per workload, and the targets."""
    lines = ["## Example parsing and encoding (bench_example.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results) + "; one thread per peer",
        f"- Parsing: records to batches of {BATCH:,} numpy arrays, every feature of the workload "
        "(all fixed-length); MB/s counts file bytes, MB = 10^6 bytes",
        f"- Encode+write: W2 rows from numpy columns to one file (closed in the timing, no fsync), "
        f"columnar in blocks of {BATCH:,} rows; every encoder serializes deterministically and its "
        "output equals the W2 file byte for byte; MB/s counts the file written",
        "- \"vs\" columns are this row's records/s over the peer's; CPU/wall is the process's CPU "
        "time over wall time (below 1 for a one-thread peer means it waited for a core)",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.workload_tables(results, [("vs TF", "tf"), ("vs tfrecord", "tfrecord")])
    lines.append(H.targets_table(results["ratios"]))
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    return run(generate(args.scale, args.data_dir), out_dir=os.path.join(args.data_dir, "_bench_example_out"),
               **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark Example parsing and encoding.", _measure, report)


if __name__ == "__main__":
    main()
