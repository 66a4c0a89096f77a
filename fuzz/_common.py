"""What every tfrecord_lite fuzz harness shares: running one call on both backends,
turning results and errors into comparable values, and the rule for a finding.

A finding is any exception outside the TFRecordError family (it propagates, and atheris
reports it with the input), two backends that disagree (an AssertionError naming both
outcomes), a sanitizer report, a hang or an allocation over the harness' limit.
"""

from __future__ import annotations

import io
import logging
import sys

import numpy as np

from tfrecord_lite import _native
from tfrecord_lite.errors import TFRecordError
from tfrecord_lite.example import RaggedValue
from tfrecord_lite.batch import RecordBatch

BACKENDS = _native.available()


def normalize(value):
    """A plain, comparable form of any result tfrecord_lite returns: arrays by dtype, shape
    and bytes (so NaN payloads compare exactly), containers element by element."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return ("object", value.shape, [normalize(v) for v in value.ravel().tolist()])
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, RaggedValue):
        return ("ragged", normalize(value.values), normalize(value.row_splits))
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, RecordBatch)):
        return [normalize(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def error_key(exc: TFRecordError):
    """What both backends must agree on about an error: its class and location. A parse
    error on a batch read from a buffer also names the record's frame (its origin); the
    same records as a list name only the position, so the position is what is compared."""
    if exc.batch_index is not None:
        return (type(exc).__name__, None, exc.batch_index)
    return (type(exc).__name__, exc.offset, exc.index)


def outcome(call):
    """("ok", normalized result) or ("error", class, offset, index, message) for call();
    anything outside the TFRecordError family propagates as a finding. The backends' messages
    agree too (the reading paths' need not: error_key leaves them out)."""
    try:
        return ("ok", normalize(call()))
    except TFRecordError as exc:
        return ("error",) + error_key(exc) + (exc.detail,)


def on_both(call):
    """outcome(call) under each available backend; they must be equal. Returns it."""
    results = {}
    for name in BACKENDS:
        with _native.use(name):
            results[name] = outcome(call)
    first = results[BACKENDS[0]]
    for name, other in results.items():
        assert other == first, f"backends disagree: {BACKENDS[0]} gave {first!r}, {name} gave {other!r}"
    return first


class Trickle(io.RawIOBase):
    """A stream that hands out at most `step` bytes per read, as sockets and pipes do."""

    def __init__(self, data: bytes, step: int):
        self.data, self.pos, self.step = data, 0, max(1, step)

    def readable(self):
        return True

    def readinto(self, view):
        n = min(len(view), self.step, len(self.data) - self.pos)
        view[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def fuzz(test_one_input):
    """Run a harness under libFuzzer with the command line's flags."""
    import atheris

    # on_corrupt="skip" logs each dropped record; millions of runs would drown the output.
    # Only here, so that replaying a corpus in the test suite leaves logging alone.
    logging.getLogger("tfrecord_lite").disabled = True
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
