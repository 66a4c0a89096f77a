"""Ray Data: tfrecord_lite.ray.read_tfrecords against Ray's own ray.data.read_tfrecords
(which decodes with TensorFlow's protobuf classes) on W2 (generate_data: 18 small
fixed-length features, one of them bytes, in one file).

Each peer runs in its own subprocess with its own local Ray cluster (ray.init(num_cpus=2));
starting the cluster and the warm-up run are not timed, so worker processes are warm. A
timed run builds the Dataset with the schema inferred (no spec given, as Ray's own reader
needs none) and consumes every block as pyarrow, summing the check column:
  lite          read_tfrecords(path): one file, so one read task
  lite_indexed  read_tfrecords(path, override_num_blocks=2) with an .index sidecar (built
                untimed, beside a link to the file in a temporary directory): the file split
                into 2 index ranges, one per CPU. (Without override_num_blocks, Ray asks for
                about one task per MiB, here ~100 ranges, whose scheduling costs more than
                the parsing on 2 cores.)
  ray           ray.data.read_tfrecords(path), TensorFlow installed

    python -m benchmarks.bench_ray [--scale 1.0] [--repeats 3] [--write-results]
"""

from __future__ import annotations

import os
import sys
import tempfile

from . import _harness as H
from .bench_example import CHECK_KEY
from .generate_data import generate

SECTION = "bench_ray"
CPUS = 2
TARGET = 1.0  # ours over Ray's own, records/s

PEERS = [
    ("lite", "tfrecord_lite.ray.read_tfrecords", "read_lite", {"indexed": False}),
    ("lite_indexed", "tfrecord_lite.ray.read_tfrecords, indexed, 2 ranges", "read_lite", {"indexed": True}),
    ("ray", "ray.data.read_tfrecords (TensorFlow)", "read_ray", {}),
]


def _init_ray():
    import ray

    ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=512 << 20)
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False


def _consume(ds, key):
    import numpy as np

    n = total = 0
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        column = batch.column(key).to_numpy()
        n += len(column)
        total += int(np.asarray(column, dtype=np.int64).sum())
    return n, total


def _timed(run, records, repeats, warmup):
    import ray

    seen, cpu = [], []
    try:
        seconds = H.time_repeats(lambda: seen.append(run()), repeats, warmup, cpu_times=cpu)
    finally:
        ray.shutdown()
    if len(set(seen)) != 1 or seen[0][0] != records:
        raise AssertionError(f"read {sorted(set(seen))}, expected {records} records each run")
    # CPU here is the driver's only; the reading happens in Ray's worker processes.
    return {"seconds": seconds, "checksum": seen[0][1]}


def read_lite(paths, records, indexed, repeats=3, warmup=1):
    import tfrecord_lite
    from tfrecord_lite.ray import read_tfrecords

    H.warm_page_cache(paths)
    key = CHECK_KEY["w2"]
    with tempfile.TemporaryDirectory(prefix="tfl-bench-ray-") as tmp:
        if indexed:
            linked = []
            for p in paths:
                linked.append(os.path.join(tmp, os.path.basename(p)))
                os.symlink(os.path.abspath(p), linked[-1])
                tfrecord_lite.build_index(linked[-1])
            paths = linked
        _init_ray()
        options = {"override_num_blocks": CPUS} if indexed else {}
        result = _timed(lambda: _consume(read_tfrecords(paths, **options), key), records, repeats, warmup)
    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")
    result["implementation"] = tfrecord_lite.implementation
    return result


def read_ray(paths, records, repeats=3, warmup=1):
    import ray.data

    H.warm_page_cache(paths)
    _init_ray()
    return _timed(lambda: _consume(ray.data.read_tfrecords(paths), CHECK_KEY["w2"]), records, repeats, warmup)


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, repeats: int = 3, warmup: int = 1, timeout: float | None = None, log=None,
        rounds: int = 1) -> dict:
    """Measure every peer on W2; returns {"machine", "workloads", "measurements", "ratios", ...}."""
    machine = H.machine_info()
    w = workloads["w2"]
    args = {"paths": w["paths"], "records": w["records"], "repeats": repeats, "warmup": warmup}
    ms = H.measure_workload("benchmarks.bench_ray", "w2", w, "read", PEERS, args, rounds, timeout, log)
    ratios = [H.ratio("w2", "Ray Data read", ms["lite"], ms["ray"], TARGET),
              H.ratio("w2", "Ray Data read, indexed file", ms["lite_indexed"], ms["ray"], None)]
    results = H.package_results(SECTION, machine, {"w2": w}, list(ms.values()), ratios, repeats, warmup, rounds)
    results["ray_version"] = _ray_version()
    return results


def _ray_version() -> str:
    from importlib import metadata

    return metadata.version("ray")


def report(results: dict) -> str:
    """The results as markdown: conditions, the W2 table, and the targets."""
    lines = ["## Ray Data (bench_ray.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results) + f"; each peer starts its own local Ray {results['ray_version']} cluster "
        f"(ray.init(num_cpus={CPUS})), untimed",
        "- A run: build the Dataset (schema inferred) and consume every block as pyarrow; MB/s counts "
        "file bytes, MB = 10^6 bytes",
        "- \"vs\" columns are this row's records/s over the peer's; the work runs in Ray's worker "
        "processes, so no CPU/wall is given",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.workload_tables(results, [("vs Ray's own", "ray")])
    lines.append(H.targets_table(results["ratios"]))
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    return run(generate(args.scale, args.data_dir), **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark Ray Data reads.", _measure, report)


if __name__ == "__main__":
    main()
