"""Bounds: descriptors (thousands of files under a small RLIMIT_NOFILE, counted while reading),
and the wait for queued work as the interpreter exits."""

import os
import subprocess
import sys
import textwrap
import time

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


EXITING = textwrap.dedent("""
    import sys, time
    from tfrecord_lite import _native, TFRecordDataset

    def slow(records):
        time.sleep(0.5)
        return records

    _native.use(sys.argv[2]).__enter__()
    it = iter(TFRecordDataset(sys.argv[1], parse=slow, batch_size=1, num_threads=2, prefetch=40))
    next(it)
    print(time.time(), flush=True)
    raise KeyboardInterrupt  # Ctrl-C in a training step, the iterator still held
""")


def test_ctrl_c_with_an_iterator_held_exits_without_running_the_queued_parses(backend, tmp_path):
    # The pool's threads are joined at exit, and they ran every parse task queued ahead
    # first: 40 tasks of 0.5 s on 2 threads kept the process 10 s. Now the queued ones are
    # cancelled and only those running finish.
    (tmp_path / "a.tfrecord").write_bytes(bytes(backend.framing.encode_frames([b"r"] * 100)))
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", EXITING, str(tmp_path / "a.tfrecord"), backend.name],
                         capture_output=True, text=True, env=env, timeout=120)
    ended = time.time()
    assert out.returncode != 0 and "KeyboardInterrupt" in out.stderr, out.stderr
    assert "Exception ignored" not in out.stderr, out.stderr
    assert ended - float(out.stdout) < 3, ended - float(out.stdout)


def test_a_forked_child_leaves_the_parents_open_runs_alone(backend, tmp_path):
    # A child has none of the runs' threads, and a lock of theirs held as it forked stays held
    # there: its exit must not touch them.
    from tfrecord_lite import TFRecordDataset, _pipeline

    (tmp_path / "a.tfrecord").write_bytes(bytes(backend.framing.encode_frames([b"r"] * 100)))
    it = iter(TFRecordDataset(str(tmp_path / "a.tfrecord"), parse=lambda r: r, num_threads=2))
    next(it)
    runs = len(_pipeline._open_runs)  # this one, and any an earlier test left to the collector
    pid = os.fork()
    if pid == 0:
        os._exit(len(_pipeline._open_runs))
    assert os.waitpid(pid, 0)[1] == 0
    assert runs >= 1 and len(_pipeline._open_runs) == runs
    it.close()
    assert len(_pipeline._open_runs) == runs - 1
