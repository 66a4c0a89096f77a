"""Arrow output: tfrecord_lite.arrow.to_arrow against parse_example to numpy and against the
plain way to build an Arrow table without a columnar parser.

W2 (generate_data: 18 small fixed-length features, one of them bytes) in batches of 1,024
records, one thread, the same batches for every peer:
  tfrecord_lite to_arrow       TFRecordReader.record_batches (records read in place) through
                               to_arrow: a pyarrow.RecordBatch per batch
  tfrecord_lite parse_example  the same batches through parse_example: dicts of numpy arrays
  decode_example + from_pydict the same batches decoded without a spec (decode_examples: a
                               dict per record) and assembled with pyarrow.Table.from_pydict

Each peer runs in its own subprocess (see _harness): one untimed warm-up run, then --repeats
timed runs over page-cached files; with --rounds N the peers take turns N times.

    python -m benchmarks.bench_arrow [--scale 1.0] [--repeats 5] [--rounds 1] [--write-results]
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

from . import _harness as H
from .bench_example import BATCH, CHECK_KEY, _parse_result
from .generate_data import generate, lite_features

SECTION = "bench_arrow"
NUMPY_TARGET = 0.8   # to_arrow vs parse_example to numpy, same records
PYDICT_TARGET = 5.0  # to_arrow vs decode_example dicts + pyarrow.Table.from_pydict

PEERS = [
    ("lite_arrow", "tfrecord_lite to_arrow", "parse_lite", {"output": "arrow"}),
    ("lite_numpy", "tfrecord_lite parse_example (numpy)", "parse_lite", {"output": "numpy"}),
    ("lite_pydict", "decode_examples + Table.from_pydict", "pydict_lite", {}),
]


def _batches(paths):
    from tfrecord_lite import TFRecordReader
    from tfrecord_lite.batch import rebatch

    blocks = itertools.chain.from_iterable(TFRecordReader(p).record_batches() for p in paths)
    return rebatch(blocks, BATCH)


def _checked(run, paths, records, repeats, warmup):
    import tfrecord_lite

    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")
    result = _parse_result(run, paths, records, repeats, warmup)
    result["implementation"] = tfrecord_lite.implementation
    return result


def parse_lite(paths, records, output, repeats=5, warmup=1):
    """to_arrow (output "arrow") or parse_example (output "numpy") over the W2 batches."""
    from tfrecord_lite import parse_example
    from tfrecord_lite.arrow import to_arrow

    spec = lite_features("w2")
    key = CHECK_KEY["w2"]
    arrow = output == "arrow"
    parse = to_arrow if arrow else parse_example

    def run():
        n = total = 0
        for batch in _batches(paths):
            parsed = parse(batch, spec)
            # np.asarray views the Arrow buffer; Array.to_numpy() costs ~80 us a call here
            column = np.asarray(parsed.column(key)) if arrow else parsed[key]
            n += len(column)
            total += int(column.sum())
        return n, total

    return _checked(run, paths, records, repeats, warmup)


def pydict_lite(paths, records, repeats=5, warmup=1):
    import pyarrow as pa

    from tfrecord_lite import decode_examples

    key = CHECK_KEY["w2"]

    def run():
        n = total = 0
        for batch in _batches(paths):
            rows = decode_examples(batch)
            table = pa.Table.from_pydict({name: [row.get(name) for row in rows] for name in rows[0]})
            n += table.num_rows
            total += sum(v[0] for v in table.column(key).to_pylist())
        return n, total

    return _checked(run, paths, records, repeats, warmup)


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, repeats: int = 5, warmup: int = 1, timeout: float | None = None, log=None,
        rounds: int = 1) -> dict:
    """Measure every peer on W2; returns {"machine", "workloads", "measurements", "ratios", ...}."""
    machine = H.machine_info()
    w = workloads["w2"]
    args = {"paths": w["paths"], "records": w["records"], "repeats": repeats, "warmup": warmup}
    ms = H.measure_workload("benchmarks.bench_arrow", "w2", w, "parse", PEERS, args, rounds, timeout, log)
    ratios = [H.ratio("w2", "Arrow output", ms["lite_arrow"], ms["lite_numpy"], NUMPY_TARGET),
              H.ratio("w2", "Arrow output", ms["lite_arrow"], ms["lite_pydict"], PYDICT_TARGET)]
    return H.package_results(SECTION, machine, {"w2": w}, list(ms.values()), ratios, repeats, warmup, rounds)


def report(results: dict) -> str:
    """The results as markdown: conditions, the W2 table, and the targets."""
    lines = ["## Arrow output (bench_arrow.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results) + "; one thread per peer",
        f"- W2 records in batches of {BATCH:,} read in place, every feature of the workload; MB/s counts "
        "file bytes, MB = 10^6 bytes",
        "- \"vs\" columns are this row's records/s over the peer's; CPU/wall is the process's CPU "
        "time over wall time",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.workload_tables(results, [("vs parse_example", "lite_numpy"), ("vs from_pydict", "lite_pydict")])
    lines.append(H.targets_table(results["ratios"]))
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    return run(generate(args.scale, args.data_dir), **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark Arrow output.", _measure, report)


if __name__ == "__main__":
    main()
