"""RaggedFeature partitions (tf.io.RaggedFeature.RowSplits, RowLengths, ...): each record's
(or, in a SequenceExample, each step's) values split into rows by other int64 features of
the same record, vectorised over the batch. Every partition is checked against the values
it splits, per record: TensorFlow checks only with validate=True, and then only over the
whole batch."""

from __future__ import annotations

import numpy as np

from .errors import FeatureSpecError
from .example import RaggedValue, _splits
from .features import RowLengths, RowLimits, RowSplits, RowStarts, UniformRowLength

__all__ = ["partitioned"]

_MAX_ROW_ID = 2**31 - 1  # a ValueRowIds id makes that many rows: bounded, as a length field is
# The empty rows a record's (or step's) ValueRowIds may make beyond a row per value: an id
# costs the record a few bytes whatever its size, so without a bound one short record could
# ask for 2**31 rows (16 GiB of row splits); with it, at most 512 KiB of them per record.
_MAX_EMPTY_ROWS = 2**16
_EMPTY_ROWS_HINT = (f"a record's (or step's) ValueRowIds may make at most {_MAX_EMPTY_ROWS} rows more than it has "
                    "values; store data with that many empty rows with RowLengths or RowSplits, whose rows the "
                    "record holds")


def _sums(values, counts):
    """The sum of each row's values (rows of counts values)."""
    total = _splits(values)
    ends = _splits(counts)
    return total[ends[1:]] - total[ends[:-1]]


class _Rows:
    """One partition feature's values, row by row (a row: a record, or a step)."""

    def __init__(self, values, counts, fail):
        self.values, self.counts, self.fail = values, counts, fail
        self.starts = _splits(counts)[:-1]
        self.some = counts > 0
        self.first = np.zeros(len(values), dtype=bool)  # the first value of its row
        self.first[self.starts[self.some]] = True

    def check(self, bad, detail, hint=None):
        """fail at the first row where bad (per row), detail(row) saying what is wrong."""
        rows = np.flatnonzero(bad)
        if rows.size:
            self.fail(detail(int(rows[0])), int(rows[0]), hint)

    def first_values(self):
        """Each row's first value (0 for a row of none)."""
        out = np.zeros(len(self.counts), dtype=np.int64)
        out[self.some] = self.values[self.starts[self.some]]
        return out

    def last_values(self):
        out = np.zeros(len(self.counts), dtype=np.int64)
        out[self.some] = self.values[self.starts[self.some] + self.counts[self.some] - 1]
        return out

    def previous(self):
        """Each value's predecessor in its row (0 for a row's first)."""
        prev = np.empty_like(self.values)
        prev[1:] = self.values[:-1]
        prev[self.first] = 0
        return prev


def _lengths(partition, rows, items):
    """The lengths of the sub-rows that partition makes of each row's items, and how many
    sub-rows each row gets."""
    values, counts = rows.values, rows.counts
    if isinstance(partition, RowLengths):
        lengths, made = values, counts
    elif isinstance(partition, RowSplits):
        first = rows.first_values()
        rows.check(rows.some & (first != 0), lambda r: f"row splits start at {first[r]}, not 0")
        lengths = np.diff(values)[~rows.first[1:]] if len(values) else values
        made = np.maximum(counts - 1, 0)
    elif isinstance(partition, RowLimits):
        lengths, made = values - rows.previous(), counts
    elif isinstance(partition, RowStarts):
        first = rows.first_values()
        rows.check(rows.some & (first != 0), lambda r: f"row starts start at {first[r]}, not 0")
        following = np.empty_like(values)
        following[:-1] = values[1:]
        last = rows.starts[rows.some] + counts[rows.some] - 1
        following[last] = items[rows.some]
        lengths, made = following - values, counts
    else:  # ValueRowIds: each value's row
        rows.check(counts != items, lambda r: f"{counts[r]} row ids for {items[r]} values")
        rows.check(_sums((values < 0) | (values > _MAX_ROW_ID), counts) > 0,  # then no difference wraps around
                   lambda r: f"row ids must lie in 0..{_MAX_ROW_ID}")
        rows.check(_sums(values < rows.previous(), counts) > 0, lambda r: "row ids are not in ascending order")
        made = np.where(rows.some, rows.last_values() + 1, 0)
        rows.check(made > items + _MAX_EMPTY_ROWS,  # before anything of made's size is allocated
                   lambda r: f"row id {made[r] - 1} would make {made[r]} rows of {items[r]} values", _EMPTY_ROWS_HINT)
        ids = values + np.repeat(_splits(made)[:-1], counts)
        return np.bincount(ids, minlength=int(made.sum())).astype(np.int64), made
    # Each length within 0..the row's item count: then no difference above wrapped around.
    owner = np.repeat(items, made)
    bad = (lengths < 0) | (lengths > owner)
    row_of = np.repeat(np.arange(len(made)), made)
    rows.check(np.bincount(row_of[bad], minlength=len(made)) > 0,
               lambda r: "row lengths are negative or larger than the row's values")
    sums = _sums(lengths, made)
    rows.check(sums != items, lambda r: f"the rows take {sums[r]} values (or inner rows), but there are {items[r]}")
    return lengths, made


def partitioned(name, spec, values, counts, partition_rows, steps=None, record_of=int):
    """The RaggedValue of a RaggedFeature with partitions: values and counts (per row) of
    its value feature, partition_rows(key) the (values, counts) of a partition feature, one
    row per record, or per step when steps (per record) are given: one more ragged level.
    record_of(row): the record a row belongs to, for errors."""
    def fail(detail, row, partition, hint=None):
        arg = partition.length if isinstance(partition, UniformRowLength) else partition.key
        raise FeatureSpecError(f"feature {name!r}: {type(partition).__name__}({arg!r}): {detail}",
                               index=record_of(row), hint=hint)

    dtype = spec.row_splits_dtype
    outer = _splits(counts)
    for partition in reversed(spec.partitions):
        items = np.diff(outer)
        if isinstance(partition, UniformRowLength):
            length = partition.length
            bad = np.flatnonzero(items % length)
            if bad.size:
                fail(f"{items[bad[0]]} values are not rows of {length}", int(bad[0]), partition)
            n = len(values) // length
            if isinstance(values, RaggedValue):
                values = RaggedValue(values, np.arange(0, (n + 1) * length, length, dtype=dtype))
            else:
                values = values.reshape((n, length) + values.shape[1:])
            outer = outer // length
            continue
        part_values, part_counts = partition_rows(partition.key)
        rows = _Rows(part_values, part_counts, lambda detail, row, hint, p=partition: fail(detail, row, p, hint))
        lengths, made = _lengths(partition, rows, items)
        values = RaggedValue(values, _splits(lengths).astype(dtype))
        outer = _splits(made)
    out = RaggedValue(values, outer.astype(dtype))
    return out if steps is None else RaggedValue(out, _splits(steps).astype(dtype))
