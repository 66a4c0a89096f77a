"""Test data helpers: small TFRecord files with records that name their origin, the TensorFlow
interleave model, and what a dataset pass reads (fresh buffers, records)."""

import contextlib
import os
import threading

from tfrecord_lite import TFRecordWriter


def record(f, j, size=0):
    return f"{f}:{j}:".encode() + b"x" * size


def write_files(directory, counts, size=0, compression=None, name="part-{:05d}.tfrecord", make=None):
    """One file per entry of counts; record j of file f is make(f, j), by default
    record(f, j, size)."""
    make = make or (lambda f, j: record(f, j, size))
    paths = []
    for f, n in enumerate(counts):
        path = os.path.join(str(directory), name.format(f))
        with TFRecordWriter(path, compression=compression) as w:
            w.write_many(make(f, j) for j in range(n))
        paths.append(path)
    return paths


def interleave(streams, cycle, block):
    """Reference model of TensorFlow's deterministic interleave over lists of records."""
    todo, slots, out = list(streams), [None] * cycle, []
    i = taken = num_open = 0
    while todo or num_open:
        if slots[i] is None:
            if todo:
                slots[i] = iter(todo.pop(0))
                num_open += 1
                continue
            i, taken = (i + 1) % cycle, 0
            continue
        x = next(slots[i], None)
        if x is None:
            slots[i] = None
            num_open -= 1
            i, taken = (i + 1) % cycle, 0
            continue
        out.append(x)
        taken += 1
        if taken == block:
            i, taken = (i + 1) % cycle, 0
    return out


def core_calls(monkeypatch, name):
    """Log the last argument (a size) of each call of the framing core's function name."""
    from tfrecord_lite import _native

    made = []
    call = getattr(_native.framing, name)

    def logged(*args, **options):
        made.append(args[-1])
        return call(*args, **options)

    monkeypatch.setattr(_native.framing, name, logged)
    return made


def fresh_buffers(monkeypatch):
    """Count the read buffers made anew (the reader takes them from its pool)."""
    return core_calls(monkeypatch, "new_buffer")


def records_of(ds):
    """Records a pass yields, each batch dropped before the next is asked for (the one that
    ends the pass included)."""
    n = 0
    for batch in ds:
        n += len(batch)
        del batch
    return n


class Overlap:
    """A slow store for tests of concurrency: each call of ``with overlap():`` waits until
    ``want`` calls are inside at once (or half a second passes); ``peak`` is the most that
    were."""

    def __init__(self, want: int = 4):
        self.want, self.now, self.peak = want, 0, 0
        self._gate = threading.Condition()

    @contextlib.contextmanager
    def __call__(self):
        with self._gate:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self._gate.notify_all()
            self._gate.wait_for(lambda: self.peak >= self.want, timeout=0.5)
        try:
            yield
        finally:
            with self._gate:
                self.now -= 1
