"""Multi-file pipeline: tfrecord_lite.TFRecordDataset against tf.data and the `tfrecord`
package's MultiTFRecordDataset in a torch DataLoader, parsing into numpy batches.

Workloads (generate_data): W1 (8 files of ~32 KiB Examples), W2 (1 file of 200,000 tabular
Examples) and "many" (1,000 files of W2 Examples in one directory). Every peer parses every
feature with the workload's spec (generate_data.SPECS) into batches of BATCH:
  tfrecord_lite  TFRecordDataset(files, features, batch_size=BATCH, num_threads=1 and 2);
                 the directory is read with max_open_files=8
  tf.data        TFRecordDataset(files, num_parallel_reads=AUTOTUNE).batch(BATCH,
                 num_parallel_calls=AUTOTUNE).map(parse_example, num_parallel_calls=AUTOTUNE)
                 .prefetch(AUTOTUNE), as numpy
  tfrecord       MultiTFRecordDataset (index files made with its own tool, untimed) in a
                 torch DataLoader whose collate stacks numpy batches; W1 and W2 only

Each peer runs in its own subprocess (tfrecord_lite's never imports TensorFlow) and reports
its peak RSS (VmHWM, imports included). One untimed warm-up pass, then --repeats timed passes.
The scaling of 2 threads over 1 is also measured in one process whose 1- and 2-thread passes
take turns: on a noisy 2-core machine the speed drifts between processes run minutes apart,
and pairs of passes side by side cancel that drift. The W2 scaling target is judged on both.

    python -m benchmarks.bench_dataset [--scale 1.0] [--repeats 3] [--rounds 1] [--write-results]
"""

from __future__ import annotations

import os
import sys

from . import _harness as H
from .generate_data import (generate, generate_many_files, lite_features, numpy_batch,
                            tf_features, tfrecord_description)

SECTION = "bench_dataset"
BATCH = 1024  # as in bench_example; the same for every peer
MANY_MAX_OPEN = 8
CHECK_KEY = {"w1": "image/label", "w2": "int_1", "many": "int_1"}  # summed by every peer
TF_TARGETS = {"w1": 1.5, "w2": 3.0}  # TFRecordDataset, 2 threads, vs tf.data AUTOTUNE
SCALING_TARGET = 1.6  # W2: 2 threads over 1 thread

PEERS = [
    ("lite1", "tfrecord_lite TFRecordDataset, 1 thread", "dataset_lite", {"threads": 1}),
    ("lite2", "tfrecord_lite TFRecordDataset, 2 threads", "dataset_lite", {"threads": 2}),
    ("tf", "tf.data AUTOTUNE + prefetch", "dataset_tf", {}),
    ("tfrecord", "tfrecord MultiTFRecordDataset + DataLoader", "dataset_tfrecord", {}),
    ("turns", "tfrecord_lite TFRecordDataset, 1 and 2 threads taking turns", "dataset_lite_scaling", {}),
]


# -- peers, each run in its own subprocess ---------------------------------------------------

def _pass(make_batches, workload, seen):
    """One pass over make_batches() (an iterable of dicts of arrays), noting what it saw."""
    key = CHECK_KEY[workload]

    def run():
        n = total = 0
        for batch in make_batches():
            n += len(batch[key])
            total += int(batch[key].sum())
        seen.append((n, total))

    return run


def _check_seen(seen, records):
    if len(set(seen)) != 1 or seen[0][0] != records:
        raise AssertionError(f"read {sorted(set(seen))}, expected {records} records each pass")
    return seen[0][1]


def _result(make_batches, paths, workload, records, repeats, warmup):
    """Time one pass over make_batches() per run, check each pass saw every record, and
    report the checksum and peak RSS."""
    H.warm_page_cache(paths)
    seen, cpu = [], []
    seconds = H.time_repeats(_pass(make_batches, workload, seen), repeats, warmup, cpu_times=cpu)
    return {"seconds": seconds, "cpu_seconds": cpu, "checksum": _check_seen(seen, records),
            "peak_rss_mb": H.peak_rss_mb()}


def _lite_dataset(paths, workload, threads, directory):
    from tfrecord_lite import TFRecordDataset

    features = lite_features(workload)
    if directory:
        return TFRecordDataset(directory, features, batch_size=BATCH, num_threads=threads,
                               max_open_files=MANY_MAX_OPEN, cycle_length=MANY_MAX_OPEN)
    return TFRecordDataset(paths, features, batch_size=BATCH, num_threads=threads,
                           cycle_length=min(len(paths), 2 * threads), max_open_files=16)


def _lite_only(result):
    import tfrecord_lite

    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")
    result["implementation"] = tfrecord_lite.implementation
    return result


def dataset_lite(paths, workload, records, threads, directory=None, repeats=3, warmup=1):
    ds = _lite_dataset(paths, workload, threads, directory)
    return _lite_only(_result(lambda: ds, paths, workload, records, repeats, warmup))


def dataset_lite_scaling(paths, workload, records, directory=None, repeats=3, warmup=1):
    """Passes with 1 and 2 threads taking turns in one process (ABBA order), for the scaling
    ratio: both sides see the same machine state, where separate processes minutes apart
    each see the load of their moment. "seconds" are the 2-thread passes."""
    H.warm_page_cache(paths)
    datasets = {t: _lite_dataset(paths, workload, t, directory) for t in (1, 2)}
    seen = {1: [], 2: []}
    times, cpu = {1: [], 2: []}, {1: [], 2: []}
    for i in range(warmup + repeats):
        for t in (1, 2) if i % 2 == 0 else (2, 1):
            c = []
            secs = H.time_repeats(_pass(lambda: datasets[t], workload, seen[t]), 1, 0, cpu_times=c)
            if i >= warmup:
                times[t] += secs
                cpu[t] += c
    checksums = {_check_seen(seen[t], records) for t in (1, 2)}
    if len(checksums) != 1:
        raise AssertionError("1 and 2 threads read different records")
    return _lite_only({"seconds": times[2], "cpu_seconds": cpu[2], "one_thread_seconds": times[1],
                       "one_thread_cpu_seconds": cpu[1], "checksum": checksums.pop(),
                       "peak_rss_mb": H.peak_rss_mb()})


def dataset_tf(paths, workload, records, directory=None, repeats=3, warmup=1):
    import tensorflow as tf

    spec = tf_features(workload)
    auto = tf.data.AUTOTUNE
    ds = (tf.data.TFRecordDataset(paths, num_parallel_reads=auto)
          .batch(BATCH, num_parallel_calls=auto)
          .map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=auto)
          .prefetch(auto))
    return _result(ds.as_numpy_iterator, paths, workload, records, repeats, warmup)


def dataset_tfrecord(paths, workload, records, directory=None, repeats=3, warmup=1):
    import torch
    from tfrecord.tools.tfrecord2idx import create_index
    from tfrecord.torch.dataset import MultiTFRecordDataset

    for p in paths:  # its own index format, made with its own tool; not timed
        if not os.path.exists(p + ".index"):
            create_index(p, p + ".index")
    folder = os.path.dirname(paths[0])
    if any(os.path.dirname(p) != folder for p in paths):
        raise ValueError("MultiTFRecordDataset needs every file in one directory")
    splits = {os.path.basename(p)[: -len(".tfrecord")]: 1.0 for p in paths}
    ds = MultiTFRecordDataset(os.path.join(folder, "{}.tfrecord"), os.path.join(folder, "{}.tfrecord.index"),
                              splits, tfrecord_description(workload), infinite=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, collate_fn=lambda rows: numpy_batch(rows, workload))
    return _result(lambda: loader, paths, workload, records, repeats, warmup)


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, many: dict, repeats: int = 3, warmup: int = 1, timeout: float | None = None,
        log=None, rounds: int = 1) -> dict:
    """Measure every peer on W1, W2 and the many-files directory; returns {"machine",
    "workloads", "measurements", "ratios", ...}. workloads is what generate_data.generate()
    returns, many what generate_data.generate_many_files() returns."""
    machine = H.machine_info()
    all_workloads = {"w1": workloads["w1"], "w2": workloads["w2"], "many": many}
    measurements, ratios = [], []
    for name, w in all_workloads.items():
        base = {"paths": w["paths"], "workload": name, "records": w["records"], "repeats": repeats,
                "warmup": warmup, "directory": w.get("dir")}
        plan = [(key, label, f"benchmarks.bench_dataset:{func}", {**base, **extra})
                for key, label, func, extra in PEERS if not (name == "many" and key == "tfrecord")]
        pooled = H.run_rounds(plan, rounds, timeout, log)
        turns = pooled.pop("turns")
        label = "tfrecord_lite TFRecordDataset, {} taking turns with {}"
        pooled["lite1t"] = {**turns, "label": label.format("1 thread", "2"), "seconds": turns["one_thread_seconds"],
                            "cpu_seconds": turns["one_thread_cpu_seconds"]}
        pooled["lite2t"] = {**turns, "label": label.format("2 threads", "1")}
        ms = {k: H.measurement(p, name, "read+parse", w["records"], w["bytes"]) | {"key": k}
              for k, p in pooled.items()}
        for m in (ms["lite1t"], ms["lite2t"]):
            for extra in ("one_thread_seconds", "one_thread_cpu_seconds"):
                m.pop(extra)
        if len({m["checksum"] for m in ms.values()}) != 1:
            raise AssertionError(f"{name}: the peers disagree: { {k: m['checksum'] for k, m in ms.items()} }")
        measurements += ms.values()
        ratios.append(H.ratio(name, "2 threads / tf.data", ms["lite2"], ms["tf"], TF_TARGETS.get(name)))
        ratios.append(H.ratio(name, "1 thread / tf.data", ms["lite1"], ms["tf"], None))
        scaling = SCALING_TARGET if name == "w2" else None
        ratios.append(H.ratio(name, "scaling, 2 threads / 1, separate processes", ms["lite2"], ms["lite1"], scaling))
        ratios.append(H.ratio(name, "scaling, 2 threads / 1, passes taking turns", ms["lite2t"], ms["lite1t"], scaling))
        if "tfrecord" in ms:
            ratios.append(H.ratio(name, "2 threads / tfrecord", ms["lite2"], ms["tfrecord"], None))
    return H.package_results(SECTION, machine, all_workloads, measurements, ratios, repeats, warmup, rounds)


def report(results: dict) -> str:
    """The results as markdown: conditions, one table per workload, and the targets."""
    lines = ["## Multi-file pipeline: TFRecordDataset (bench_dataset.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results) + "; a pass is one epoch",
        f"- Every peer parses every feature into numpy batches of {BATCH}; MB/s counts file bytes, "
        "MB = 10^6 bytes; \"vs\" columns are this row's records/s over the peer's; CPU/wall is the "
        "process's CPU time (all threads) over wall time",
        "- Peak RSS is the process's high-water mark (VmHWM), library imports included",
        "- \"taking turns\" rows: one process alternating 1- and 2-thread passes (ABBA), so both "
        "see the same machine state; the W2 scaling target is judged both on them and on the "
        "separate processes",
        f"- The many-files directory is read by tfrecord_lite with max_open_files={MANY_MAX_OPEN}; "
        "the `tfrecord` package is not run on it",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.workload_tables(results, [("vs tf.data", "tf"), ("vs tfrecord", "tfrecord")],
                               [("peak RSS MB", "peak_rss_mb")])
    lines.append(H.targets_table(results["ratios"]))
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    workloads = generate(args.scale, args.data_dir)
    return run(workloads, generate_many_files(args.scale, args.data_dir), **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark the multi-file TFRecordDataset pipeline.", _measure, report, repeats=3)


if __name__ == "__main__":
    main()
