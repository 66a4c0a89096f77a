"""BytesColumn: bytes values held as one contiguous uint8 buffer plus int64 offsets.

This is the opt-in bytes output of ``parse_example(..., bytes_output="column")``: the core
copies every value of a feature back to back and records where each starts, so no Python
object is made per value, and the two buffers go to Arrow (``large_binary``) without a copy.
The column has a logical numpy-like shape; it indexes, slices, iterates and converts to a
list or an object array like the object array ``parse_example`` returns by default.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from . import _native
from .errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["BytesColumn"]

_LONG = 1024  # take() copies values from this length one by one
_RUN_BYTES = 1 << 20  # and shorter ones about this many bytes at a time


class BytesColumn:
    """``prod(shape)`` bytes values in row-major order: value ``i`` is
    ``values[offsets[i]:offsets[i + 1]]``.

    values: 1-D uint8 array holding the values back to back.
    offsets: 1-D int64 array of ``prod(shape) + 1`` non-decreasing positions in ``values``
        (the first need not be 0: a slice shares its parent's buffers).
    shape: the logical shape, ``(n,)`` by default.

    ``col[i]`` is ``bytes`` for a 1-D column and a sub-column otherwise; slices, integer
    arrays and boolean masks select along the first axis; ``to_list()`` / ``to_numpy()``
    give nested lists / an object array of ``bytes``; ``np.asarray(col)`` is the object
    array. ``col.equals(other)`` compares shape and values with another column or anything
    array-like of bytes.
    """

    __slots__ = ("values", "offsets", "shape")

    def __init__(self, values: Any, offsets: Any, shape: tuple[int, ...] | None = None) -> None:
        values = np.asarray(values)
        offsets = np.asarray(offsets)
        if values.ndim != 1 or values.dtype != np.uint8:
            raise InvalidArgumentError(f"values must be a 1-D uint8 array, not {values.dtype} with shape "
                                       f"{values.shape} (np.frombuffer(data, np.uint8) views bytes as one)")
        if offsets.ndim != 1 or len(offsets) < 1 or offsets.dtype.kind not in "iu":
            raise InvalidArgumentError(f"offsets must be a non-empty 1-D array of integers (one more than the "
                                       f"values), not {offsets.dtype} with shape {offsets.shape}")
        offsets = offsets.astype(np.int64, copy=False)  # a list is int32 on some platforms
        n = len(offsets) - 1
        shape = (n,) if shape is None else tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"shape {shape} has a negative dimension")
        if prod(shape) != n:
            raise InvalidArgumentError(f"shape {shape} holds {prod(shape)} values, the offsets mark {n}")
        # Checked once here: indexing slices values by them, which would clip bad ones silently.
        down = np.flatnonzero(offsets[1:] < offsets[:-1])
        if down.size:
            i = int(down[0])
            raise InvalidArgumentError(f"offsets must not decrease: offset {i + 1} ({offsets[i + 1]}) is below "
                                       f"offset {i} ({offsets[i]})")
        if offsets[0] < 0 or offsets[-1] > len(values):
            raise InvalidArgumentError(f"offsets {offsets[0]}..{offsets[-1]} point outside the {len(values)} "
                                       "bytes of values")
        self.values, self.offsets, self.shape = values, offsets, shape

    @classmethod
    def _of(cls, values, offsets, shape=None) -> BytesColumn:
        """A column over buffers the core or another column made, without the checks (they hold)."""
        col = object.__new__(cls)
        col.values, col.offsets, col.shape = values, offsets, (len(offsets) - 1,) if shape is None else shape
        return col

    @classmethod
    def from_list(cls, items, shape=None) -> BytesColumn:
        """A column of the given bytes values (a flat iterable of bytes-likes, or str as UTF-8;
        ``shape`` defaults to its length)."""
        items = [_bytes(v, i) for i, v in enumerate(items)]
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(_native.spans.value_lengths(items), out=offsets[1:])
        values = np.empty(int(offsets[-1]), dtype=np.uint8)
        _native.spans.copy_values(items, values)
        return cls(values, offsets, shape)

    # -- numpy-like surface ----------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return len(self.offsets) - 1

    @property
    def dtype(self) -> np.dtype:
        """object, the dtype of the array this column stands for."""
        return np.dtype(object)

    @property
    def nbytes(self) -> int:
        """Bytes of value data in this column (not counting the offsets)."""
        return int(self.offsets[-1] - self.offsets[0])

    def lengths(self) -> np.ndarray:
        """The byte length of each value, with the column's shape."""
        return np.diff(self.offsets).reshape(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentTypeError("len() of a 0-d BytesColumn: col[()] is its value")
        return self.shape[0]

    def reshape(self, *shape) -> BytesColumn:
        """The same values (no copy) with another shape; one dimension may be -1."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return BytesColumn._of(self.values, self.offsets, np.empty(self.shape, dtype=np.bool_).reshape(shape).shape)

    def _inner(self) -> int:
        return prod(self.shape[1:])

    def _value(self, i: int) -> bytes:
        return self.values[self.offsets[i]:self.offsets[i + 1]].tobytes()

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and self.shape:  # True: a mask
            i = int(key)
            if not -self.shape[0] <= i < self.shape[0]:
                raise IndexError(f"index {i} is out of bounds for a BytesColumn of length {self.shape[0]}")
            i %= self.shape[0]
            if self.ndim == 1:
                return self._value(i)
            inner = self._inner()
            return BytesColumn._of(self.values, self.offsets[i * inner:(i + 1) * inner + 1], self.shape[1:])
        if isinstance(key, slice) and self.shape:
            start, stop, step = key.indices(self.shape[0])
            if step == 1:
                stop = max(start, stop)
                inner = self._inner()
                return BytesColumn._of(self.values, self.offsets[start * inner:stop * inner + 1],
                                       (stop - start,) + self.shape[1:])
        # Anything else numpy can index: select value positions, then gather them.
        picked = np.arange(self.size, dtype=np.int64).reshape(self.shape)[key]
        if np.ndim(picked) == 0:
            return self._value(int(picked))
        return self.take(picked.reshape(-1)).reshape(picked.shape)

    def take(self, indices) -> BytesColumn:
        """A new 1-D column of the values at the given flat positions (copied)."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        starts = self.offsets[:-1][indices]
        lengths = self.offsets[1:][indices] - starts
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        long = lengths >= _LONG
        if long.any():  # one slice each: an int64 index per byte would take 8 times their size
            to, source, size = offsets.tolist(), starts.tolist(), lengths.tolist()
            for i in np.flatnonzero(long).tolist():
                out[to[i]:to[i] + size[i]] = self.values[source[i]:source[i] + size[i]]
        # Shorter ones through an index per byte (vectorised), about _RUN_BYTES of them at a time.
        short = np.flatnonzero(~long)
        ends = np.cumsum(lengths[short])
        lo = 0
        while lo < len(short):
            hi = max(lo + 1, int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + _RUN_BYTES, "right")))
            run = short[lo:hi]
            n, base = lengths[run], offsets[run]
            if run[-1] - run[0] == hi - lo - 1:  # back to back in out (no long value between)
                first = int(base[0])
                at = np.arange(first, first + int(n.sum()), dtype=np.int64)
                out[first:first + len(at)] = self.values[np.repeat(starts[run] - base, n) + at]
            else:
                at = np.arange(int(n.sum()), dtype=np.int64) + np.repeat(base - (np.cumsum(n) - n), n)
                out[at] = self.values[np.repeat(starts[run] - base, n) + at]
            lo = hi
        return BytesColumn._of(out, offsets)

    def __iter__(self):
        if not self.shape:
            raise ArgumentTypeError("iteration over a 0-d BytesColumn: col[()] is its value")
        for i in range(self.shape[0]):
            yield self[i]

    def to_list(self):
        """Nested lists of ``bytes`` with the column's shape (a 0-d column gives ``bytes``)."""
        return self.to_numpy().tolist()

    tolist = to_list  # the numpy spelling, so code written for object arrays keeps working

    def to_numpy(self) -> np.ndarray:
        """An object array of ``bytes`` with the column's shape."""
        return _native.spans.split_values(np.ascontiguousarray(self.values), self.offsets).reshape(self.shape)

    def __array__(self, dtype=None, copy=None):
        return as_array(self, dtype, copy)

    def equals(self, other) -> bool:
        """Same shape and the same values, against a BytesColumn or an array-like of bytes."""
        if isinstance(other, BytesColumn):
            if self.shape != other.shape or not np.array_equal(np.diff(self.offsets), np.diff(other.offsets)):
                return False
            return bool(np.array_equal(self.values[self.offsets[0]:self.offsets[-1]],
                                       other.values[other.offsets[0]:other.offsets[-1]]))
        other = np.asarray(other, dtype=object)
        return other.shape == self.shape and all(a == b for a, b in zip(self.to_numpy().flat, other.flat))

    def __eq__(self, other):
        if isinstance(other, BytesColumn):
            return self.equals(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable buffers: not hashable

    def _spanned(self):
        """(values, offsets) of only the bytes this column spans, offsets from 0: what a copy
        of it needs (a slice shares its whole batch's buffer, or a dataset's whole task's)."""
        first, last = int(self.offsets[0]), int(self.offsets[-1])
        return self.values[first:last], self.offsets - first

    def __reduce__(self):
        return BytesColumn, (*self._spanned(), self.shape)

    def __repr__(self):
        items = self.to_list() if self.size <= 8 else f"{self.size} values, {self.nbytes} bytes"
        return f"BytesColumn({items!r}, shape={self.shape})"


def as_array(items, dtype, copy):
    """``__array__`` of a BytesColumn or RecordBatch: its to_numpy(), a new array, which
    numpy 2's ``copy=False`` (no copy, or an error) refuses, as it does for a list."""
    if copy is False:
        raise InvalidArgumentError(f"a {type(items).__name__} converts to a new object array: np.asarray(x) "
                                   "allows that, np.asarray(x, copy=False) does not")
    out = items.to_numpy()
    return out if dtype is None else out.astype(dtype)


def _bytes(value, i) -> bytes:
    """value i as bytes: bytes(3) would be three zero bytes."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, (np.number, np.bool_)):  # numpy scalars are buffers of their machine bytes
        try:
            with memoryview(value) as view:
                return view.tobytes()
        except TypeError:
            pass
    raise ArgumentTypeError(f"value {i} is {type(value).__name__}, not bytes, a bytes-like or str")


def concat(parts, default_shape=(0,)) -> BytesColumn:
    """1-D parts joined into one 1-D column (values copied once)."""
    parts = list(parts)
    if not parts:
        return BytesColumn(np.empty(0, np.uint8), np.zeros(1, np.int64), default_shape)
    values = np.concatenate([p.values[p.offsets[0]:p.offsets[-1]] for p in parts])
    lengths = np.concatenate([np.diff(p.offsets) for p in parts])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return BytesColumn(values, offsets)


def scatter(shape, positions, values: BytesColumn, default) -> BytesColumn:
    """A column of ``shape`` whose flat slots at ``positions`` hold ``values`` in order and
    every other slot the default: ``default`` (an array-like of bytes broadcast over the
    trailing dimensions, or None for b"") repeats along the flat layout."""
    total = prod(shape)
    fill = [b""] if default is None else [bytes(v) for v in np.asarray(default, dtype=object).reshape(-1)]
    pool = concat([values.reshape(-1), BytesColumn.from_list(fill)])
    source = np.arange(total, dtype=np.int64) % len(fill) + values.size
    source[np.asarray(positions, dtype=np.int64)] = np.arange(values.size, dtype=np.int64)
    return pool.take(source).reshape(shape)
