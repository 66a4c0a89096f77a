"""tf.train.Example / SequenceExample: parsing against feature specs and spec-less decoding,
with the semantics of ``tf.io.parse_example`` and friends (encoding: ``encoding``).

The wire work happens in ``_native.example`` (compiled csrc/_example.pyx or its twin), which
turns a batch into columns: per key, one row per Feature with its kind, value count and
values. This module turns columns into what TF returns, with numpy vectorised over the
batch; every spec type goes through the same column checks (``_Column``).
"""

from __future__ import annotations

from collections import Counter, namedtuple
from contextlib import contextmanager
from math import prod
from typing import Any, Literal, overload

import numpy as np

from . import _native
from ._contract import DecodedColumn, Kind
from ._typing import Buffer, Features, Records
from .bytes_column import BytesColumn, scatter
from .errors import ArgumentTypeError, ExampleDecodeError, FeatureSpecError, TFRecordError
from .features import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    RawTensorFeature,
    SparseFeature,
    VarLenFeature,
    check_spec_mapping,
    name_utf8,
)
from .batch import RecordBatch, parse_in_order
from ._gather import Gathered

__all__ = [
    "BytesColumn",
    "SparseTensorValue",
    "RaggedValue",
    "parse_example",
    "parse_single_example",
    "parse_sequence_example",
    "parse_single_sequence_example",
    "decode_example",
    "decode_examples",
    "decode_sequence_example",
    "decode_sequence_examples",
]

ABSENT, BYTES, FLOAT, INT64, EMPTY, RAW, ROWS = (k.value for k in Kind)  # plain ints: hot comparisons
_KIND = {"string": BYTES, "float32": FLOAT, "int64": INT64}
_KIND_NAME = {BYTES: "string", FLOAT: "float32", INT64: "int64"}
_ZERO = {"float32": np.float32(0), "int64": np.int64(0), "string": b""}
_EMPTY_CODE = {"float32": "np.zeros(0, np.float32)", "int64": "np.zeros(0, np.int64)",
               "string": "np.array([], dtype=object)"}

SparseTensorValue = namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])
SparseTensorValue.__doc__ = "The components of a tf.SparseTensor as numpy arrays."


class RaggedValue:
    """The components of a tf.RaggedTensor: ``values`` (an array, or a RaggedValue for more
    ragged levels) split into rows by ``row_splits``."""

    __slots__ = ("values", "row_splits")

    def __init__(self, values: Any, row_splits: Any) -> None:
        self.values = values
        self.row_splits = row_splits

    def __len__(self) -> int:
        return len(self.row_splits) - 1

    def pin_memory(self) -> RaggedValue:
        """Its tensors pinned (an ``as_tensors`` batch): DataLoader(pin_memory=True) calls this,
        and would otherwise pass the value on unpinned."""
        values, splits = self.values, self.row_splits
        return RaggedValue(values.pin_memory() if hasattr(values, "pin_memory") else values,
                           splits.pin_memory() if hasattr(splits, "pin_memory") else splits)

    def to_list(self) -> list:
        inner = self.values.to_list() if isinstance(self.values, (RaggedValue, BytesColumn)) else self.values.tolist()
        s = self.row_splits.tolist()
        return [inner[s[i]:s[i + 1]] for i in range(len(s) - 1)]

    def __repr__(self):
        return f"RaggedValue({self.to_list()!r})"


def _records(serialized):
    """A batch as the core takes it: a list, tuple, RecordBatch or a dataset's gathered
    records as is, any other iterable listed; one record, or no iterable, is refused."""
    if isinstance(serialized, (list, tuple, RecordBatch, Gathered)):
        return serialized
    # one record is iterable too (as ints or chars), which would blame its first byte
    if isinstance(serialized, (bytes, bytearray, memoryview, str)):
        raise ArgumentTypeError(f"a batch of records is expected, not one {type(serialized).__name__}: pass a "
                                "list of records, or use the parse_single_* function for one record")
    try:
        return list(serialized)
    except TypeError:
        raise ArgumentTypeError(f"a batch of records is expected (a list of bytes-likes), not "
                                f"{type(serialized).__name__}") from None


@contextmanager
def _fixed_width_hint(serialized):
    """A malformed record from a numpy bytes ("S") array: numpy drops a record's trailing
    NUL bytes (an int64 0 as its last value), so the error says where the bytes went."""
    try:
        yield
    except ExampleDecodeError as exc:
        if isinstance(serialized, np.ndarray) and serialized.dtype.kind == "S" and exc.hint is None:
            exc.hint = ("the records came in a numpy bytes array (dtype S), which drops each record's trailing "
                        "NUL bytes: pass a list of bytes or an object array")
            exc.args = (exc._render(),)
        raise


class _Column:
    """One key's rows from the core, checked against a spec dtype."""

    def __init__(self, name, raw, batch):
        self.name = name
        self.steps, self.kinds, self.counts, self.floats, self.ints, self.bytes = raw[:6]  # uniform: see _build
        self.batch = batch

    def record_of(self, row: int) -> int:
        if self.steps is None:
            return int(row)
        return int(np.searchsorted(np.cumsum(np.maximum(self.steps, 0)), row, side="right"))

    def fail(self, detail, row=None, record=None, hint=None):
        if record is None and row is not None:
            record = self.record_of(row)
        raise FeatureSpecError(f"feature {self.name!r}: {detail}", index=record, hint=hint)

    def typed(self, dtype):
        """Values of the spec's dtype, counts per row, and which rows have that kind; other
        kinds are an error. A row without a kind (absent, or an empty Feature) has no values."""
        want = _KIND[dtype]
        present = self.kinds == want
        if not present.all():
            bad = np.flatnonzero(~present & (self.kinds != ABSENT) & (self.kinds != EMPTY))
            if bad.size:
                row = bad[0]
                self.fail(f"data type {_KIND_NAME[int(self.kinds[row])]} but the spec expects {dtype}", row)
        values = self.floats if want == FLOAT else self.ints if want == INT64 else self.bytes
        return values, self.counts, present

    def required(self, present, what="is required but could not be found", hint=None):
        missing = np.flatnonzero(~present)
        if missing.size:
            self.fail(what, record=int(missing[0]), hint=hint)


def _splits(counts, dtype=np.int64):
    out = np.zeros(len(counts) + 1, dtype=dtype)
    np.cumsum(counts, out=out[1:])
    return out


def _within(counts):
    """0..count-1 for each row, concatenated."""
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(_splits(counts)[:-1], counts)


def _fill(shape, dtype, default):
    out = np.empty(shape, dtype=np.dtype(object) if dtype == "string" else dtype)
    out[...] = _ZERO[dtype] if default is None else default
    return out


# -- spec -> output, for columns with one row per record -----------------------------------

def _dense(col, spec):
    values, counts, present = col.typed(spec.dtype)
    size = prod(spec.shape)
    every = present.all()
    if (counts != size).any():
        bad = np.flatnonzero(present & (counts != size))
        if bad.size:
            col.fail(f"{counts[bad[0]]} values but the shape {list(spec.shape)} needs {size}", bad[0])
    if spec.default_value is None and not every:
        col.required(present, f"(data type: {spec.dtype}) is required but could not be found",
                     None if size else f"as in TensorFlow, a shape of no values ({list(spec.shape)}) takes no "
                     f"default_value: records must hold an empty {spec.dtype} list (encode_example writes "
                     f"{_EMPTY_CODE[spec.dtype]} as one; a plain [] is a Feature of no kind, which counts as "
                     "missing); VarLenFeature or RaggedFeature allow the feature to be missing")
    shape = (col.batch,) + spec.shape
    if every:
        return values.reshape(shape)
    if isinstance(values, BytesColumn):
        return scatter(shape, np.flatnonzero(np.repeat(present, size)), values, spec.default_value)
    out = _fill(shape, spec.dtype, spec.default_value)
    # An explicit row count: with a shape of 0 values, -1 cannot be inferred.
    out[present] = values.reshape((int(present.sum()),) + spec.shape)
    return out


def _raw(col, spec):
    data, lengths = col.bytes
    kinds = col.kinds
    bad = np.flatnonzero((kinds != BYTES) & (kinds != ABSENT) & (kinds != EMPTY))
    if bad.size:
        col.fail(f"data type {_KIND_NAME[int(kinds[bad[0]])]} but a RawTensorFeature needs one bytes value", bad[0])
    present = kinds == BYTES
    bad = np.flatnonzero(present & (col.counts != 1))
    if bad.size:
        col.fail(f"{col.counts[bad[0]]} bytes values but a RawTensorFeature needs exactly one", bad[0])
    bad = np.flatnonzero(present & (lengths != spec.nbytes))
    if bad.size:
        col.fail(f"raw value of {lengths[bad[0]]} bytes but shape {list(spec.shape)} of {spec.dtype} "
                 f"needs {spec.nbytes}", bad[0])
    if spec.default_value is None:
        col.required(present)
    out = data.view(spec.dtype).reshape((col.batch,) + spec.shape)
    if not present.all():
        out[~present] = spec.default_value
    return out


def native_order(values):
    """values in the machine's byte order, copied where they are not: a RawTensorFeature's
    arrays keep the byte order they were written in ('>f4'), which torch, JAX and Arrow
    refuse."""
    if isinstance(values, np.ndarray) and not values.dtype.isnative:
        return values.astype(values.dtype.newbyteorder("="))
    return values


def _varlen(col, spec):
    values, counts, _ = col.typed(spec.dtype)
    indices = np.stack([np.repeat(np.arange(col.batch, dtype=np.int64), counts), _within(counts)], axis=1)
    width = int(counts.max()) if counts.size else 0
    return SparseTensorValue(indices, values, np.array([col.batch, width], dtype=np.int64))


def _ragged(col, spec):
    values, counts, _ = col.typed(spec.dtype)
    return RaggedValue(values, _splits(counts, spec.row_splits_dtype))


def _partitioned(cols, name, spec, steps=False):
    """A RaggedFeature with partitions (cols: the columns by key, one row per record, or
    per step when steps)."""
    from ._ragged import partitioned  # which needs this module's RaggedValue

    col = cols[spec.value_key or name]
    values, counts, _ = col.typed(spec.dtype)
    step_counts = np.maximum(col.steps, 0) if steps else None

    def partition_rows(key):
        part = cols[key]
        if steps:
            bad = np.flatnonzero(np.maximum(part.steps, 0) != step_counts)
            if bad.size:
                raise FeatureSpecError(f"feature {name!r}: the partition's feature list {key!r} has "
                                       f"{max(part.steps[bad[0]], 0)} steps but the values' list {col.name!r} has "
                                       f"{step_counts[bad[0]]}", index=int(bad[0]))
        part_values, part_counts, _ = part.typed("int64")
        return part_values, part_counts
    return partitioned(name, spec, values, counts, partition_rows, step_counts, col.record_of)


def _items(col, spec):
    """A FixedLenSequenceFeature's (values, counts, items per row, values per item): every
    row's values must be whole items."""
    values, counts, _ = col.typed(spec.dtype)
    stride = prod(spec.shape)
    if stride == 0:
        col.fail("a FixedLenSequenceFeature needs a shape with at least one value")
    bad = np.flatnonzero(counts % stride)
    if bad.size:
        col.fail(f"{counts[bad[0]]} values is not a multiple of the item size {stride}", bad[0])
    return values, counts, counts // stride, stride


def _item_sequence(col, spec):
    """FixedLenSequenceFeature in parse_example: values cut into shape-sized items, padded."""
    values, counts, items, stride = _items(col, spec)
    longest = int(items.max()) if items.size else 0
    shape = (col.batch, longest) + spec.shape
    positions = np.repeat(np.arange(col.batch) * (longest * stride), counts) + _within(counts)
    if isinstance(values, BytesColumn):
        return scatter(shape, positions, values, spec.default_value)
    out = _fill(shape, spec.dtype, spec.default_value)
    out.reshape(-1)[positions] = values
    return out


def _sparse(cols, spec, batch):
    value_col = cols[spec.value_key]
    values, counts, _ = value_col.typed(spec.dtype)
    index_parts = [np.repeat(np.arange(batch, dtype=np.int64), counts)]
    for key in spec.index_keys:
        index_values, index_counts, _ = cols[key].typed("int64")
        bad = np.flatnonzero(index_counts != counts)
        if bad.size:
            value_col.fail(f"{counts[bad[0]]} values but index feature {key!r} has {index_counts[bad[0]]}",
                           record=int(bad[0]))
        index_parts.append(index_values)
    indices = np.stack(index_parts, axis=1)
    if not spec.already_sorted and len(indices):
        order = np.lexsort(indices.T[::-1])
        indices, values = indices[order], values[order]
    return SparseTensorValue(indices, values, np.array((batch,) + spec.sizes, dtype=np.int64))


_ONE_ROW = {
    FixedLenFeature: _dense,
    VarLenFeature: _varlen,
    RaggedFeature: _ragged,
    FixedLenSequenceFeature: _item_sequence,
    RawTensorFeature: _raw,
}


def _keys_of(name, spec):
    """The wire keys a spec reads."""
    if isinstance(spec, SparseFeature):
        return [*spec.index_keys, spec.value_key]
    if isinstance(spec, RaggedFeature):
        return [spec.value_key or name, *spec.partition_keys]
    return [name]


def _check_specs(features, allowed, where):
    for name, spec in features.items():
        if not isinstance(spec, allowed):
            kind = type(spec).__name__
            if isinstance(spec, _EXAMPLE_SPECS):
                raise FeatureSpecError(f"feature {name!r}: {kind} is not supported in {where}")
            if kind in {t.__name__ for t in _EXAMPLE_SPECS}:  # tf.io's, whose name says nothing wrong
                raise FeatureSpecError(f"feature {name!r}: a {type(spec).__module__}.{kind} is not a tfrecord_lite "
                                       "spec", hint=f"use tfrecord_lite.{kind} with the same arguments")
            raise FeatureSpecError(f"feature {name!r}: {spec!r:.60} is not a feature spec",
                                   hint="use tfrecord_lite's FixedLenFeature, VarLenFeature, RaggedFeature, "
                                        "SparseFeature, FixedLenSequenceFeature or RawTensorFeature")
        if where == "parse_example" and isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise FeatureSpecError(f"feature {name!r}: FixedLenSequenceFeature requires allow_missing=True "
                                   "in parse_example")


def _key_dtypes(name, spec):
    """(wire key, dtype) for each key a spec reads values of."""
    if isinstance(spec, SparseFeature):
        return [*((key, "int64") for key in spec.index_keys), (spec.value_key, spec.dtype)]
    if isinstance(spec, RaggedFeature):
        return [(spec.value_key or name, spec.dtype), *((key, "int64") for key in spec.partition_keys)]
    return [] if isinstance(spec, RawTensorFeature) else [(name, spec.dtype)]


def _check_key_dtypes(items):
    """Refuse a key read as two dtypes: no record could hold it for both (TF refuses any
    key two kinds of spec read); an error per record would blame one spec's dtype."""
    seen = {}
    for name, spec in items:
        for key, dtype in _key_dtypes(name, spec):
            other, other_dtype = seen.setdefault(key, (name, dtype))
            if other_dtype != dtype:
                raise FeatureSpecError(f"feature {name!r} reads {key!r} as {dtype}, but feature {other!r} reads "
                                       f"it as {other_dtype}", hint="a feature holds values of one type: give "
                                       "both specs the same dtype, or read the key once")


class _Plan:
    """A spec mapping checked and laid out once: the wire keys to extract, raw sizes, and
    per output its column index and, for FixedLenFeature, the (kind, count) every record
    has when no per-row work is needed, the DecodedColumn field of those values and the
    shape to give them (None: the 1-D values as they are)."""

    __slots__ = ("items", "keys", "raw", "outputs", "lean")

    def __init__(self, features, allowed, where):
        _check_specs(features, allowed, where)
        self.items = tuple(features.items())
        keys, raw = [], {}
        for name, spec in self.items:
            for key in _keys_of(name, spec):
                if not isinstance(key, str):  # as the wire's keys: the twin's protobuf maps took bytes too
                    raise FeatureSpecError(f"feature {key!r}: feature names must be str",
                                           hint="name features with str, as tf.train.Example does")
                if not key.isascii():
                    name_utf8(key)
                if key not in keys:
                    keys.append(key)
            if isinstance(spec, RawTensorFeature):
                raw[name] = spec.nbytes
        shared = [k for k in raw if sum(k in _keys_of(n, s) for n, s in self.items) > 1]
        if shared:
            raise FeatureSpecError(f"feature {shared[0]!r}: a RawTensorFeature key cannot be read by another spec")
        _check_key_dtypes(self.items)
        self.keys, self.raw = keys, raw
        self.outputs = []
        # Per key, the (kind, count) for which the core need only return the values: keys
        # that one FixedLenFeature alone reads, which _build then takes as they are.
        readers = Counter(key for name, spec in self.items for key in _keys_of(name, spec))
        self.lean = [None] * len(keys)
        for name, spec in self.items:
            uniform = None
            index = keys.index(_keys_of(name, spec)[0])
            if type(spec) is FixedLenFeature:
                kind = _KIND[spec.dtype]
                alone = readers[keys[index]] == 1
                # A scalar that one spec alone reads is its values array as it is: a reshape
                # to the same shape was a third of _build's time on a W2 batch.
                shape = None if alone and spec.shape == () else spec.shape
                uniform = (kind, prod(spec.shape)), _VALUE_SLOT[kind], shape
                if alone:
                    self.lean[index] = uniform[0]
            self.outputs.append((name, spec, index, uniform))

    def matches(self, features) -> bool:
        return len(features) == len(self.items) and all(features.get(k) is v for k, v in self.items)


_VALUE_SLOT = {FLOAT: DecodedColumn._fields.index("floats"), INT64: DecodedColumn._fields.index("ints"),
               BYTES: DecodedColumn._fields.index("values")}  # the DecodedColumn field of each kind's values
_PLANS: dict = {}  # (id(features), where) -> _Plan, checked against the mapping's items


def _plan(features, allowed, where):
    """The cached _Plan of a spec mapping (specs are frozen, so identity of the items is
    enough to know it is unchanged)."""
    check_spec_mapping(features, "features" if where == "parse_example" else where)
    key = (id(features), where)
    plan = _PLANS.get(key)
    if plan is None or not plan.matches(features):
        plan = _Plan(features, allowed, where)
        if len(_PLANS) >= 64:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


_BYTES_OUTPUTS = ("object", "column")


def _bytes_column(bytes_output) -> bool:
    if bytes_output not in _BYTES_OUTPUTS:
        raise FeatureSpecError(f"bytes_output must be one of {_BYTES_OUTPUTS}, not {bytes_output!r}")
    return bytes_output == "column"


def _native_decode(decode, records, *args):
    """decode(records, *args) of the core, a record that is not serialized bytes named."""
    try:
        return decode(records, *args)
    except TFRecordError:  # the core's own word on the records (InvalidArgumentError is a ValueError)
        raise
    except _native.BUFFER_ERRORS:
        for i, record in enumerate(records):  # only on an error: find the record
            try:
                _native.framing.check_buffer(record)
                continue
            except _native.BUFFER_ERRORS as exc:
                error = exc
            raise ArgumentTypeError(f"{type(record).__name__} is not a serialized record ({error})", index=i,
                                    hint="pass bytes-likes: bytes, bytearray, or a contiguous memoryview "
                                         "or uint8 array") from None
        raise


def _decode(records, plan, seq_plan=None, bytes_output="object"):
    """The core's columns for a plan (and a sequence plan: SequenceExamples), with bytes
    values as BytesColumn when bytes_output is "column"."""
    column = _bytes_column(bytes_output)
    if seq_plan is None:
        _, columns = _native_decode(_native.example.decode_examples, records, plan.keys, plan.raw, column, plan.lean)
        seq_columns = None
    else:
        _, columns, _, seq_columns = _native_decode(_native.example.decode_sequence_examples,
                                                    records, plan.keys, seq_plan.keys, plan.raw, column)
    if column:
        columns = _wrap_bytes(plan.keys, columns, plan.raw)
        seq_columns = seq_columns and _wrap_bytes(seq_plan.keys, seq_columns, {})
    return columns, seq_columns


def _wrap_bytes(keys, columns, raw):
    return [c if k in raw or c.values is None else c._replace(values=BytesColumn._of(*c.values))
            for k, c in zip(keys, columns)]


def _build(plan, raw_columns, batch):
    cols = None
    out = {}
    for name, spec, index, uniform in plan.outputs:
        if uniform is not None and raw_columns[index].uniform == uniform[0]:
            values = raw_columns[index][uniform[1]]
            out[name] = values if uniform[2] is None else values.reshape((batch,) + uniform[2])
            continue
        if cols is None:
            cols = {k: _Column(k, c, batch) for k, c in zip(plan.keys, raw_columns)}
        if isinstance(spec, SparseFeature):
            out[name] = _sparse(cols, spec, batch)
        elif isinstance(spec, RaggedFeature) and spec.partitions:
            out[name] = _partitioned(cols, name, spec)
        else:
            out[name] = _ONE_ROW[type(spec)](cols[plan.keys[index]], spec)
    return out


_EXAMPLE_SPECS = (FixedLenFeature, VarLenFeature, RaggedFeature, SparseFeature, FixedLenSequenceFeature,
                  RawTensorFeature)
_CONTEXT_SPECS = (FixedLenFeature, VarLenFeature, RaggedFeature, SparseFeature, RawTensorFeature)


@overload
def parse_example(serialized: Records, features: Features, *, bytes_output: str = ...,
                  output: Literal["numpy"] = ...) -> dict[str, Any]: ...
@overload
def parse_example(serialized: Records, features: Features, *, bytes_output: str = ...,
                  output: Literal["arrow"]) -> Any: ...
def parse_example(serialized: Records, features: Features, *, bytes_output: str = "object",
                  output: str = "numpy") -> Any:
    """Parse a batch of serialized Examples (any sequence of bytes-like) like
    ``tf.io.parse_example``: FixedLenFeature -> (batch,) + shape array (bytes: object array),
    VarLenFeature/SparseFeature -> SparseTensorValue, RaggedFeature -> RaggedValue,
    FixedLenSequenceFeature(allow_missing=True) -> padded (batch, items) + shape array,
    RawTensorFeature -> (batch,) + shape array. Data that does not fit the spec raises
    FeatureSpecError naming the feature and record; malformed protobuf, ExampleDecodeError.

    bytes_output="column" gives bytes values as a BytesColumn (one uint8 buffer plus int64
    offsets, no Python object per value) wherever "object" gives an object array of bytes.
    output="arrow" returns a ``pyarrow.RecordBatch`` instead (see ``tfrecord_lite.arrow``)."""
    if output == "arrow":
        from .arrow import to_arrow  # pyarrow is optional until it is used

        return to_arrow(serialized, features)
    if output != "numpy":
        raise FeatureSpecError(f"output must be 'numpy' or 'arrow', not {output!r}")
    records = _records(serialized)
    plan = _plan(features, _EXAMPLE_SPECS, "parse_example")
    if not plan.items:  # as TF: a dict of no arrays would not even say how many records there were
        raise FeatureSpecError("features is empty: name at least one feature to parse",
                               hint="to read records without parsing, pass no features; to count them, use "
                                    "tfrecord_lite.index.count_records")
    def parse(records):
        columns, _ = _decode(records, plan, bytes_output=bytes_output)
        return _build(plan, columns, len(records))
    with _fixed_width_hint(serialized):
        return parse_in_order(parse, records)


def _one(serialized, batch_function):
    """[serialized]: one record, a batch refused with the function that takes it."""
    if isinstance(serialized, (list, tuple, RecordBatch, Gathered)):
        raise ArgumentTypeError(f"one record is expected, not a {type(serialized).__name__} of them: use "
                                f"{batch_function} for a batch")
    return [serialized]


def _unbatch(spec, value):
    if isinstance(spec, (VarLenFeature, SparseFeature)):
        return SparseTensorValue(value.indices[:, 1:], value.values, value.dense_shape[1:])
    if isinstance(spec, RaggedFeature):
        return value.values
    return value[0]


def parse_single_example(serialized: Buffer, features: Features, *, bytes_output: str = "object") -> dict[str, Any]:
    """parse_example for one record, without the batch dimension (as TF's)."""
    parsed = parse_example(_one(serialized, "parse_example"), features, bytes_output=bytes_output)
    return {name: _unbatch(spec, parsed[name]) for name, spec in features.items()}


# -- SequenceExample -----------------------------------------------------------------------

def _step_dense(col, spec):
    values, counts, _ = col.typed(spec.dtype)
    present = col.steps >= 0
    if not spec.allow_missing:
        col.required(present, "feature list is required but could not be found")
    stride = prod(spec.shape)
    bad = np.flatnonzero(counts != stride)
    if bad.size:
        col.fail(f"step has {counts[bad[0]]} values but the shape {list(spec.shape)} needs {stride}", bad[0])
    steps = np.maximum(col.steps, 0)
    longest = int(steps.max()) if steps.size else 0
    shape = (col.batch, longest) + spec.shape
    rows = np.repeat(np.arange(col.batch) * longest, steps) + _within(steps)
    if isinstance(values, BytesColumn):
        positions = (rows[:, None] * stride + np.arange(stride)).reshape(-1)
        return scatter(shape, positions, values, spec.default_value), steps
    out = _fill(shape, spec.dtype, spec.default_value)
    out.reshape((col.batch * longest,) + spec.shape)[rows] = values.reshape((len(rows),) + spec.shape)
    return out, steps


def _step_varlen(col, spec):
    values, counts, _ = col.typed(spec.dtype)
    steps = np.maximum(col.steps, 0)
    step_of_value = np.repeat(_within(steps), counts)
    record_of_value = np.repeat(np.repeat(np.arange(col.batch, dtype=np.int64), steps), counts)
    indices = np.stack([record_of_value, step_of_value, _within(counts)], axis=1)
    shape = [col.batch, int(steps.max()) if steps.size else 0, int(counts.max()) if counts.size else 0]
    return SparseTensorValue(indices, values, np.array(shape, dtype=np.int64))


def _step_ragged(col, spec):
    values, counts, _ = col.typed(spec.dtype)
    inner = RaggedValue(values, _splits(counts, spec.row_splits_dtype))
    return RaggedValue(inner, _splits(np.maximum(col.steps, 0), spec.row_splits_dtype))


_STEP_ROWS = {FixedLenSequenceFeature: _step_dense, VarLenFeature: _step_varlen, RaggedFeature: _step_ragged}


def parse_sequence_example(serialized: Records, context_features: Features | None = None,
                           sequence_features: Features | None = None, *, bytes_output: str = "object"
                           ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Parse a batch of serialized SequenceExamples like ``tf.io.parse_sequence_example``:
    returns (context, feature_lists, lengths). Context specs are as in parse_example;
    sequence specs are FixedLenSequenceFeature -> (batch, steps) + shape array padded with
    zeros (lengths[name] gives the steps per record), VarLenFeature -> 3-D
    SparseTensorValue, RaggedFeature -> RaggedValue of RaggedValue. bytes_output as in
    parse_example."""
    records = _records(serialized)
    context_features = context_features or {}
    sequence_features = sequence_features or {}
    plan = _plan(context_features, _CONTEXT_SPECS, "context_features")
    seq_plan = _plan(sequence_features, tuple(_STEP_ROWS), "sequence_features")
    if not plan.items and not seq_plan.items:
        raise FeatureSpecError("context_features and sequence_features are both empty: name at least one "
                               "feature to parse")
    def parse(records):
        columns, seq_columns = _decode(records, plan, seq_plan, bytes_output)
        batch = len(records)
        context = _build(plan, columns, batch)
        feature_lists, lengths = {}, {}
        cols = {k: _Column(k, c, batch) for k, c in zip(seq_plan.keys, seq_columns)}
        for name, spec, index, _ in seq_plan.outputs:
            if isinstance(spec, RaggedFeature) and spec.partitions:
                feature_lists[name] = _partitioned(cols, name, spec, steps=True)
                continue
            result = _STEP_ROWS[type(spec)](cols[seq_plan.keys[index]], spec)
            if isinstance(spec, FixedLenSequenceFeature):
                feature_lists[name], lengths[name] = result
            else:
                feature_lists[name] = result
        return context, feature_lists, lengths
    with _fixed_width_hint(serialized):
        return parse_in_order(parse, records)


def parse_single_sequence_example(serialized: Buffer, context_features: Features | None = None,
                                  sequence_features: Features | None = None, *, bytes_output: str = "object"
                                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """parse_sequence_example for one record, without the batch dimension:
    (context, feature_lists) as ``tf.io.parse_single_sequence_example`` returns."""
    context, lists, _ = parse_sequence_example(_one(serialized, "parse_sequence_example"), context_features,
                                               sequence_features, bytes_output=bytes_output)
    context = {n: _unbatch(s, context[n]) for n, s in (context_features or {}).items()}
    out = {}
    for name, spec in (sequence_features or {}).items():
        value = lists[name]
        if isinstance(spec, VarLenFeature):
            out[name] = SparseTensorValue(value.indices[:, 1:], value.values, value.dense_shape[1:])
        elif isinstance(spec, RaggedFeature):
            out[name] = value.values
        else:
            out[name] = value[0]
    return context, out


# -- without a spec ------------------------------------------------------------------------

def _split_rows(col):
    """Per record: float32/int64 array, list of bytes, [] for an empty Feature, or None."""
    kinds, counts = col.kinds, col.counts
    stores = {FLOAT: col.floats, INT64: col.ints, BYTES: col.values}
    at = {FLOAT: 0, INT64: 0, BYTES: 0}
    rows = []
    for kind, count in zip(kinds.tolist(), counts.tolist()):
        if kind in at:
            value = stores[kind][at[kind]:at[kind] + count]
            rows.append(value.tolist() if kind == BYTES else value)
            at[kind] += count
        else:
            rows.append([] if kind == EMPTY else None)
    return rows


def decode_examples(serialized: Records) -> list[dict[str, Any]]:
    """Every feature of every record, without a spec: a list of dicts name -> float32 or
    int64 array, or list of bytes (names sorted; an empty Feature gives [])."""
    records = _records(serialized)
    with _fixed_width_hint(serialized):
        names, columns = _native_decode(_native.example.decode_examples, records)
    out = [{} for _ in range(len(records))]
    for name, col in sorted(zip(names, columns), key=lambda nc: nc[0]):
        for record, value in zip(out, _split_rows(col)):
            if value is not None:
                record[name] = value
    return out


def decode_example(serialized: Buffer) -> dict[str, Any]:
    """Every feature of one record, without a spec; see decode_examples."""
    return decode_examples([serialized])[0]


def decode_sequence_examples(serialized: Records) -> list[tuple[dict[str, Any], dict[str, list[Any]]]]:
    """Every context feature and feature list of every SequenceExample, without a spec: a
    list of (context, feature_lists) pairs. context is as decode_examples gives it;
    feature_lists maps each list's name to its steps, each step a value as in context."""
    records = _records(serialized)
    with _fixed_width_hint(serialized):
        names, columns, list_names, list_columns = _native_decode(_native.example.decode_sequence_examples, records)
    out = [({}, {}) for _ in range(len(records))]
    for name, col in sorted(zip(names, columns), key=lambda nc: nc[0]):
        for (context, _), value in zip(out, _split_rows(col)):
            if value is not None:
                context[name] = value
    for name, col in sorted(zip(list_names, list_columns), key=lambda nc: nc[0]):
        rows, at = _split_rows(col), 0
        for (_, lists), steps in zip(out, col.steps.tolist()):
            if steps >= 0:
                lists[name] = rows[at:at + steps]
                at += steps
    return out


def decode_sequence_example(serialized: Buffer) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(context, feature_lists) of one SequenceExample, without a spec; see
    decode_sequence_examples."""
    return decode_sequence_examples([serialized])[0]
