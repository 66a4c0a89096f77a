"""Writing at scale: tfrecord_lite against what people do with TensorFlow today.

1. Encode W2-shaped rows (generate_data.w2_columns: 10 scalar floats, 5 scalar int64s, 2
   short strings, one list of 32 floats) from NumPy columns and write them to 8 shards, with
   1 and 2 workers. tfrecord_lite: write_parallel(batched=True) over blocks of rows, each
   block encoded by tfrecord_lite.encode_examples. TensorFlow: tf.train.Example +
   tf.io.TFRecordWriter, one shard per task in a multiprocessing pool (spawn) with TensorFlow
   imported in every worker before the timing.
2. Merge the 8 shards into one file. tfrecord_lite: merge (verbatim frames), and merge with
   verify=True (every CRC checked). TensorFlow: read with tf.data.TFRecordDataset and rewrite
   with tf.io.TFRecordWriter.

Every encoder serializes deterministically, so all peers write the same records; the total
bytes written must equal the W2 file's. Each peer runs in its own subprocess (see _harness).

    python -m benchmarks.bench_write [--scale 1.0] [--repeats 3] [--rounds 1] [--write-results]
"""

from __future__ import annotations

import os
import shutil
import sys

from . import _harness as H
from .generate_data import DATA_DIR, generate, tf_examples, w2_columns

SECTION = "bench_write"
SHARDS = 8
BLOCK_ROWS = 2048
WRITE_TARGET = 10.0  # write_parallel + encode_examples vs TF in a process pool, same workers
MERGE_TARGET = 5.0  # merge vs re-reading and re-writing with TensorFlow

WRITE_PEERS = [
    ("lite", "tfrecord_lite write_parallel + encode_examples", "write_lite"),
    ("tf", "tf.train.Example + TFRecordWriter, process pool", "write_tf"),
]
MERGE_PEERS = [
    ("lite", "tfrecord_lite merge", "merge_lite", {"verify": False}),
    ("lite_verify", "tfrecord_lite merge(verify=True)", "merge_lite", {"verify": True}),
    ("tf", "TF TFRecordDataset -> TFRecordWriter", "merge_tf", {}),
]


def block_rows(rows: int) -> int:
    """Rows per block: BLOCK_ROWS, or fewer so that a small run still fills every shard."""
    return max(1, min(BLOCK_ROWS, -(-rows // SHARDS)))


def _blocks(cols: dict, rows: int):
    size = block_rows(rows)
    for start in range(0, rows, size):
        yield {k: v[start:start + size] for k, v in cols.items()}


def encode_blocks(chunk):
    """write_parallel's batched encoder: each item is a dict of column blocks."""
    from tfrecord_lite import encode_examples

    for block in chunk:
        yield from encode_examples(block, deterministic=True)


def _sizes(paths) -> int:
    return sum(os.path.getsize(p) for p in paths)


def _clear(out_dir):
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)


# -- peers, each run in its own subprocess ---------------------------------------------------

def write_lite(rows, workers, out_dir, repeats=3, warmup=1):
    import tfrecord_lite

    cols = w2_columns(rows)
    prefix = os.path.join(out_dir, "lite")
    written = []

    def run():
        infos = tfrecord_lite.write_parallel(_blocks(cols, rows), encode_blocks, prefix, SHARDS,
                                             num_workers=workers, chunk_size=1, batched=True, progress=False)
        written.append((sum(i.records for i in infos), _sizes(i.path for i in infos)))

    cpu = []
    seconds = H.time_repeats(run, repeats, warmup, setup=lambda: _clear(out_dir), cpu_times=cpu)
    shutil.rmtree(out_dir, ignore_errors=True)
    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")
    if len(set(written)) != 1:
        raise AssertionError(f"runs wrote different amounts: {sorted(set(written))}")
    return {"seconds": seconds, "cpu_seconds": cpu, "records_written": written[0][0],
            "bytes_written": written[0][1], "implementation": tfrecord_lite.implementation}


def _tf_write_shard(task):
    import tensorflow as tf

    path, cols = task
    with tf.io.TFRecordWriter(path) as w:
        write = w.write
        for record in tf_examples(cols):
            write(record)
    return path


def _tf_warm(_):
    import tensorflow  # noqa: F401

    return sorted(m for m in H.WATCHED_MODULES if m in sys.modules)


def write_tf(rows, workers, out_dir, repeats=3, warmup=1):
    import multiprocessing as mp

    cols = w2_columns(rows)
    bounds = [rows * i // SHARDS for i in range(SHARDS + 1)]
    tasks = [(os.path.join(out_dir, f"tf-{i:05d}-of-{SHARDS:05d}.tfrecord"),
              {k: v[bounds[i]:bounds[i + 1]] for k, v in cols.items()}) for i in range(SHARDS)]
    written = []
    cpu = []
    with mp.get_context("spawn").Pool(workers) as pool:
        # TensorFlow imported in every worker first
        imported = sorted(set().union(*pool.map(_tf_warm, range(workers * 4))))

        def run():
            written.append(_sizes(pool.map(_tf_write_shard, tasks, chunksize=1)))

        seconds = H.time_repeats(run, repeats, warmup, setup=lambda: _clear(out_dir), cpu_times=cpu)
    shutil.rmtree(out_dir, ignore_errors=True)
    if len(set(written)) != 1:
        raise AssertionError(f"runs wrote different amounts: {sorted(set(written))}")
    # cpu_seconds would count only the parent, not the pool's workers: left out
    return {"seconds": seconds, "records_written": rows, "bytes_written": written[0],
            "imported_in_workers": imported}


def make_shards(rows, out_dir):
    """The merge input: the W2 rows in SHARDS shards written by write_parallel (untimed)."""
    import tfrecord_lite

    os.makedirs(out_dir, exist_ok=True)
    infos = tfrecord_lite.write_parallel(_blocks(w2_columns(rows), rows), encode_blocks,
                                         os.path.join(out_dir, "shard"), SHARDS, num_workers=1,
                                         chunk_size=1, batched=True, progress=False)
    return {"paths": [i.path for i in infos], "records": sum(i.records for i in infos)}


def _merge_result(merge_file, shards, out, repeats, warmup):
    H.warm_page_cache(shards)
    expected = _sizes(shards)
    sizes = []

    def teardown():
        sizes.append(os.path.getsize(out))
        os.remove(out)

    cpu = []
    seconds = H.time_repeats(merge_file, repeats, warmup, teardown=teardown, cpu_times=cpu)
    if set(sizes) != {expected}:
        raise AssertionError(f"merged {sorted(set(sizes))} bytes, expected {expected}")
    return {"seconds": seconds, "cpu_seconds": cpu, "bytes_written": expected}


def merge_lite(shards, out, verify=False, repeats=3, warmup=1):
    import tfrecord_lite

    result = _merge_result(lambda: tfrecord_lite.merge(shards, out, verify=verify), shards, out, repeats, warmup)
    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")
    result["implementation"] = tfrecord_lite.implementation
    return result


def merge_tf(shards, out, repeats=3, warmup=1):
    import tensorflow as tf

    def merge_file():
        with tf.io.TFRecordWriter(out) as w:
            for rec in tf.data.TFRecordDataset(shards):
                w.write(rec.numpy())

    return _merge_result(merge_file, shards, out, repeats, warmup)


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, repeats: int = 3, warmup: int = 1, out_dir: str | None = None,
        timeout: float | None = None, log=None, rounds: int = 1) -> dict:
    """Measure writing and merging W2-sized data; returns {"machine", "workloads",
    "measurements", "ratios", ...}. workloads is what generate_data.generate() returns (W2's
    record count and file size set the row count and the expected bytes)."""
    out_dir = out_dir or os.path.join(DATA_DIR, "_bench_write_out")
    machine = H.machine_info()
    w = workloads["w2"]
    rows, nbytes = w["records"], w["bytes"]
    measurements, ratios = [], []
    try:
        for workers in (1, 2):
            plan = [(key, label + f", {workers} worker" + "s" * (workers > 1), f"benchmarks.bench_write:{func}",
                     {"rows": rows, "workers": workers, "out_dir": os.path.join(out_dir, f"{key}{workers}"),
                      "repeats": repeats, "warmup": warmup}) for key, label, func in WRITE_PEERS]
            pooled = H.run_rounds(plan, rounds, timeout, log)
            ms = {k: H.measurement(p, "w2", f"write, {workers} worker" + "s" * (workers > 1), rows, nbytes)
                  | {"key": k, "workers": workers} for k, p in pooled.items()}
            for m in ms.values():
                if (m["records_written"], m["bytes_written"]) != (rows, nbytes):
                    raise AssertionError(f"{m['label']} wrote {m['records_written']} records, "
                                         f"{m['bytes_written']} bytes; expected {rows}, {nbytes}")
            measurements += ms.values()
            ratios.append(H.ratio("w2", f"write, {workers} worker" + "s" * (workers > 1), ms["lite"], ms["tf"],
                                  WRITE_TARGET))
        lite = {m["workers"]: m for m in measurements if m["key"] == "lite"}
        ratios.append(H.ratio("w2", "write scaling, 2 workers / 1", lite[2], lite[1], None))

        shards = H.run_in_subprocess("benchmarks.bench_write:make_shards",
                                     {"rows": rows, "out_dir": os.path.join(out_dir, "shards")}, timeout=timeout)
        if shards["records"] != rows:
            raise AssertionError(f"the merge input holds {shards['records']} records, expected {rows}")
        plan = [(key, label, f"benchmarks.bench_write:{func}",
                 {"shards": shards["paths"], "out": os.path.join(out_dir, f"merged-{key}.tfrecord"),
                  "repeats": repeats, "warmup": warmup, **extra}) for key, label, func, extra in MERGE_PEERS]
        pooled = H.run_rounds(plan, rounds, timeout, log)
        ms = {k: H.measurement(p, "w2", f"merge {SHARDS} shards", rows, nbytes) | {"key": k}
              for k, p in pooled.items()}
        measurements += ms.values()
        ratios.append(H.ratio("w2", "merge", ms["lite"], ms["tf"], MERGE_TARGET))
        ratios.append(H.ratio("w2", "merge, verify=True", ms["lite_verify"], ms["tf"], MERGE_TARGET))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return H.package_results(SECTION, machine, {"w2": w}, measurements, ratios, repeats, warmup, rounds)


def report(results: dict) -> str:
    """The results as markdown: conditions, the table, and the targets."""
    w = results["workloads"]["w2"]
    lines = ["## Writing at scale: sharded writes and merge (bench_write.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results),
        f"- Rows: the W2 workload's {w['records']:,} rows as numpy columns, written to {SHARDS} shards "
        f"(blocks of up to {BLOCK_ROWS:,} rows for write_parallel); files closed in the timing, no fsync",
        "- Every encoder serializes deterministically: each peer writes the same records "
        f"({w['bytes'] / 1e6:,.1f} MB in all, which MB/s counts); MB = 10^6 bytes",
        "- The TensorFlow pool's CPU time is not measured (it is in its workers), so its CPU/wall "
        "is blank; merge inputs are in the page cache",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.op_tables(results["measurements"], [("vs TF", "tf")])
    lines.append(H.targets_table(results["ratios"]))
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    return run(generate(args.scale, args.data_dir), out_dir=os.path.join(args.data_dir, "_bench_write_out"),
               **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark sharded writing and merging.", _measure, report, repeats=3)


if __name__ == "__main__":
    main()
