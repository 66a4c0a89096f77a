"""Descriptor bound: thousands of files under a small RLIMIT_NOFILE, counted while reading."""

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    from tfrecord_lite import _native, TFRecordDataset
    with _native.use(sys.argv[3]):
        bound, cycle, mapped = int(sys.argv[2]), int(sys.argv[4]), sys.argv[5] == "1"
        base = len(os.listdir("/proc/self/fd"))
        peak, n = 0, 0
        ds = TFRecordDataset(sys.argv[1], max_open_files=bound, cycle_length=cycle, num_threads=2,
                             batch_size=7, memory_map=mapped)
        for batch in ds:
            n += len(batch)
            peak = max(peak, len(os.listdir("/proc/self/fd")) - base)
        print(n, peak)
""")


# memory_map: the pure-Python backend's mappings (before Python 3.13) each kept a descriptor
# for as long as records of theirs lived, so batches of many small files went past the bound.
@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("bound, cycle", [(1, 1), (8, 8), (8, 2)])  # (8, 2): files opened ahead
def test_two_thousand_files_under_ulimit_64(backend, tmp_path, bound, cycle, mapped):
    for f in range(2000):
        # Two records per file, framed by the backend under test.
        frames = backend.framing.encode_frames([b"a%d" % f, b"b%d" % f])
        (tmp_path / f"{f:05d}.tfrecord").write_bytes(bytes(frames))
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(bound), backend.name, str(cycle),
                          str(int(mapped))],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    n, peak = map(int, out.stdout.split())
    assert n == 4000
    assert peak <= bound + 2, peak  # +2: a listing descriptor and slack for the pool
