"""glibc keeps the memory of a freed batch of large blocks in the process, so the next batch
of the same size takes no page faults: under tune_malloc, and for the compiled core's batches
of large bytes values by themselves (each case in a fresh interpreter, as glibc's state is
the process's)."""

import os
import platform
import subprocess
import sys
import textwrap

import pytest

import tfrecord_lite

GLIBC = platform.libc_ver()[0] == "glibc"

# Rounds of a W1 batch of images (1,024 blocks of 32 KiB) allocated and written by each of
# two threads, then freed by the main thread, as a dataset's batches are; prints the page
# faults of the rounds after the first. Each thread makes one batch a round (not a pool,
# where one thread may take both), so that with an arena per thread each arena gets the
# same work every round.
_ROUNDS = textwrap.dedent("""
    import ctypes, queue, resource, sys, threading
    import tfrecord_lite
    if sys.argv[1] != "none":
        assert tfrecord_lite.tune_malloc(one_arena=sys.argv[1] == "one_arena") is True
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]

    def batch():
        blocks = [libc.malloc(32 << 10) for _ in range(1024)]
        for b in blocks:
            ctypes.memset(b, 1, 32 << 10)
        return blocks

    jobs, done = [queue.Queue(), queue.Queue()], queue.Queue()

    def worker(todo):
        while todo.get():
            done.put(batch())

    for todo in jobs:
        threading.Thread(target=worker, args=(todo,), daemon=True).start()
    faults = []
    for _ in range(4):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for todo in jobs:
            todo.put(True)
        batches = [done.get() for _ in jobs]
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        for blocks in batches:
            for b in blocks:
                libc.free(b)
    for todo in jobs:
        todo.put(False)
    print(sum(faults[1:]))
""")


def _faults_after_the_first_round(mode, script=_ROUNDS):
    # Without glibc settings or a backend forced from outside: the cases set what they test.
    env = {k: v for k, v in os.environ.items() if k != "TFRECORD_LITE_PURE_PYTHON" and not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, env=env)
    return int(out.stdout)


def test_freed_batches_stay_in_the_process():
    if not GLIBC:  # the settings are glibc's: elsewhere nothing changes
        assert tfrecord_lite.tune_malloc() is False
        return
    pages = 3 * 2 * 1024 * (32 << 10) // 4096  # written in the three rounds after the first
    # Without the settings the threads' arenas give most of each round's memory back, and
    # the next round faults it in again; with them it stays, in one arena or in each
    # thread's own.
    assert _faults_after_the_first_round("none") > pages // 2
    assert _faults_after_the_first_round("one_arena") < pages // 100
    assert _faults_after_the_first_round("own_arenas") < pages // 100


# Rounds of batches of 1,024 bytes values of 32 KiB made in the main thread, whose heap glibc
# trims most eagerly, and freed; prints the page faults of the last three rounds. The values
# are Python's own (control), the decoder's, or those split from a DataLoader worker's
# buffer. "kind:n" makes n batches a round and frees the newest first, as a DataLoader's main
# process drops the batches that arrived before their turn: two at the top of the heap
# together are more than the most glibc learns to keep there.
_VALUES = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import tfrecord_lite
    from tfrecord_lite import _native
    assert tfrecord_lite.implementation == "cython"
    kind, _, alive = sys.argv[1].partition(":")
    size = 32 << 10
    records = [tfrecord_lite.encode_example({"image": bytes([i % 251]) * size}) for i in range(1024)]
    spec = {"image": tfrecord_lite.FixedLenFeature([], bytes)}
    joined = b"".join(bytes([i % 251]) * size for i in range(1024))
    offsets = np.arange(0, 1025 * size, size, dtype=np.int64)
    make = {
        "control": lambda: [bytes([i % 251]) * size for i in range(1024)],
        "decoded": lambda: tfrecord_lite.parse_example(records, spec)["image"],
        "split": lambda: _native.spans.split_values(joined, offsets),
    }[kind]
    faults = []
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        batches = [make() for _ in range(int(alive or 1))]
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        assert all(len(b) == 1024 and b[5] == bytes([5]) * size for b in batches)
        while batches:
            batches.pop()
    print(sum(faults[-3:]))
""")


def test_batches_of_large_values_stay_in_the_process_by_themselves():
    if not GLIBC:
        pytest.skip("glibc's thresholds: other C libraries have none to show")
    pages = 3 * 1024 * (32 << 10) // 4096  # a batch a round, in the three rounds counted
    # Python's own bytes objects of a batch go back to the kernel as they are freed; the
    # core's objects for values of 4 KiB and more stay for the next batch.
    assert _faults_after_the_first_round("control", _VALUES) > pages // 2
    assert _faults_after_the_first_round("decoded", _VALUES) < pages // 100
    assert _faults_after_the_first_round("split", _VALUES) < pages // 100


def test_batches_freed_newest_first_stay_in_the_process():
    if not GLIBC:
        pytest.skip("glibc's trimming: other C libraries give memory back in their own ways")
    pages = 3 * 3 * 1024 * (32 << 10) // 4096  # three batches a round, in the three rounds counted
    # Freed newest first, two batches lie free at the top of the heap at once, more than glibc
    # keeps, and glibc gives them back; the core writes the next batches into the objects
    # it made for the last ones.
    assert _faults_after_the_first_round("control:3", _VALUES) > pages // 2
    assert _faults_after_the_first_round("decoded:3", _VALUES) < pages // 100
    assert _faults_after_the_first_round("split:3", _VALUES) < pages // 100


# Rounds of one batch of 4,096 small tabular records (W2's shape: ten floats, five ints, two
# short strings, a list of floats) parsed in the main thread and freed; prints the page
# faults of the last three rounds. The decoder's row tables and values, about a megabyte,
# are freed with each batch.
_TABLES = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import tfrecord_lite
    assert tfrecord_lite.implementation == "cython"
    rng = np.random.default_rng(7)
    n = 4096
    columns = {**{f"f{j}": rng.random(n, np.float32) for j in range(10)},
               **{f"i{j}": rng.integers(0, 1 << 40, n) for j in range(5)},
               "s0": [b"cat-%d" % (k % 8) for k in range(n)], "s1": [b"%07d" % k for k in range(n)],
               "list": rng.random((n, 16), np.float32)}
    records = list(tfrecord_lite.encode_examples(columns))
    spec = {k: tfrecord_lite.FixedLenFeature(np.shape(v)[1:], bytes if k[0] == "s" else np.asarray(v).dtype)
            for k, v in columns.items()}
    faults = []
    for _ in range(6):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        batch = tfrecord_lite.parse_example(records, spec)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        assert batch["i3"].tolist() == columns["i3"].tolist() and batch["s1"][9] == b"0000009"
        del batch
    print(sum(faults[-3:]))
""")


def test_batches_of_small_records_stay_in_the_process():
    if not GLIBC:
        pytest.skip("glibc's thresholds: other C libraries have none to show")
    # The decoder shows glibc the size of a batch's records, and its tables stay in the heap
    # for the next batch: 319 page faults a batch of 4,096 W2 records before, about the
    # pages they take.
    assert _faults_after_the_first_round("tables", _TABLES) < 3 * 20
