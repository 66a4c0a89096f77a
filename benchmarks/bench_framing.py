"""Framing benchmark: reading and writing verified raw records (no Example parsing).

Reading (records as bytes, CRCs verified):
  tfrecord_lite  TFRecordReader, iterated record by record, one thread
  tf.data        TFRecordDataset(files).batch(1024), iterated with .numpy()
  tfrecord       tfrecord.reader.tfrecord_iterator (it has no CRC check; listed for scale)
Writing pre-serialized records (file closed inside the timing, no fsync):
  tfrecord_lite  TFRecordWriter.write per record, and TFRecordWriter.write_many
  tf.io          tf.io.TFRecordWriter.write per record
  tfrecord       tfrecord.writer.TFRecordWriter.write with its Example serialization
                 bypassed, so only its framing (struct + crc32c + numpy) and file writes count

Each peer runs in its own subprocess (see _harness). Every measurement is one untimed warm-up
run then --repeats timed runs over the page-cached files; with --rounds N the peers take
turns N times and the medians pool every round. The table shows medians and CPU/wall.
MB/s counts file bytes (records plus 16 bytes of framing each), MB = 10**6 bytes.

    python -m benchmarks.bench_framing [--repeats 5] [--write-results]
"""

from __future__ import annotations

import os
import shutil
import struct
import sys

from . import _harness as H
from .generate_data import DATA_DIR, generate

SECTION = "bench_framing"
READ_TARGET = 3.0   # tfrecord_lite single-threaded verified read vs tf.data
WRITE_TARGET = 2.0  # tfrecord_lite write vs tf.io.TFRecordWriter
TF_BATCH = 1024

# (op, key, label, function in this module, extra args)
PEERS = [
    ("read", "lite", "tfrecord_lite TFRecordReader", "read_lite", {}),
    ("read", "tf", f"tf.data TFRecordDataset.batch({TF_BATCH})", "read_tf", {"batch": TF_BATCH}),
    ("read", "tfrecord", "tfrecord tfrecord_iterator (no CRC check)", "read_tfrecord", {}),
    ("write", "lite", "tfrecord_lite TFRecordWriter.write", "write_lite", {"method": "write"}),
    ("write", "lite_many", "tfrecord_lite TFRecordWriter.write_many", "write_lite", {"method": "write_many"}),
    ("write", "tf", "tf.io.TFRecordWriter.write", "write_tf", {}),
    ("write", "tfrecord", "tfrecord TFRecordWriter.write (framing only)", "write_tfrecord", {}),
]
# (op, numerator key, denominator key, target)
RATIOS = [
    ("read", "lite", "tf", READ_TARGET),
    ("read", "lite", "tfrecord", None),
    ("write", "lite", "tf", WRITE_TARGET),
    ("write", "lite_many", "tf", WRITE_TARGET),
    ("write", "lite", "tfrecord", None),
    ("write", "lite_many", "tfrecord", None),
]


# -- helpers run inside the peer subprocesses ------------------------------------------------

def _load_records(paths):
    """Records of each file as a list of bytes (frames parsed with struct; input setup only)."""
    per_file = []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        records, pos = [], 0
        while pos < len(data):
            (n,) = struct.unpack_from("<Q", data, pos)
            records.append(data[pos + 12:pos + 12 + n])
            pos += n + 16
        per_file.append(records)
    return per_file


def _read_result(run, paths, records, repeats, warmup):
    H.warm_page_cache(paths)
    counts = []

    def timed():
        counts.append(run())

    cpu = []
    seconds = H.time_repeats(timed, repeats, warmup, cpu_times=cpu)
    if any(c != records for c in counts):
        raise AssertionError(f"read {sorted(set(counts))} records, expected {records}")
    return {"seconds": seconds, "cpu_seconds": cpu}


def _write_result(write_file, paths, out_dir, repeats, warmup):
    inputs = _load_records(paths)
    expected = sum(os.path.getsize(p) for p in paths)
    outputs = [os.path.join(out_dir, f"out-{i:05d}.tfrecord") for i in range(len(paths))]
    os.makedirs(out_dir, exist_ok=True)

    def run():
        for out, records in zip(outputs, inputs):
            write_file(out, records)

    def teardown():
        written = sum(os.path.getsize(p) for p in outputs)
        for p in outputs:
            os.remove(p)
        if written != expected:
            raise AssertionError(f"wrote {written} bytes, expected {expected}")

    cpu = []
    seconds = H.time_repeats(run, repeats, warmup, teardown=teardown, cpu_times=cpu)
    return {"seconds": seconds, "cpu_seconds": cpu}


def read_lite(paths, records, repeats=5, warmup=1):
    import tfrecord_lite
    from tfrecord_lite import TFRecordReader

    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")

    def run():
        n = 0
        for path in paths:
            for _ in TFRecordReader(path):
                n += 1
        return n

    result = _read_result(run, paths, records, repeats, warmup)
    result["implementation"] = tfrecord_lite.implementation
    return result


def read_tf(paths, records, repeats=5, warmup=1, batch=TF_BATCH):
    import tensorflow as tf

    ds = tf.data.TFRecordDataset(paths).batch(batch)

    def run():
        n = 0
        for b in ds:
            n += len(b.numpy())
        return n

    return _read_result(run, paths, records, repeats, warmup)


def read_tfrecord(paths, records, repeats=5, warmup=1):
    from tfrecord.reader import tfrecord_iterator

    def run():
        n = 0
        for path in paths:
            for _ in tfrecord_iterator(path):
                n += 1
        return n

    return _read_result(run, paths, records, repeats, warmup)


def write_lite(paths, out_dir, repeats=5, warmup=1, method="write"):
    import tfrecord_lite
    from tfrecord_lite import TFRecordWriter

    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")

    def write_file(out, records):
        with TFRecordWriter(out) as w:
            if method == "write_many":
                w.write_many(records)
            else:
                write = w.write
                for r in records:
                    write(r)

    result = _write_result(write_file, paths, out_dir, repeats, warmup)
    result["implementation"] = tfrecord_lite.implementation
    return result


def write_tf(paths, out_dir, repeats=5, warmup=1):
    import tensorflow as tf

    def write_file(out, records):
        with tf.io.TFRecordWriter(out) as w:
            write = w.write
            for r in records:
                write(r)

    return _write_result(write_file, paths, out_dir, repeats, warmup)


def write_tfrecord(paths, out_dir, repeats=5, warmup=1):
    from tfrecord import writer as tfrecord_writer

    # write() always serializes a feature dict through this static method (called on the
    # class); make it pass a pre-serialized record through unchanged.
    tfrecord_writer.TFRecordWriter.serialize_tf_example = staticmethod(lambda datum: datum)

    def write_file(out, records):
        w = tfrecord_writer.TFRecordWriter(out)
        write = w.write
        for r in records:
            write(r)
        w.close()

    return _write_result(write_file, paths, out_dir, repeats, warmup)


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, repeats: int = 5, warmup: int = 1, out_dir: str | None = None,
        names=None, timeout: float | None = None, log=None, rounds: int = 1) -> dict:
    """Measure every peer on every workload; returns {"machine", "workloads", "measurements",
    "ratios", ...}. workloads is what generate_data.generate() returns.

    With rounds > 1 the peers take turns: each round starts every peer's process once for
    `repeats` timed runs, and the medians pool all rounds, so a burst of load from elsewhere
    on the machine is shared among the peers rather than landing on one of them."""
    names = list(names or workloads)
    out_dir = out_dir or os.path.join(DATA_DIR, "_bench_out")
    machine = H.machine_info()
    measurements, ratios = [], []
    try:
        for name in names:
            w = workloads[name]
            pooled = {}
            for rnd in range(rounds):
                for op, key, label, func, extra in PEERS:
                    args = {"paths": w["paths"], "repeats": repeats, "warmup": warmup, **extra}
                    if op == "read":
                        args["records"] = w["records"]
                    else:
                        args["out_dir"] = os.path.join(out_dir, f"{name}-{key}")
                    if log:
                        log(f"{name} {op}: {label}" + (f" (round {rnd + 1}/{rounds})" if rounds > 1 else "") + " ...")
                    res = H.run_in_subprocess(f"benchmarks.bench_framing:{func}", args, timeout=timeout)
                    p = pooled.setdefault((op, key), {"seconds": [], "cpu": [], "res": res, "label": label})
                    p["seconds"] += res["seconds"]
                    p["cpu"] += res.get("cpu_seconds") or []
                    if log:
                        med = H.median(res["seconds"])
                        log(f"    median {med:.3f}s  {w['records'] / med:,.0f} rec/s  {w['bytes'] / 1e6 / med:,.1f} MB/s")
            by_key = {}
            for (op, key), p in pooled.items():
                m = {"workload": name, "op": op, "key": key, "label": p["label"],
                     "imported": p["res"]["_imported"], "implementation": p["res"].get("implementation"),
                     **H.summarize(p["seconds"], w["records"], w["bytes"], p["cpu"] or None)}
                measurements.append(m)
                by_key[(op, key)] = m
            for op, num, den, target in RATIOS:
                a, b = by_key[(op, num)], by_key[(op, den)]
                ratio = a["records_per_s"] / b["records_per_s"]
                ratios.append({"workload": name, "op": op, "numerator": a["label"], "denominator": b["label"],
                               "ratio": ratio, "target": target,
                               "met": None if target is None else ratio >= target})
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return H.package_results(SECTION, machine, {n: workloads[n] for n in names}, measurements, ratios,
                             repeats, warmup, rounds)


def report(results: dict) -> str:
    """The results as markdown: conditions, one table per workload, and the targets."""
    lines = ["## Framing: verified raw records (bench_framing.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results) + ", one reading thread",
        "- MB/s counts file bytes (records + 16 bytes of framing each); MB = 10^6 bytes; "
        "\"vs\" columns are this row's records/s over the peer's; CPU/wall is the process's CPU "
        "time (all threads) over wall time, medians: below 1 for a one-thread peer means it waited "
        "for a core",
        "- Writing includes closing the file (no fsync); inputs are pre-serialized records in memory",
        "- `tfrecord`'s reader does not verify CRCs and yields a reused memoryview; its writer is "
        "timed with its Example serialization bypassed",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.workload_tables(results, [("vs TF", "tf"), ("vs tfrecord", "tfrecord")], per_op=False,
                               mb_format=",.0f")
    rows = []
    for r in results["ratios"]:
        if r["target"] is None:
            continue
        rows.append([r["workload"].upper(), r["op"], f"{r['numerator']} / {r['denominator']}",
                     f"{r['ratio']:.2f}x", f">= {r['target']:.0f}x", "yes" if r["met"] else "**no**"])
    lines += ["### Targets", "", H.markdown_table(
        ["workload", "op", "ratio", "measured", "target", "met"], rows, "lllrrl")]
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    workloads = generate(args.scale, args.data_dir)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    return run(workloads, out_dir=os.path.join(args.data_dir, "_bench_out"), names=names, **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark verified raw TFRecord reading and writing.", _measure, report,
           options=lambda ap: ap.add_argument("--workloads", default="w1,w2", help="comma-separated: w1,w2"))


if __name__ == "__main__":
    main()
