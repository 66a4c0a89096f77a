"""Scaling with cores: reader threads, DataLoader workers, write_parallel workers, and the
physical reference, each measured in a fresh process and quoted as a ratio to one thread.

Workloads (written by tfrecord_lite itself, under --data-dir/scaling_*; --scale shrinks the
records per file):
  W2  16 files x 100,000 tabular Examples of ~450 B (generate_data's W2 rows: 18 features)
  W1  16 files x 1,000 Examples holding a 32 KiB bytes feature (generate_data's W1 spec)

Sweeps, over n = 1, 2, 4, ... up to os.cpu_count():
  raw / parse   TFRecordDataset(files[, spec], batch_size=1024, num_threads=n,
                max_open_files=max(16, n)), each run an epoch of one dataset (as a
                training loop iterates one), with default options (cycle_length follows
                num_threads, block_length=1), with block_length=1024, and with default
                options under the glibc settings of the README's "Large records and glibc"
                (tfrecord_lite.tune_malloc() in the child before any thread starts), and
                with memory_map=True (the files scanned in place in the page cache)
  loader        torch DataLoader(TFRecordIterableDataset(files, spec, batch_size=1024,
                as_tensors=True), batch_size=None, num_workers=0, 2, 4, ...): "defaults"
                keeps one DataLoader with persistent workers across the timed runs (its
                warm-up run starts them), so it times the batches; "fresh workers" makes a
                DataLoader per run, so each run also starts its worker processes; "glibc
                settings" is "defaults" after tfrecord_lite.tune_malloc() (the workers fork
                from the process, so they inherit the settings)
  write         write_parallel(batched encode_examples over W2 column blocks, 16 shards,
                num_workers=n), each run's shards deleted after it, untimed (kept, the
                dirty pages of a process's runs piled up until the kernel throttled writes)
  reference     n processes, each mapping its share of the files and checking every masked
                CRC with the crc32c package: what the hardware gives with no pipeline at all

GIL share (--gil, needs py-spy): the W2 parse pipeline with default options, at 1 and 2
threads and at every core, runs under py-spy twice, once sampling every running thread and
once only the thread holding the GIL; then again with bytes_output="column", which makes no
Python object per bytes value. Only the passes' samples count (the function running them and
the threads they start), not the child's start: its imports hold the GIL too. The GIL-held
samples are also counted by stage (GIL_STAGES: the innermost of those functions on a
sample's stack).
The share of the pipeline's work done holding the GIL, g, bounds its speed-up over one
thread by about 1/g however many cores there are (the GIL runs one thread at a time).

The DataLoader's main process: every batch is taken in by that one process (torch's own
per-batch work, its index queues' feeder threads, and turning the worker's buffer back into
arrays and bytes objects), so its CPU time per batch, measured (all its threads) in the
loader runs, bounds how fast any number of workers can deliver: the ceiling is the wall
time of a batch with no workers over that CPU time.

RESULTS.md keeps a section per core count (bench_scaling_2cpu, bench_scaling_16cpu, ...).

    python -m benchmarks.bench_scaling [--scale 1.0] [--repeats 2] [--gil] [--sweeps raw,parse]
                                       [--variants defaults] [--write-results]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import numpy as np

from . import _harness as H
from .generate_data import SEED, _w2_block, lite_features

SECTION = "bench_scaling"
MODULE = "benchmarks.bench_scaling"  # peers run by name in fresh processes
BATCH = 1024
FILES = 16
W2_ROWS = 100_000
W1_ROWS, W1_BYTES = 1_000, 32 * 1024
WRITE_SHARDS, WRITE_BLOCK = 16, 2048
GIL_RATE = 997  # py-spy samples per second; prime, so it does not beat with periodic work
# Stages of the pipeline a GIL sample is counted in: the innermost of these functions on its
# stack; a sample in the passes' own loop is the consumer's (freeing the batch it had).
GIL_STAGES = {"_decode": "the decoder's call", "_parse_task": "the parse task around it",
              "_read_piece": "reading pieces", "_interleave": "the interleave (consumer)",
              "_parsed": "batching and parse tasks (consumer)", "_worker": "the thread pool (queues, futures)"}
CONSUMER_STAGE, OTHER_STAGE = "the consumer's loop", "other"
VARIANTS = {"defaults": {}, "block_length=1024": {"block_length": 1024}, "glibc settings": {"glibc": True},
            "memory_map": {"memory_map": True}}
LOADER_VARIANTS = {"defaults": {}, "fresh workers": {"persistent": False}, "glibc settings": {"glibc": True}}
# Each target: (workload, sweep, variant, n, over: "1" | "reference", ratio). The 2-core
# ones are the floors of the many-core issue on a 2-core machine; the others apply where
# the machine has that many cores.
TARGETS = [
    ("w2", "parse", "defaults", 2, "1", 1.8),
    ("w2", "raw", "defaults", 2, "1", 1.8),
    ("w2", "loader", "defaults", 2, "1", 1.5),
    ("w1", "loader", "defaults", 2, "1", 1.5),
    ("w2", "write", "defaults", 2, "1", 1.7),
    ("w2", "parse", "defaults", 16, "1", 8.0),
    ("w1", "raw", "defaults", 16, "reference", 0.5),
    ("w1", "raw", "memory_map", 16, "reference", 0.5),  # the same floor, reading as the reference does
    ("w2", "loader", "defaults", 8, "1", 4.0),
]


def counts(limit: int, workers: bool = False) -> list[int]:
    """1, powers of two up to limit, and limit itself (1, 2, 4, 8, 12 for 12); for DataLoader
    workers 0 (loading in the main process) instead of 1."""
    out, n = [], 1
    while n < limit:
        out.append(n)
        n *= 2
    out = sorted(set(out + [limit]))
    return [0] + [n for n in out if n > 1] if workers else out


# -- data ------------------------------------------------------------------------------------

def generate(scale: float, data_dir: str) -> dict:
    """Write the W1 and W2 file sets (kept across runs of the same scale)."""
    import tfrecord_lite as tfl

    out = {}
    rows = {"w2": max(1, int(W2_ROWS * scale)), "w1": max(1, int(W1_ROWS * scale))}
    for name, n in rows.items():
        folder = os.path.join(data_dir, f"scaling_{name}_{n}")
        os.makedirs(folder, exist_ok=True)
        paths = [os.path.join(folder, f"part-{i:05d}-of-{FILES:05d}.tfrecord") for i in range(FILES)]
        for i, path in enumerate(paths):
            if not os.path.exists(path):
                with tfl.TFRecordWriter(path) as w:
                    w.write_many(tfl.encode_examples(_columns(name, i, n), deterministic=True))
        out[name] = {"paths": paths, "records": n * FILES, "bytes": sum(os.path.getsize(p) for p in paths),
                     "description": (f"{FILES} files x {n:,} tabular Examples (18 features)" if name == "w2"
                                     else f"{FILES} files x {n:,} Examples with a 32 KiB bytes feature")}
    return out


def _columns(name: str, file_index: int, n: int) -> dict:
    rng = np.random.default_rng([SEED, 10, file_index])
    if name == "w2":
        return _w2_block(rng, n)
    return {"image/encoded": [rng.bytes(W1_BYTES) for _ in range(n)],
            "image/filename": [b"img-%05d-%06d.jpg" % (file_index, k) for k in range(n)],
            "image/height": np.full(n, 64), "image/label": rng.integers(0, 1000, n),
            "image/width": np.full(n, 128)}


_KEY = {"w1": "image/label", "w2": "int_1"}


# -- measurements, each in its own subprocess ------------------------------------------------

def _timed(run, paths, records, repeats, warmup, teardown=None):
    H.warm_page_cache(paths)
    seen, cpu = [], []
    seconds = H.time_repeats(lambda: seen.append(run()), repeats, warmup, teardown=teardown, cpu_times=cpu)
    if set(seen) != {records}:
        raise AssertionError(f"passes saw {sorted(set(seen))} records, expected {records}")
    return {"seconds": seconds, "cpu_seconds": cpu}


def _dataset(paths, features, n, **options):
    """The sweeps' TFRecordDataset: batches of BATCH, n threads. One is made per measurement
    and each run is an epoch of it, as a training loop iterates one."""
    import tfrecord_lite as tfl

    return tfl.TFRecordDataset(paths, features, batch_size=BATCH, num_threads=n, max_open_files=max(16, n), **options)


def pipeline(paths, workload, records, sweep, n, options, repeats=2, warmup=1):
    """One TFRecordDataset pass per run: raw batches or parsed ones."""
    options = dict(options)
    if options.pop("glibc", False):
        _glibc_settings()
    features = lite_features(workload) if sweep == "parse" else None
    key = _KEY[workload]
    ds = _dataset(paths, features, n, **options)

    def run():
        seen = 0
        for batch in ds:
            seen += len(batch[key]) if features else len(batch)
        return seen

    return _timed(run, paths, records, repeats, warmup)


def loader(paths, workload, records, n, repeats=2, warmup=1, persistent=True, glibc=False):
    """One DataLoader pass per run over TFRecordIterableDataset, n worker processes; the
    batches go to the GPU when there is one. persistent: one DataLoader with persistent
    workers for every run (the warm-up run starts them), so the runs time the batches, not
    the start of the worker processes (which torch takes 50-150 ms for on 2 cores).
    glibc: tune_malloc() first."""
    import torch
    from torch.utils.data import DataLoader

    from tfrecord_lite.torch import TFRecordIterableDataset

    if glibc:
        _glibc_settings()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    ds = TFRecordIterableDataset(paths, lite_features(workload), batch_size=BATCH, as_tensors=True)
    key = _KEY[workload]

    keep = DataLoader(ds, batch_size=None, num_workers=n, persistent_workers=True) if persistent and n else None

    def run():
        seen = 0
        # Not `keep or ...`: truth of a DataLoader is its len(), which counts the records.
        for batch in keep if keep is not None else DataLoader(ds, batch_size=None, num_workers=n):
            seen += len(batch[key].to(device, non_blocking=True))
        if device == "cuda":
            torch.cuda.synchronize()
        return seen

    return _timed(run, paths, records, repeats, warmup)


def _glibc_settings():
    import tfrecord_lite as tfl

    if not tfl.tune_malloc():
        raise RuntimeError("the glibc settings apply only where the C library is glibc")


def _encode_blocks(chunk):
    """write_parallel's batched encoder: column blocks to one framed RecordBatch."""
    from tfrecord_lite import RecordBatch, encode_examples

    return RecordBatch.concat([encode_examples(block, deterministic=True, as_batch=True) for block in chunk])


def write(paths, workload, records, n, repeats=2, warmup=1):
    """write_parallel of the W2 rows (as column blocks) into 16 shards with n workers."""
    import tfrecord_lite as tfl

    per_file = records // len(paths)
    cols = [_columns("w2", i, per_file) for i in range(len(paths))]
    blocks = [{k: v[a:a + WRITE_BLOCK] for k, v in c.items()} for c in cols for a in range(0, per_file, WRITE_BLOCK)]
    out = tempfile.mkdtemp(prefix="tfl-scaling-write-")
    folder = os.path.join(out, "run")
    try:
        def run():
            os.makedirs(folder)
            infos = tfl.write_parallel(blocks, _encode_blocks, os.path.join(folder, "w"), WRITE_SHARDS,
                                       num_workers=n, chunk_size=1, batched=True, progress=False)
            return sum(i.records for i in infos)

        # Each run's shards are deleted after it, untimed: kept, a process's runs piled up
        # dirty pages until the kernel throttled the writers (runs of 0.19 s took 0.48 s,
        # nearly all of it system time, after about 1 GB written).
        return _timed(run, [], records, repeats, warmup, teardown=lambda: shutil.rmtree(folder))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def reference(paths, workload, records, n, repeats=2, warmup=1):
    """n processes check every masked CRC of their share of the files through mmap."""
    from multiprocessing import get_context

    with get_context("fork").Pool(n) as pool:
        return _timed(lambda: sum(pool.map(_crc_file, paths)), paths, records, repeats, warmup)


def _crc_file(path) -> int:
    import mmap
    import struct

    import crc32c

    def masked(c):
        return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    n = pos = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, memoryview(m) as mv:
        while pos < len(m):
            (length,) = struct.unpack_from("<Q", m, pos)
            with mv[pos:pos + 8] as head, mv[pos + 12:pos + 12 + length] as data:
                if (masked(crc32c.crc32c(head)) != struct.unpack_from("<I", m, pos + 8)[0]
                        or masked(crc32c.crc32c(data)) != struct.unpack_from("<I", m, pos + 12 + length)[0]):
                    raise AssertionError(f"{path}: bad CRC at {pos}")
            pos += 16 + length
            n += 1
    return n


def gil_pass(paths, workload, records, n, seconds=3.0, bytes_output="object"):
    """Parse passes with default options (but bytes_output) until `seconds` have passed (run
    under py-spy)."""
    features, key = lite_features(workload), _KEY[workload]
    H.warm_page_cache(paths)
    batches = passes = 0
    ds = _dataset(paths, features, n, bytes_output=bytes_output)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or not passes:
        for batch in ds:
            batches += 1
            len(batch[key])
        passes += 1
    return {"seconds": [time.perf_counter() - t0], "batches": batches, "passes": passes}


def _stage(frames: list, loop: str) -> str:
    """The GIL_STAGES stage of a sample's frames (outermost first)."""
    names = [f.split(" (", 1)[0].rpartition(".")[2] for f in frames]
    for name in reversed(names):
        if name in GIL_STAGES:
            return GIL_STAGES[name]
    return CONSUMER_STAGE if names and names[-1] == loop else OTHER_STAGE


def _py_spy_samples(function: str, args: dict, gil: bool, timeout) -> tuple[dict, dict, dict]:
    """Run function in a child under py-spy; returns (its result, samples per thread name,
    samples per stage)."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    with tempfile.TemporaryDirectory(prefix="tfl-gil-") as tmp:
        raw = os.path.join(tmp, "samples.txt")
        prefix = [spy, "record", "--threads", "--nonblocking", "-r", str(GIL_RATE), "-f", "raw", "-o", raw]
        if gil:
            prefix.append("--gil")
        result = H.run_in_subprocess(function, args, timeout=timeout, prefix=prefix + ["--"])
        threads: dict = {}
        stages: dict = {}
        loop = function.rpartition(":")[2]
        with open(raw) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if not (count.isascii() and count.isdigit()):
                    # --nonblocking: a frame read while the interpreter rewrote it, its name
                    # garbled (line breaks included), so the line holds no sample count.
                    continue
                count = int(count)
                name, *frames = stack.split(";")
                name = name.split(": ", 1)[-1]
                if ((f"{loop} (" not in stack and "Thread._bootstrap (" not in stack) or "warm_page_cache (" in stack
                        or "importlib._bootstrap" in stack):
                    continue  # the child starting up (its imports hold the GIL), not the passes
                # Pool threads are named tfrecord_lite_N; py-spy cannot name some short-lived ones.
                name = "worker" if name.startswith("tfrecord_lite") else "unnamed" if name.startswith("thread (") else name
                threads[name] = threads.get(name, 0) + count
                stage = _stage(frames, loop)
                stages[stage] = stages.get(stage, 0) + count
    return result, threads, stages


def gil_share(paths, workload, records, n, timeout, bytes_output="object"):
    """The pipeline's GIL share measured with py-spy (module docstring)."""
    args = {"paths": paths, "workload": workload, "records": records, "n": n, "bytes_output": bytes_output}
    ran, busy, _ = _py_spy_samples(f"{MODULE}:gil_pass", args, False, timeout)
    held_run, held, stages = _py_spy_samples(f"{MODULE}:gil_pass", args, True, timeout)
    # Normalise each run to samples per batch: the two runs do different numbers of batches.
    per_batch = {t: busy.get(t, 0) / ran["batches"] for t in busy}
    held_per_batch = {t: held.get(t, 0) / held_run["batches"] for t in held}
    work, gil = sum(per_batch.values()), sum(held_per_batch.values())
    wall_ms = 1e3 * ran["seconds"][0] / ran["batches"]
    return {"threads": n, "bytes_output": bytes_output, "batch_ms": wall_ms, "cpu_ms": 1e3 * work / GIL_RATE,
            "gil_ms": 1e3 * gil / GIL_RATE, "share": gil / work if work else float("nan"),
            "by_thread": {t: {"busy_ms": 1e3 * per_batch.get(t, 0) / GIL_RATE,
                              "gil_ms": 1e3 * held_per_batch.get(t, 0) / GIL_RATE}
                          for t in sorted(set(per_batch) | set(held_per_batch))},
            "by_stage": {stage: 1e3 * c / held_run["batches"] / GIL_RATE for stage, c in stages.items()}}


# -- orchestration ---------------------------------------------------------------------------

def run(workloads: dict, cpus: int | None = None, repeats: int = 2, warmup: int = 1, timeout=None,
        log=None, rounds: int = 1, gil: bool = False, sweeps=("raw", "parse", "loader", "write", "reference"),
        variants=None) -> dict:
    """Every sweep in `sweeps` for each workload; `variants` (names, default all) limits the
    raw, parse and loader sweeps to those options."""
    from tfrecord_lite.memory import glibc

    cpus = cpus or os.cpu_count() or 1
    machine = H.machine_info()
    on_glibc = glibc() is not None  # the glibc settings' variants need it
    rows = []

    def wanted(variant, options):  # mallopt's parameters are glibc's
        return (on_glibc or not options.get("glibc")) and (not variants or variant in variants)

    for name, w in workloads.items():
        base = {"paths": w["paths"], "workload": name, "records": w["records"], "repeats": repeats, "warmup": warmup}
        plan = []
        for sweep in ("raw", "parse"):
            if sweep in sweeps:
                plan += [((sweep, variant, n), "pipeline", {"sweep": sweep, "n": n, "options": options})
                         for variant, options in VARIANTS.items() if wanted(variant, options) for n in counts(cpus)]
        if "loader" in sweeps:
            plan += [(("loader", variant, n), "loader", {"n": n, **args}) for variant, args in LOADER_VARIANTS.items()
                     if wanted(variant, args) for n in counts(cpus, workers=True)]
        if "write" in sweeps and name == "w2":
            plan += [(("write", "defaults", n), "write", {"n": n}) for n in counts(cpus)]
        if "reference" in sweeps:
            plan += [(("reference", "defaults", n), "reference", {"n": n}) for n in sorted({1, cpus})]
        pooled = H.run_rounds([(key, " ".join(map(str, key)), f"{MODULE}:{func}", {**base, **args})
                               for key, func, args in plan], rounds, timeout, log)
        for (sweep, variant, n), p in pooled.items():
            m = H.summarize(p["seconds"], w["records"], w["bytes"], p["cpu_seconds"])
            rows.append({"workload": name, "sweep": sweep, "variant": variant, "n": n, **m})
    _add_ratios(rows)
    results = {"benchmark": SECTION, "section": section(cpus), "machine": machine, "cpus": cpus,
               "repeats": repeats, "warmup": warmup,
               "rounds": rounds, "workloads": {k: {x: w[x] for x in ("description", "records", "bytes")}
                                               for k, w in workloads.items()},
               "rows": rows, "targets": _targets(rows, cpus)}
    if gil and "w2" in workloads:
        w = workloads["w2"]
        # Default output, and bytes as BytesColumn: the share that making bytes objects takes.
        results["gil"] = [gil_share(w["paths"], "w2", w["records"], n, timeout, out)
                          for out in ("object", "column") for n in sorted({1, min(2, cpus), cpus})]
    return results


def section(cpus: int) -> str:
    """RESULTS.md keeps one section per core count: the figures are about the machine."""
    return f"{SECTION}_{cpus}cpu"


def _add_ratios(rows):
    """Each row's throughput over its sweep's base row (1 thread, 0 workers, 1 process) and,
    for W1 raw reading, over the reference at the most processes."""
    base = {}
    for r in rows:
        if r["n"] == (0 if r["sweep"] == "loader" else 1):
            base[(r["workload"], r["sweep"], r["variant"])] = r["records_per_s"]
    best_ref = {}
    for r in rows:
        if r["sweep"] == "reference":
            best_ref[r["workload"]] = max(best_ref.get(r["workload"], 0), r["records_per_s"])
    for r in rows:
        b = base.get((r["workload"], r["sweep"], r["variant"]))
        r["vs_1"] = r["records_per_s"] / b if b else None
        ref = best_ref.get(r["workload"])
        r["vs_reference"] = r["records_per_s"] / ref if ref and r["sweep"] in ("raw", "parse") else None


def _targets(rows, cpus):
    out = []
    for workload, sweep, variant, n, over, target in TARGETS:
        if n > cpus:
            continue
        row = next((r for r in rows if (r["workload"], r["sweep"], r["variant"], r["n"]) == (workload, sweep, variant, n)), None)
        if row is None:
            continue
        value = row["vs_1"] if over == "1" else row["vs_reference"]
        if value is not None:
            out.append({"workload": workload, "what": f"{sweep} {variant}, n={n} / "
                        + ("n=0" if sweep == "loader" and over == "1" else "n=1" if over == "1" else "reference"),
                        "ratio": value, "target": target, "met": value >= target})
    return out


def _loader_ceilings(rows) -> list:
    """Per loader row with workers: the main process's CPU per batch, and the speed-up over
    no workers that it allows at most (module docstring)."""
    base = {(r["workload"], r["variant"]): r for r in rows if r["sweep"] == "loader" and r["n"] == 0}
    out = []
    for r in rows:
        b = base.get((r["workload"], r["variant"]))
        if r["sweep"] != "loader" or not r["n"] or b is None:
            continue
        batches = -(-r["records"] // BATCH)
        cpu_ms = 1e3 * r["median_cpu_s"] / batches
        base_ms = 1e3 * b["median_s"] / batches
        out.append({"workload": r["workload"], "variant": r["variant"], "n": r["n"], "base_ms": base_ms,
                    "cpu_ms": cpu_ms, "ceiling": base_ms / cpu_ms if cpu_ms else float("inf")})
    return out


def report(results: dict) -> str:
    lines = ["## Scaling with cores (bench_scaling.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        f"- {results['repeats']} timed runs after {results['warmup']} warm-up run(s), each measurement in "
        "a fresh process; files in the page cache; records/s and MB/s from the median",
        "- n: reader threads (raw, parse), DataLoader workers (loader), write_parallel workers (write), "
        "processes (reference); \"vs n=1\" is over the same sweep's n=1 (n=0 for loader); \"vs ref\" is over "
        "the reference with the most processes",
        "- defaults: cycle_length follows num_threads, block_length=1 (TensorFlow's interleave order)",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    for name, w in results["workloads"].items():
        lines += [f"### {name.upper()}: {w['description']} ({w['records']:,} records, {w['bytes'] / 1e6:,.1f} MB)", ""]
        table = []
        for r in (r for r in results["rows"] if r["workload"] == name):
            table.append([r["sweep"], r["variant"], r["n"], f"{r['records_per_s']:,.0f}", f"{r['mb_per_s']:,.0f}",
                          f"{r['median_s']:.3f} ({r['min_s']:.3f}-{r['max_s']:.3f})",
                          f"{r['median_cpu_s'] / r['median_s']:.2f}",
                          f"{r['vs_1']:.2f}x" if r["vs_1"] is not None else "",
                          f"{r['vs_reference']:.2f}x" if r["vs_reference"] is not None else ""])
        lines += [H.markdown_table(["sweep", "options", "n", "records/s", "MB/s", "median s (min-max)", "CPU/wall",
                                    "vs n=1", "vs ref"], table, "llrrrrrrr"), ""]
    ceilings = _loader_ceilings(results["rows"])
    if ceilings:
        lines += ["### DataLoader: the main process's CPU per batch and the ceiling it sets", "",
                  H.markdown_table(["workload", "options", "workers", "no workers: wall ms/batch",
                                    "main process CPU ms/batch", "ceiling (wall / CPU)"],
                                   [[c["workload"].upper(), c["variant"], c["n"], f"{c['base_ms']:.3f}",
                                     f"{c['cpu_ms']:.3f}", f"{c['ceiling']:.1f}x"] for c in ceilings],
                                   "llrrrr"), ""]
    if results.get("gil"):
        lines += ["### GIL share of the W2 parse pipeline (default options but bytes_output, py-spy)", ""]
        table = [[g["bytes_output"], g["threads"], f"{g['batch_ms']:.2f}", f"{g['cpu_ms']:.2f}", f"{g['gil_ms']:.2f}",
                  f"{100 * g['share']:.0f}%", f"{1 / g['share']:.1f}x" if g["share"] else "",
                  ", ".join(f"{t}: {v['gil_ms']:.2f} of {v['busy_ms']:.2f}" for t, v in g["by_thread"].items())]
                 for g in results["gil"]]
        lines += [H.markdown_table(["bytes_output", "threads", "wall ms/batch", "CPU ms/batch", "GIL-held ms/batch",
                                    "GIL share", "ceiling (1/share)", "per thread: GIL ms of busy ms"], table,
                                   "lrrrrrrl"), ""]
        stages = [*GIL_STAGES.values(), CONSUMER_STAGE, OTHER_STAGE]
        if any("by_stage" in g for g in results["gil"]):  # results saved before it have none
            lines += ["GIL held by stage, µs per batch (the innermost stage's function on the stack):", "",
                      H.markdown_table(["stage"] + [f"{g['bytes_output']}, {g['threads']}" for g in results["gil"]],
                                       [[stage] + [f"{1e3 * g.get('by_stage', {}).get(stage, 0):.0f}"
                                                   for g in results["gil"]] for stage in stages],
                                       "l" + "r" * len(results["gil"])), ""]
    if results["targets"]:
        lines += ["### Targets", "", H.markdown_table(
            ["workload", "measurement", "measured", "target", "met"],
            [[t["workload"].upper(), t["what"], f"{t['ratio']:.2f}x", f">= {t['target']:g}x",
              "yes" if t["met"] else "**no**"] for t in results["targets"]], "llrrl"), ""]
    return "\n".join(lines) + "\n"


def _options(ap):
    ap.add_argument("--gil", action="store_true", help="also measure the GIL share with py-spy")
    ap.add_argument("--sweeps", default="raw,parse,loader,write,reference", help="comma-separated subset")
    ap.add_argument("--variants", help="comma-separated subset of the options' names (raw, parse and loader; "
                    "default all): " + ", ".join(sorted({*VARIANTS, *LOADER_VARIANTS})))


def _measure(args, **options):
    return run(generate(args.scale, args.data_dir), gil=args.gil, sweeps=tuple(args.sweeps.split(",")),
               variants=set(args.variants.split(",")) if args.variants else None, **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark scaling with threads, workers and processes.", _measure, report,
           repeats=2, options=_options)


if __name__ == "__main__":
    main()
