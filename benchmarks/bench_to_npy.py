"""to_npy's memory bound: stream a dataset of raw float32 arrays into .npy memory maps and
report the process's peak RSS against the size of what it wrote.

Workload: RAW, records of one float32 (64, 256) array (64 KiB, read back with
RawTensorFeature) and an int64 label, 8,000 records (525 MB) at scale 1. to_npy runs in its
own process; its peak RSS is measured from just before the call (the kernel's high-water mark
is reset there), so it shows what converting costs, not what the interpreter had before.
There is no peer: TensorFlow has no equivalent.

    python -m benchmarks.bench_to_npy [--scale 1.0] [--write-results]
"""

from __future__ import annotations

import os
import shutil
import time

from benchmarks import _harness as H

SECTION = "bench_to_npy"
SHAPE = (64, 256)
RECORDS = 8000
BATCH = 256
BOUND_MB = 256  # stated bound on peak RSS, whatever the output size


def generate(scale: float, data_dir: str) -> dict:
    """The RAW workload: one file, built once per scale."""
    import numpy as np

    import tfrecord_lite as tfl

    rows = max(BATCH, int(RECORDS * scale))
    path = os.path.join(data_dir, "raw_arrays", f"arrays-{rows}.tfrecord")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        rng = np.random.default_rng(0)
        with tfl.TFRecordWriter(path) as w:
            for i in range(0, rows, 500):
                n = min(500, rows - i)
                w.write_many(tfl.encode_examples(
                    {"x": rng.standard_normal((n,) + SHAPE, dtype=np.float32), "y": np.arange(i, i + n)},
                    raw=("x",)))
    return {"path": path, "records": rows, "bytes": os.path.getsize(path),
            "description": f"raw arrays: 1 file x {rows:,} Examples of a float32 {SHAPE} array + label"}


def convert(path: str, out_dir: str, records: int) -> dict:
    """Child: one to_npy run, timed, with the peak RSS it reached above where it started."""
    import numpy as np

    import tfrecord_lite as tfl

    with open("/proc/self/clear_refs", "w") as f:  # restart the kernel's peak (VmHWM) here
        f.write("5")
    start = _status_mb("VmRSS")
    t0 = time.perf_counter()
    out = tfl.to_npy(path, {"x": tfl.RawTensorFeature(SHAPE, np.float32), "y": tfl.FixedLenFeature([], np.int64)},
                     out_dir, batch_size=BATCH, progress=False)
    seconds = time.perf_counter() - t0
    peak = _status_mb("VmHWM")
    if len(out["y"]) != records or not (out["y"] == np.arange(records)).all():
        raise AssertionError("to_npy lost or reordered records")
    written = sum(v.nbytes for v in out.values())
    return {"seconds": seconds, "start_rss_mb": start, "peak_rss_mb": peak, "written_bytes": written,
            "implementation": tfl.implementation}


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(field))


def run(workload: dict, repeats: int, out_dir: str, timeout: float | None = None, log=H.log) -> dict:
    """to_npy over the workload `repeats` times, each in a fresh process."""
    runs = []
    try:
        for i in range(max(1, repeats)):
            log(f"to_npy run {i + 1}/{max(1, repeats)} ...")
            shutil.rmtree(out_dir, ignore_errors=True)
            runs.append(H.run_in_subprocess("benchmarks.bench_to_npy:convert",
                                            {"path": workload["path"], "out_dir": out_dir,
                                             "records": workload["records"]}, timeout=timeout))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"benchmark": SECTION, "machine": H.machine_info(), "workload": workload, "runs": runs}


def _measure(args, repeats, warmup, timeout, log, rounds) -> dict:
    workload = generate(args.scale, args.data_dir)
    return run(workload, repeats, os.path.join(args.data_dir, "_to_npy_out"), timeout, log)


def report(results: dict) -> str:
    w, runs = results["workload"], results["runs"]
    seconds = H.median([r["seconds"] for r in runs])
    peak = max(r["peak_rss_mb"] for r in runs)
    start = H.median([r["start_rss_mb"] for r in runs])
    written = runs[0]["written_bytes"]
    lines = ["## to_npy: memory while streaming to .npy (bench_to_npy.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        f"- {len(runs)} runs, each in a fresh process; peak RSS is the kernel's high-water mark "
        "(VmHWM), reset just before to_npy, so it counts the conversion, not the imports",
        f"- Workload: {w['description']} ({w['bytes'] / 1e6:,.0f} MB file); batch_size={BATCH}",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines += ["", H.markdown_table(
        ["written", "median s", "MB/s written", "RSS at start", "peak RSS (max of runs)", "bound", "met"],
        [[f"{written / 1e6:,.0f} MB", f"{seconds:.2f}", f"{written / seconds / 1e6:,.0f}", f"{start:.0f} MB",
          f"{peak:.0f} MB", f"<= {BOUND_MB} MB", "yes" if peak <= BOUND_MB else "**no**"]],
        "rrrrrrl")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    H.main(argv, SECTION, "Measure to_npy's peak memory against its output size.", _measure, report, repeats=3)


if __name__ == "__main__":
    main()
