"""Pure-Python twin of csrc/_spans.pyx: a gathered batch's index arrays, bytes values back
to back, and the bytes objects of spans.

Same names, signatures and results as the compiled module. Used when the compiled core is
unavailable or TFRECORD_LITE_PURE_PYTHON=1.
"""

from __future__ import annotations

import numpy as np

from ._framing_py import OVERHEAD_BYTES as _OVERHEAD
from .errors import ArgumentTypeError, InvalidArgumentError


# -- index arrays over blocks ---------------------------------------------------------------

def _columns(name, columns, add):
    """The columns as lists of int64 arrays, the offsets checked (see interleave)."""
    columns = [[np.asarray(a, np.int64) for a in column] for column in columns]
    m = len(columns[0]) if columns else 0
    for c, column in enumerate(columns):
        if len(column) != m:
            raise InvalidArgumentError(f"{name}: column {c} has {len(column)} parts, column 0 {m}")
    if add is not None and len(add) != m:
        raise InvalidArgumentError(f"{name}: {len(add)} offsets for {m} parts")
    if add is not None and columns:
        columns[0] = [a + np.int64(k) for a, k in zip(columns[0], np.asarray(add, np.int64))]
    return columns, m


def interleave(columns, block, rounds, extra, add=None):
    columns, m = _columns("interleave", columns, add)
    if block < 1 or rounds < 0 or not 0 <= extra <= m:
        raise InvalidArgumentError(f"interleave: block {block}, rounds {rounds} and extra {extra} "
                                   f"do not describe an interleave of {m} parts")
    span = rounds * block
    for column in columns:
        for j, part in enumerate(column):
            need = span + (block if j < extra else 0)
            if len(part) < need:
                raise InvalidArgumentError(f"interleave: part {j} has {len(part)} entries, not {need}")
    return tuple(_interleave(column, block, rounds, extra) for column in columns)


def _interleave(arrays, block, rounds, extra):
    m, span = len(arrays), rounds * block
    out = np.empty(m * span + extra * block, np.int64)
    # The rounds as a (rounds, part, block) grid, filled along the part axis, then the extra blocks.
    grid = out[:m * span].reshape(rounds, m, block)
    for j, part in enumerate(arrays):
        grid[:, j, :] = part[:span].reshape(rounds, block)
    for j, part in enumerate(arrays[:extra]):
        out[m * span + j * block:m * span + (j + 1) * block] = part[span:span + block]
    return out


def concat(columns, add=None):
    columns, m = _columns("concat", columns, add)
    for c, column in enumerate(columns[1:], 1):
        for j, (first, part) in enumerate(zip(columns[0], column)):
            if len(part) != len(first):
                raise InvalidArgumentError(f"concat: part {j} has {len(first)} entries in column 0, "
                                           f"{len(part)} in column {c}")
    return tuple(np.concatenate(column) if m else np.empty(0, np.int64) for column in columns)


def run_starts(which, most=None):
    if most is not None and most < 0:
        raise InvalidArgumentError(f"run_starts: most must be 0 or more, not {most}")
    which = np.asarray(which, np.int64)
    cuts = np.flatnonzero(which[1:] != which[:-1]) + 1
    return None if most is not None and len(cuts) > most else cuts


def run_steps(index, bounds):
    index, bounds = np.asarray(index, np.int64), np.asarray(bounds, np.int64)
    if len(bounds) < 1:
        raise InvalidArgumentError("run_steps: bounds needs at least one entry")
    out = np.zeros(len(bounds) - 1, np.int64)
    for k, (a, z) in enumerate(zip(bounds.tolist(), bounds[1:].tolist())):
        if not 0 <= a < z <= len(index):
            raise InvalidArgumentError(f"run_steps: run {k} is [{a}, {z}) of {len(index)} entries")
        steps = np.diff(index[a:z])
        step = int(steps[0]) if len(steps) else 1
        if step > 0 and (steps == step).all():
            out[k] = step
    return out


def join_runs(starts, lengths, firsts, steps):
    m = len(starts)
    if not len(lengths) == len(firsts) == len(steps) == m:
        raise InvalidArgumentError(f"join_runs: {m} starts, {len(lengths)} lengths, {len(firsts)} firsts "
                                   f"and {len(steps)} steps")
    for j, (s, l) in enumerate(zip(starts, lengths)):
        if len(s) != len(l):
            raise InvalidArgumentError(f"join_runs: run {j} has {len(s)} starts and {len(l)} lengths")
    sizes = [len(s) for s in starts]
    index = [first + step * np.arange(n, dtype=np.int64) for first, step, n in zip(firsts, steps, sizes)]
    return (np.repeat(np.arange(m, dtype=np.int64), sizes),
            *(np.concatenate(runs, dtype=np.int64) if m else np.empty(0, np.int64)
              for runs in (starts, lengths, index)))


def frames_tile(starts, lengths):
    starts, lengths = np.asarray(starts, np.int64), np.asarray(lengths, np.int64)
    if len(starts) != len(lengths):
        raise InvalidArgumentError(f"frames_tile: {len(starts)} starts and {len(lengths)} lengths")
    return bool((starts[1:] == starts[:-1] + lengths[:-1] + _OVERHEAD).all())


# -- bytes values back to back ---------------------------------------------------------------

def value_lengths(values):
    if any(type(v) is not bytes for v in values):
        return None
    return np.fromiter(map(len, values), np.int64, len(values))


def bytes_list(values):
    values = list(values)
    return values if all(type(v) is bytes for v in values) else None


def copy_values(values, out, at=0):
    for i, v in enumerate(values):
        if type(v) is not bytes:
            raise ArgumentTypeError(f"copy_values: value {i} is {type(v).__name__}, not bytes")
    view = memoryview(out).cast("B")
    if view.readonly:
        raise BufferError("Object is not writable.")
    total = sum(map(len, values))
    if at < 0 or total > len(view) - at:
        raise InvalidArgumentError(f"copy_values: {total} bytes do not fit at {at} of a {len(view)}-byte buffer")
    for v in values:
        view[at:at + len(v)] = v
        at += len(v)
    return at


def split_records(buffers, which, starts, lengths):
    n = len(which)
    if len(starts) != n or len(lengths) != n:
        raise InvalidArgumentError("split_records: which, starts and lengths must have the same length")
    views = [memoryview(b).cast("B") for b in buffers]
    records = list(zip(which.tolist(), starts.tolist(), lengths.tolist()))
    for j, (b, s, m) in enumerate(records):
        if not 0 <= b < len(views) or s < 0 or m < 0 or s > len(views[b]) - m:
            raise InvalidArgumentError(f"split_records: record {j} ({b}, {s}, {m}) lies outside its buffer")
    out = np.empty(n, dtype=object)
    out[:] = [bytes(views[b][s:s + m]) for b, s, m in records]
    return out


def split_values(buf, offsets):
    offsets = np.asarray(offsets).tolist()
    n = len(offsets) - 1
    if n < 0:
        raise InvalidArgumentError("split_values: offsets must hold at least one position")
    view = memoryview(buf).cast("B")
    if offsets[0] < 0 or offsets[n] > len(view):
        raise InvalidArgumentError(f"split_values: offsets run from {offsets[0]} to {offsets[n]}, "
                                   f"outside a {len(view)}-byte buffer")
    for i in range(n):
        if offsets[i] > offsets[i + 1]:
            raise InvalidArgumentError(f"split_values: offset {i + 1} is before offset {i}")
    out = np.empty(n, dtype=object)
    out[:] = [bytes(view[a:z]) for a, z in zip(offsets, offsets[1:])]
    return out
