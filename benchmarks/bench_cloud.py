"""Reading from object storage: TFRecordDataset over the W1 files (8 files of ~32 KiB image
Examples) on a loopback S3 server, against the same files on local disk.

The S3 server is moto's server mode (moto[server]) started in its own process on 127.0.0.1,
so it does not share the reader's interpreter; the W1 files are uploaded to it once, untimed.
Both peers run the same pipeline, each in its own subprocess:
  local  TFRecordDataset(paths, W1 spec, batch_size=BATCH, num_threads=2), files in the page cache
  s3     the same over s3:// URLs: each object streamed through one presigned GET (SignedStream)
  s3fs   s3fs alone fetching each whole object with one GET, parsing nothing: the SDK's own
         transfer, for scale (its event loop receives every byte under the GIL)

The server is a Python test double of S3: it answers every GET by copying the whole object
out of its store, so its figures are a floor for what a real object store on a fast network
gives, not a ceiling. It runs with its objects in memory and glibc's large allocations on the
heap (SERVER_ENV); left to its defaults it spends most of its time in the kernel zero-filling
fresh pages for those copies, and the whole comparison measures that.

    python -m benchmarks.bench_cloud [--scale 1.0] [--repeats 3] [--write-results]
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

from . import _harness as H
from .bench_dataset import _check_seen, _pass
from .generate_data import generate, lite_features

SECTION = "bench_cloud"
BATCH = 1024  # as in bench_dataset
THREADS = 2
BUCKET = "tfrecord-lite-bench"
TARGET = 0.5  # s3 over local, records/s
CREDENTIALS = {"key": "testing", "secret": "testing"}

PEERS = [
    ("lite", "tfrecord_lite TFRecordDataset, local files", "dataset_local"),
    ("lite_s3", "tfrecord_lite TFRecordDataset, s3:// on loopback", "dataset_s3"),
    ("s3fs", "s3fs cat_file, one GET per object, no parsing", "fetch_s3"),
]


# moto copies the whole object out of its store for every GET. Keeping objects in memory and
# large buffers on the heap (not a fresh mmap, zero-filled page by page, per request) lets
# the server's kernel time fall from most of its CPU to a fraction of it.
SERVER_ENV = {
    "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": str(1 << 30),
    "MALLOC_MMAP_THRESHOLD_": str(1 << 31),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
}


def storage_options(endpoint: str) -> dict:
    return {**CREDENTIALS, "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}


@contextlib.contextmanager
def s3_server(timeout: float = 60.0):
    """moto's S3 server in a child process on a free loopback port; yields its endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **SERVER_ENV})
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise H.PeerError(f"the moto S3 server exited with code {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise H.PeerError(f"the moto S3 server did not listen on port {port} in {timeout}s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def upload(paths, endpoint) -> list[str]:
    """Put the files into the bucket (once); returns their s3:// URLs."""
    import s3fs

    fs = s3fs.S3FileSystem(**storage_options(endpoint))
    if not fs.exists(BUCKET):
        fs.call_s3("create_bucket", Bucket=BUCKET)
    urls = []
    for p in paths:
        key = f"{BUCKET}/w1/{os.path.basename(p)}"
        fs.put_file(p, key)
        urls.append(f"s3://{key}")
    return urls


# -- peers, each run in its own subprocess ---------------------------------------------------

def _run(files, records, repeats, warmup, **options):
    from tfrecord_lite import TFRecordDataset, implementation

    if "tensorflow" in sys.modules:
        raise AssertionError("tensorflow must not be loaded in the tfrecord_lite process")
    ds = TFRecordDataset(files, lite_features("w1"), batch_size=BATCH, num_threads=THREADS,
                         cycle_length=THREADS * 2, **options)
    seen, cpu = [], []
    seconds = H.time_repeats(_pass(lambda: ds, "w1", seen), repeats, warmup, cpu_times=cpu)
    return {"seconds": seconds, "cpu_seconds": cpu, "checksum": _check_seen(seen, records),
            "peak_rss_mb": H.peak_rss_mb(), "implementation": implementation}


def dataset_local(paths, urls, endpoint, records, repeats=3, warmup=1):
    H.warm_page_cache(paths)
    return _run(paths, records, repeats, warmup)


def dataset_s3(paths, urls, endpoint, records, repeats=3, warmup=1):
    from tfrecord_lite import fs as tfs

    with tfs.open_input(urls[0], storage_options(endpoint)) as f:
        if not isinstance(f, tfs.SignedStream):
            raise AssertionError(f"s3:// inputs were read by {type(f).__name__}, not SignedStream")
    return _run(urls, records, repeats, warmup, storage_options=storage_options(endpoint))


def fetch_s3(paths, urls, endpoint, records, repeats=3, warmup=1):
    import s3fs

    fs = s3fs.S3FileSystem(**storage_options(endpoint))
    sizes = [fs.size(u) for u in urls]
    got = []

    def run():
        got.append(sum(len(fs.cat_file(u, start=0, end=n)) for u, n in zip(urls, sizes)))

    cpu = []
    seconds = H.time_repeats(run, repeats, warmup, cpu_times=cpu)
    if set(got) != {sum(sizes)}:
        raise AssertionError(f"fetched {sorted(set(got))} bytes, expected {sum(sizes)}")
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": H.peak_rss_mb()}


# -- orchestration -----------------------------------------------------------------------

def run(workloads: dict, repeats: int = 3, warmup: int = 1, timeout: float | None = None, log=None,
        rounds: int = 1) -> dict:
    """Measure both peers on W1; returns {"machine", "workloads", "measurements", "ratios", ...}."""
    machine = H.machine_info()
    w = workloads["w1"]
    with s3_server() as endpoint:
        t0 = time.perf_counter()
        urls = upload(w["paths"], endpoint)
        upload_s = time.perf_counter() - t0
        if log:
            log(f"uploaded {len(urls)} files ({w['bytes'] / 1e6:,.0f} MB) in {upload_s:.1f}s")
        args = {"paths": w["paths"], "urls": urls, "endpoint": endpoint, "records": w["records"],
                "repeats": repeats, "warmup": warmup}
        ms = H.measure_workload("benchmarks.bench_cloud", "w1", w, "read+parse", PEERS, args, rounds, timeout, log)
    ratios = [H.ratio("w1", "s3:// over local files", ms["lite_s3"], ms["lite"], TARGET),
              H.ratio("w1", "s3:// pipeline over s3fs fetching alone", ms["lite_s3"], ms["s3fs"], None)]
    results = H.package_results(SECTION, machine, {"w1": w}, list(ms.values()), ratios, repeats, warmup, rounds)
    results["upload_s"] = upload_s
    return results


def report(results: dict) -> str:
    """The results as markdown: conditions, the W1 table, and the target."""
    lines = ["## Object storage: TFRecordDataset over s3:// (bench_cloud.py)", ""]
    lines += H.machine_lines(results["machine"])
    lines += [
        H.runs_line(results) + "; a pass is one epoch",
        f"- Both peers: TFRecordDataset(W1 spec, batch_size={BATCH}, num_threads={THREADS}); local files "
        "in the page cache; s3:// from moto's S3 server (moto[server]) in its own process on "
        "127.0.0.1 (objects in memory, large allocations on the heap: "
        + ", ".join(f"{k}={v}" for k, v in SERVER_ENV.items()) + "); each object streamed through "
        "one presigned GET",
        "- The server copies the whole object for every GET, so the s3:// figures are "
        "a floor for a real object store, not a ceiling",
        f"- Upload of the files (untimed): {results['upload_s']:.1f}s",
    ]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines.append("")
    lines += H.workload_tables(results, [("vs local", "lite"), ("vs s3fs alone", "s3fs")],
                               [("peak RSS MB", "peak_rss_mb")])
    lines.append(H.targets_table(results["ratios"]))
    return "\n".join(lines) + "\n"


def _measure(args, **options):
    return run(generate(args.scale, args.data_dir), **options)


def main(argv=None):
    H.main(argv, SECTION, "Benchmark TFRecordDataset reading s3:// against local files.", _measure, report,
           repeats=3)


if __name__ == "__main__":
    main()
