"""Feature specs mirroring ``tf.io`` (FixedLenFeature, VarLenFeature, RaggedFeature,
SparseFeature, FixedLenSequenceFeature), the raw-tensor spec RawTensorFeature, and schema
inference from sample records.

Specs only describe; tfrecord_lite/example.py parses against them. dtype is np.float32,
np.int64 or bytes, or one of the strings "float32", "int64", "string" (TensorFlow DType
objects such as ``tf.float32`` also work, by name, and what tf.as_dtype takes: float,
object and numpy bytes or str dtypes); specs store the string form.
"""

from __future__ import annotations

import itertools
import operator
import os
from dataclasses import MISSING, dataclass, fields
from math import isfinite, prod
from typing import Any, Mapping, NamedTuple, Sequence, Union

import numpy as np

from ._typing import BinaryIO, PathLike, Records
from ._contract import Kind
from .errors import ArgumentTypeError, FeatureSpecError, InvalidArgumentError

# np.float32, np.int64, bytes, or "float32", "int64", "string" (and other spellings).
DType = Union[str, type, "np.dtype[Any]"]
Shape = Union[Sequence[int], int]

__all__ = [
    "FixedLenFeature",
    "VarLenFeature",
    "RaggedFeature",
    "SparseFeature",
    "FixedLenSequenceFeature",
    "RawTensorFeature",
    "Schema",
    "SequenceSchema",
    "infer_schema",
]

_DTYPE_NAMES = {
    "float32": "float32", "float": "float32",
    "int64": "int64",
    "string": "string", "bytes": "string", "str": "string",
}
NUMPY_DTYPES = {"float32": np.float32, "int64": np.int64, "string": object}


def normalize_dtype(dtype) -> str:
    """"float32", "int64" or "string" for any accepted spelling of a feature dtype."""
    if dtype is float:  # as tf.as_dtype: Python's float is float32, not numpy's float64
        return "float32"
    if dtype is bytes or dtype is str:
        return "string"
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if not isinstance(dtype, str):
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        if np_dtype is not None and np_dtype.kind in "SUO":  # object, np.dtype("S3"): TF's tf.string
            return "string"
        if name is None and np_dtype is not None:
            name = np_dtype.name
    if name not in _DTYPE_NAMES:
        raise FeatureSpecError(f"unsupported feature dtype {dtype!r}; use np.float32, np.int64 or bytes "
                               "(or 'float32', 'int64', 'string')")
    return _DTYPE_NAMES[name]


def _shape(shape, owner) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    unknown = "a dimension of unknown size needs VarLenFeature, RaggedFeature or FixedLenSequenceFeature"
    try:  # index(), not int(): int() made [2.5] a 2 and "32" the shape [3, 2]
        if isinstance(shape, (str, bytes)):
            raise TypeError
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise FeatureSpecError(f"{owner}: shape must be a sequence of ints, not {shape!r}",
                               hint=unknown if isinstance(shape, (list, tuple)) and None in shape else None) from None
    if any(d < 0 for d in shape):
        raise FeatureSpecError(f"{owner}: shape {list(shape)} has a negative or unknown dimension", hint=unknown)
    return shape


_DEFAULT_KINDS = {"int64": "biu", "float32": "biuf"}  # numpy kinds a default may hold, as TF converts
_DEFAULT_NUMBERS = {"int64": (int, np.integer, np.bool_), "float32": (int, float, np.integer, np.floating, np.bool_)}


def _default(value, shape, dtype, owner):
    """value as an array of shape and dtype (None stays None), holding what TF converts."""
    if value is None:
        return None
    if dtype == "string":  # an object array: "S" arrays drop trailing NULs
        arr = np.array(value, dtype=object)
        flat = arr.reshape(-1).tolist()
        bad = [v for v in flat if not isinstance(v, (bytes, str))]
        if bad:
            raise FeatureSpecError(f"{owner}: default_value {bad[0]!r} of a string feature is not bytes or str")
        arr.reshape(-1)[:] = [v.encode() if isinstance(v, str) else bytes(v) for v in flat]
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:  # ragged nesting
            raise FeatureSpecError(f"{owner}: default_value {value!r}: {exc}") from None
        if arr.dtype.kind == "O" and arr.size:  # ints past uint64 (2**70), numbers in an object array
            flat = arr.reshape(-1).tolist()
            if all(isinstance(v, _DEFAULT_NUMBERS[dtype]) for v in flat):
                try:
                    arr = np.array(flat, dtype=NUMPY_DTYPES[dtype]).reshape(arr.shape)
                except OverflowError:
                    pass  # an int past int64, refused below
        info = np.iinfo(np.int64)
        if arr.size and arr.dtype.kind not in _DEFAULT_KINDS[dtype] or (
                dtype == "int64" and arr.dtype.kind in "iu" and arr.size
                and (arr.max() > info.max or arr.min() < info.min)):
            raise FeatureSpecError(f"{owner}: default_value {value!r} cannot be held by {dtype}")
        with np.errstate(over="ignore"):  # as TF: a float past float32 is inf
            arr = arr.astype(NUMPY_DTYPES[dtype])
    size = prod(shape)
    if arr.size == size:
        return arr.reshape(shape)
    if arr.size == 1:
        return np.broadcast_to(arr.reshape(()), shape)
    raise FeatureSpecError(f"{owner}: default_value has {arr.size} values, the shape {list(shape)} needs {size}")


def _literal(value) -> str:
    """A default's ``tolist()`` as source text: repr, but inf and nan (bare names in a
    repr) as float('inf') and float('nan')."""
    if isinstance(value, list):
        return f"[{', '.join(map(_literal, value))}]"
    if isinstance(value, float) and not isfinite(value):
        return f"float('{value}')"
    return repr(value)


def _tf_dtype(dtype: str) -> str:
    return {"float32": "tf.float32", "int64": "tf.int64", "string": "tf.string"}[dtype]


def _frozen_set(obj, **values):
    for k, v in values.items():
        object.__setattr__(obj, k, v)



def name_utf8(name: str) -> bytes:
    """A feature name's UTF-8, as records hold it; FeatureSpecError for a name with a lone
    surrogate, which no record can hold."""
    try:
        return name.encode()
    except UnicodeEncodeError:
        raise FeatureSpecError(f"feature {name!r}: feature names must be valid UTF-8 (a lone surrogate cannot be "
                               "encoded)", hint="decode names read as bytes strictly, not with "
                               "errors='surrogateescape'") from None


def check_spec_mapping(features, name="features") -> None:
    """Refuse a spec that is not a mapping of names to feature specs (None, a list of specs)."""
    if not isinstance(features, Mapping):
        raise ArgumentTypeError(f"{name} must map names to feature specs, not {features!r:.80}",
                                hint="pass a dict such as {'id': FixedLenFeature([], np.int64)}")

class _ArrayFields:
    """Equality and hashing for a spec holding a default array: the generated ones compared
    arrays elementwise (ValueError for a default of several values) and hashed none."""

    def _key(self) -> tuple:
        key = []
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray):  # by bytes: nan equals nan, -0.0 is not 0.0
                value = (value.dtype.str, value.shape, value.tolist() if value.dtype.hasobject else value.tobytes())
            key.append(value)
        return tuple(key)

    def __eq__(self, other):
        return self._key() == other._key() if type(other) is type(self) else NotImplemented

    def __hash__(self):
        return hash(self._key())


@dataclass(frozen=True, eq=False)
class FixedLenFeature(_ArrayFields):
    """A feature with exactly prod(shape) values per record -> dense array (batch,) + shape.
    A missing (or kind-less) feature takes default_value; without one it is an error."""

    shape: Shape
    dtype: DType
    default_value: Any = None

    def __post_init__(self):
        dtype = normalize_dtype(self.dtype)
        shape = _shape(self.shape, "FixedLenFeature")
        default = _default(self.default_value, shape, dtype, "FixedLenFeature")
        if default is not None and not default.size:  # as TF: a shape of no values has no default
            default = None
        _frozen_set(self, dtype=dtype, shape=shape, default_value=default)

    def to_tf(self) -> str:
        default = "" if self.default_value is None else f", default_value={_literal(self.default_value.tolist())}"
        return f"tf.io.FixedLenFeature({list(self.shape)}, {_tf_dtype(self.dtype)}{default})"


@dataclass(frozen=True)
class VarLenFeature:
    """Any number of values per record -> SparseTensorValue (indices, values, dense_shape)."""

    dtype: DType

    def __post_init__(self):
        _frozen_set(self, dtype=normalize_dtype(self.dtype))

    def to_tf(self) -> str:
        return f"tf.io.VarLenFeature({_tf_dtype(self.dtype)})"


@dataclass(frozen=True)
class _KeyPartition:
    key: str

    def __post_init__(self):
        if not isinstance(self.key, str):
            raise FeatureSpecError(f"RaggedFeature.{type(self).__name__}: key must be a feature name (str), "
                                   f"not {self.key!r}")

    def to_code(self, module: str) -> str:
        return f"{module}.RaggedFeature.{type(self).__name__}({self.key!r})"


class RowSplits(_KeyPartition):
    """Row i of a record's values is values[splits[i]:splits[i + 1]] (splits from ``key``)."""


class RowLengths(_KeyPartition):
    """Rows of the lengths in ``key``."""


class RowStarts(_KeyPartition):
    """Rows starting at the offsets in ``key`` (the first 0), each up to the next."""


class RowLimits(_KeyPartition):
    """Rows ending at the offsets in ``key`` (the last the value count)."""


class ValueRowIds(_KeyPartition):
    """The row of each value in ``key`` (ascending; rows without values are empty)."""


for _cls in (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds):
    dataclass(frozen=True)(_cls)


@dataclass(frozen=True)
class UniformRowLength:
    """Rows of ``length`` values each."""

    length: int

    def __post_init__(self):
        try:
            length = operator.index(self.length)
        except TypeError:
            length = -1
        if length < 1:
            raise FeatureSpecError(f"RaggedFeature.UniformRowLength: length must be an int >= 1, not "
                                   f"{self.length!r}")
        object.__setattr__(self, "length", length)

    def to_code(self, module: str) -> str:
        return f"{module}.RaggedFeature.UniformRowLength({self.length})"


_PARTITIONS = {cls.__name__: cls for cls in (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds,
                                              UniformRowLength)}


def _partition(partition):
    """Ours as it is; tf.io.RaggedFeature's of the same name (a namedtuple) converted."""
    cls = _PARTITIONS.get(type(partition).__name__)
    if cls is None or isinstance(partition, (str, bytes)):
        raise FeatureSpecError(f"RaggedFeature: {partition!r:.60} is not a partition",
                               hint="use RaggedFeature.RowSplits(key), RowLengths(key), RowStarts(key), "
                                    "RowLimits(key), ValueRowIds(key) or UniformRowLength(length)")
    return partition if type(partition) is cls else cls(*partition)


@dataclass(frozen=True)
class RaggedFeature:
    """Any number of values per record -> RaggedValue (values, row_splits).

    Values come from ``value_key`` (default: the spec's own name). ``partitions``, as in
    tf.io.RaggedFeature, outermost first, split each record's values into rows by other
    int64 features of the record (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds)
    or into rows of a fixed length (UniformRowLength: trailing ones reshape the values): one
    more ragged level each. Partitions that do not fit the values always raise
    FeatureSpecError (``validate`` is taken for TF's sake). In parse_sequence_example a
    sequence feature gets one more ragged level (steps), and its partition keys name feature
    lists with the same steps."""

    dtype: DType
    value_key: str | None = None
    partitions: tuple = ()
    row_splits_dtype: Any = "int32"
    validate: bool = False

    RowSplits = RowSplits
    RowLengths = RowLengths
    RowStarts = RowStarts
    RowLimits = RowLimits
    ValueRowIds = ValueRowIds
    UniformRowLength = UniformRowLength

    def __post_init__(self):
        if isinstance(self.partitions, (str, bytes)) or not hasattr(self.partitions, "__iter__"):
            raise FeatureSpecError(f"RaggedFeature: partitions must be a list of partitions, not "
                                   f"{self.partitions!r:.60}")
        partitions = tuple(_partition(p) for p in self.partitions)
        if self.value_key is not None and not isinstance(self.value_key, str):
            raise FeatureSpecError(f"RaggedFeature: feature names must be str, not value_key={self.value_key!r}")
        splits = getattr(self.row_splits_dtype, "name", self.row_splits_dtype)
        try:
            splits = np.dtype(splits).name
        except TypeError:
            splits = repr(splits)
        if splits not in ("int32", "int64"):
            raise FeatureSpecError(f"RaggedFeature: row_splits_dtype must be int32 or int64, not {splits}")
        _frozen_set(self, dtype=normalize_dtype(self.dtype), row_splits_dtype=splits, partitions=partitions,
                    validate=bool(self.validate))

    @property
    def partition_keys(self) -> list:
        """The features the partitions read."""
        return [p.key for p in self.partitions if not isinstance(p, UniformRowLength)]

    def to_tf(self) -> str:
        key = "" if self.value_key is None else f", value_key={self.value_key!r}"
        parts = ""
        if self.partitions:
            parts = f", partitions=[{', '.join(p.to_code('tf.io') for p in self.partitions)}]"
        return (f"tf.io.RaggedFeature({_tf_dtype(self.dtype)}{key}{parts}, "
                f"row_splits_dtype=tf.{self.row_splits_dtype})")


@dataclass(frozen=True)
class SparseFeature:
    """Indices from int64 feature(s) ``index_key`` and values from ``value_key`` ->
    SparseTensorValue with dense_shape (batch,) + size; entries sorted by index within each
    record unless already_sorted. index_key/size may be lists for several dimensions."""

    index_key: Union[str, Sequence[str]]
    value_key: str
    dtype: DType
    size: Shape
    already_sorted: bool = False

    def __post_init__(self):
        try:  # one bytes name is no list of names (tuple(b"i") is (105,))
            if isinstance(self.index_key, (bytes, bytearray)):
                raise TypeError
            index_key = self.index_key if isinstance(self.index_key, str) else tuple(self.index_key)
        except TypeError:
            raise FeatureSpecError(f"SparseFeature: index_key must be a feature name or a list of them, not "
                                   f"{self.index_key!r}") from None
        size = int(self.size) if isinstance(self.size, (int, np.integer)) else _shape(self.size, "SparseFeature")
        _frozen_set(self, dtype=normalize_dtype(self.dtype), index_key=index_key, size=size)
        bad = [k for k in [*self.index_keys, self.value_key] if not isinstance(k, str)]
        if bad:
            raise FeatureSpecError(f"SparseFeature: feature names must be str, not {bad[0]!r}",
                                   hint="name the index feature(s) and the value feature, e.g. "
                                        "SparseFeature('index', 'value', np.float32, 100)")
        if len(self.index_keys) != len(self.sizes) or not self.index_keys:
            raise FeatureSpecError(f"SparseFeature: {len(self.index_keys)} index keys but size has "
                                   f"{len(self.sizes)} dimensions")

    @property
    def index_keys(self) -> list:
        return [self.index_key] if isinstance(self.index_key, str) else list(self.index_key)

    @property
    def sizes(self) -> tuple:
        return _shape(self.size, "SparseFeature")

    def to_tf(self) -> str:
        # TF takes one index name with an int size and a list of names with a list of sizes
        one = isinstance(self.index_key, str)
        index, size = (self.index_key, self.sizes[0]) if one else (list(self.index_key), list(self.sizes))
        return (f"tf.io.SparseFeature({index!r}, {self.value_key!r}, {_tf_dtype(self.dtype)}, {size!r}, "
                f"already_sorted={self.already_sorted})")


@dataclass(frozen=True, eq=False)
class FixedLenSequenceFeature(_ArrayFields):
    """A variable number of shape-sized items. In parse_example (allow_missing=True
    required, as in TF) the values are split into items and padded with default_value to the
    longest record; in parse_sequence_example each FeatureList step is one item, padded with
    zeros (or default_value, which TF does not allow there)."""

    shape: Shape
    dtype: DType
    allow_missing: bool = False
    default_value: Any = None

    def __post_init__(self):
        dtype = normalize_dtype(self.dtype)
        shape = _shape(self.shape, "FixedLenSequenceFeature")
        default = None
        if self.default_value is not None:
            default = _default(self.default_value, (), dtype, "FixedLenSequenceFeature (default_value is a scalar)")
        _frozen_set(self, dtype=dtype, shape=shape, default_value=default)

    def to_tf(self) -> str:
        default = "" if self.default_value is None else f", default_value={_literal(self.default_value.tolist())}"
        return (f"tf.io.FixedLenSequenceFeature({list(self.shape)}, {_tf_dtype(self.dtype)}, "
                f"allow_missing={self.allow_missing}{default})")


@dataclass(frozen=True, eq=False)
class RawTensorFeature(_ArrayFields):
    """A bytes feature holding one array's raw data (e.g. ``image.tobytes()``) -> dense array
    (batch,) + shape of ``dtype`` (any fixed-size numpy dtype, byte order as written), copied
    once from the record. The value must be exactly prod(shape) * itemsize bytes. TF spells
    this FixedLenFeature([], tf.string) followed by tf.io.decode_raw and a reshape."""

    shape: Shape
    dtype: Any  # any fixed-size numpy dtype or its spelling
    default_value: Any = None

    def __post_init__(self):
        shape = _shape(self.shape, "RawTensorFeature")
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            raise FeatureSpecError(f"RawTensorFeature: {self.dtype!r} is not a numpy dtype") from None
        if dtype.hasobject or dtype.itemsize == 0:
            raise FeatureSpecError(f"RawTensorFeature: dtype {dtype} has no fixed-size raw form")
        default = None
        if self.default_value is not None:
            try:
                given = np.asarray(self.default_value)
                if dtype.kind in "iu" and given.dtype.kind == "f" and not np.all(np.mod(given, 1) == 0):
                    raise ValueError("not a whole number")  # astype would cut it off without a word
                if dtype.kind in "iu" and given.dtype.kind in "iuf" and given.size:
                    info = np.iinfo(dtype)  # numpy before 1.24 wraps a value out of range
                    if given.min() < info.min or given.max() > info.max:
                        raise ValueError(f"outside {info.min}..{info.max}")
                with np.errstate(over="ignore"):  # a float past float32 is inf
                    default = np.broadcast_to(np.asarray(self.default_value, dtype=dtype), shape)
            except (TypeError, ValueError, OverflowError) as exc:
                raise FeatureSpecError(f"RawTensorFeature: default_value {self.default_value!r:.80} does not "
                                       f"fit shape {list(shape)} of {dtype} ({exc})") from None
        _frozen_set(self, shape=shape, dtype=dtype, default_value=default)

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * self.dtype.itemsize

    def to_tf(self) -> str:
        """TF's spec of the raw bytes (an expression: Schema.to_tf_code says what follows)."""
        return "tf.io.FixedLenFeature([], tf.string)"

    def tf_comment(self) -> str:
        return f"then tf.io.decode_raw (data {self.dtype.str}) and reshape to {list(self.shape)}"


class Schema(dict):
    """name -> spec, as infer_schema returns it for Examples. ``to_tf_code()`` prints the
    TensorFlow equivalent, ``to_code()`` the tfrecord_lite one. ``untyped``: the names of
    features only ever seen as empty Features (no value list set), whose dtype, float32, is
    a guess: a spec of any dtype parses them (to no values); the code says so."""

    untyped: frozenset = frozenset()

    def _comment(self, name) -> str:
        return f"  # {UNTYPED}" if name in self.untyped else ""

    def to_tf_code(self, variable: str = "features") -> str:
        lines = [f"{variable} = {{"]
        for name, spec in self.items():
            comment = f"  # {spec.tf_comment()}" if isinstance(spec, RawTensorFeature) else self._comment(name)
            lines.append(f"    {name!r}: {spec.to_tf()},{comment}")
        lines.append("}")
        return "\n".join(lines)

    def to_code(self, variable: str = "features", imports: bool = True) -> str:
        """Python source that builds this spec with tfrecord_lite (imports included)."""
        lines = [_IMPORTS] if imports else []
        lines += [f"{variable} = {{"]
        lines += [f"    {name!r}: {spec_code(spec)},{self._comment(name)}" for name, spec in self.items()]
        lines.append("}")
        return "\n".join(lines)


UNTYPED = "only empty Features seen: any dtype parses it"


class SequenceSchema(NamedTuple):
    """What infer_schema returns for SequenceExamples: the context's specs and the feature
    lists' specs, the two spec arguments of ``parse_sequence_example``."""

    context: Schema
    feature_lists: Schema

    def to_tf_code(self) -> str:
        return (self.context.to_tf_code("context_features") + "\n"
                + self.feature_lists.to_tf_code("sequence_features"))

    def to_code(self) -> str:
        return (self.context.to_code("context_features") + "\n"
                + self.feature_lists.to_code("sequence_features", imports=False))


_IMPORTS = "import numpy as np\nimport tfrecord_lite as tfl\n"
_DTYPE_CODE = {"float32": "np.float32", "int64": "np.int64", "string": "bytes"}


def _numpy_dtype_code(dtype) -> str:
    """Source for a numpy dtype: np.<name> where numpy has that name for it, else
    np.dtype(...) (datetime64[s] and structured dtypes have no such name)."""
    name = "bool_" if dtype.kind == "b" else dtype.name  # np.bool: none in numpy 1.24-1.26
    if dtype.isnative and np.dtype(getattr(np, name, object)) == dtype:
        return f"np.{name}"
    return f"np.dtype({dtype.descr if dtype.names else dtype.str!r})"


def spec_code(spec) -> str:
    """A spec as tfrecord_lite source: required fields by position, others by keyword when
    they differ from the default."""
    args = []
    for field in fields(spec):
        value = getattr(spec, field.name)
        if field.name == "dtype":
            dtype = value if isinstance(value, str) else np.dtype(value)
            text = _DTYPE_CODE[dtype] if isinstance(dtype, str) else _numpy_dtype_code(dtype)
        elif field.name == "shape":
            text = repr(list(value))
        elif field.name == "partitions":
            text = f"({''.join(p.to_code('tfl') + ', ' for p in value)})"
        else:
            text = _literal(value.tolist()) if isinstance(value, np.ndarray) else repr(value)
        if field.default is MISSING:
            args.append(text)
        elif not (value is field.default or (not isinstance(value, np.ndarray) and value == field.default)):
            args.append(f"{field.name}={text}")
    return f"tfl.{type(spec).__name__}({', '.join(args)})"


_KIND_NAMES = {Kind.BYTES: "string", Kind.FLOAT: "float32", Kind.INT64: "int64"}


_MIXED_HINT = ("A spec gives each feature one type, and a record of another type fails to parse with it: "
               "fix or leave out the records (or files) of the other type, or write the spec by hand "
               "for the records you will read")


def _dtype_and_count(name, column, record_of, where):
    """The dtype of a column's values (None if no row has a typed value), and the value
    count every row shares (None if the counts differ or a row has no typed value);
    several dtypes raise FeatureSpecError at the first row of another type than the first,
    naming where (record position -> words) the first type was seen."""
    kinds, counts = column.kinds, column.counts
    typed = kinds[(kinds == Kind.BYTES) | (kinds == Kind.FLOAT) | (kinds == Kind.INT64)]
    found = set(np.unique(typed).tolist())
    if len(found) > 1:
        other = typed[np.flatnonzero(typed != typed[0])[0]]
        first, at = (int(np.flatnonzero(kinds == kind)[0]) for kind in (typed[0], other))
        raise FeatureSpecError(f"feature {name!r} has values of more than one type "
                               f"({', '.join(sorted(_KIND_NAMES[k] for k in found))}): "
                               f"{_KIND_NAMES[int(other)]} here, {_KIND_NAMES[int(typed[0])]} in "
                               f"{where(record_of(first))}", index=record_of(at), hint=_MIXED_HINT)
    dtype = _KIND_NAMES[int(typed[0])] if typed.size else None
    uniform = len(typed) == len(kinds) and len(kinds) and np.all(counts == counts[0])
    return dtype, int(counts[0]) if uniform else None


def _shape_of(count: int) -> list:
    return [] if count == 1 else [count]


def infer_schema(source: PathLike | BinaryIO | Records, sample: int = 1000, progress: bool | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> Schema | SequenceSchema:
    """A spec for the first ``sample`` records of source (a list of serialized records, or
    a path or file readable by TFRecordReader).

    Examples give a Schema: FixedLenFeature where every sampled record has the feature with
    the same number of values, VarLenFeature otherwise. SequenceExamples (records with
    feature lists) give a SequenceSchema(context, feature_lists): the context as for
    Examples, and per feature list FixedLenSequenceFeature where every step has the same
    number of values (allow_missing=True when some record lacks the list), VarLenFeature
    otherwise. Features whose kind differs between records raise FeatureSpecError.
    progress: a bar over the records read (see tfrecord_lite.progress). storage_options: for
    an fsspec URL."""
    from .batch import locate_error
    from .errors import TFRecordError

    records = _sample(source, sample, progress, storage_options)
    try:
        return _infer(records)
    except TFRecordError as exc:  # name the record's file, offset and index, where known
        locate_error(exc, records)
        raise


def _sample(source, sample, progress, storage_options):
    """The first ``sample`` records: a RecordBatch that knows their origins when read from a
    file, else a list."""
    from .batch import RecordBatch
    from .progress import progress as _progress
    from .reader import TFRecordReader

    try:
        sample = operator.index(sample)
    except TypeError:
        raise ArgumentTypeError(f"sample must be an int, not {type(sample).__name__}") from None
    if sample < 0:  # a list's [:-1] dropped its last record, while a file's read none
        raise InvalidArgumentError(f"sample must be a number of records >= 0, not {sample}")
    if isinstance(source, RecordBatch):
        return source[:sample]
    if isinstance(source, (bytes, bytearray, memoryview)):  # its items are ints: "int is not a record"
        raise ArgumentTypeError("infer_schema takes records or a file, not one serialized record",
                                hint="pass a list of records: infer_schema([record])")
    if not (isinstance(source, (str, os.PathLike)) or hasattr(source, "read")):
        return list(itertools.islice(source, sample))  # an iterator is read no further than the sample
    with TFRecordReader(source, storage_options=storage_options) as reader, \
            _progress(sample, desc="schema", enabled=progress) as bar:
        records = reader.head(sample)
        bar.update(len(records))
    return records


def decode_records(records):
    """The core's columns of Examples and SequenceExamples: an Example decodes as a
    SequenceExample without lists (same field 1). A record that is neither fails in an
    Example's words, as it is mostly meant to be one."""
    from . import _native
    from .errors import TFRecordError
    from .example import _native_decode

    try:
        return _native_decode(_native.example.decode_sequence_examples, records)
    except TFRecordError as exc:
        error = exc
    try:
        _native_decode(_native.example.decode_examples, records)
    except TFRecordError as exc:
        raise exc from None
    raise error


def _infer(records) -> Schema | SequenceSchema:
    names, columns, list_names, list_columns = decode_records(records)

    def where(i):  # a record in an error's words: by its file where known
        place = records.locate(i) if hasattr(records, "locate") else None
        return f"record {i}" if place is None else f"{place[0]}, record {place[2]}, byte offset {place[1]}"

    context = Schema()
    for name, column in sorted(zip(names, columns), key=lambda nc: nc[0]):
        dtype, count = _dtype_and_count(name, column, int, where)
        context[name] = VarLenFeature(dtype or "float32") if count is None else FixedLenFeature(_shape_of(count), dtype)
    context.untyped = _untyped(names, columns)
    if not list_names:
        return context
    lists = Schema()
    for name, column in sorted(zip(list_names, list_columns), key=lambda nc: nc[0]):
        steps = column.steps
        ends = np.cumsum(np.maximum(steps, 0))
        dtype, count = _dtype_and_count(name, column, lambda row: int(np.searchsorted(ends, row, side="right")),
                                        where)
        lists[name] = (VarLenFeature(dtype or "float32") if count is None else
                       FixedLenSequenceFeature(_shape_of(count), dtype, allow_missing=bool((steps < 0).any())))
    lists.untyped = _untyped(list_names, list_columns)
    return SequenceSchema(context, lists)


def _untyped(names, columns) -> frozenset:
    """The names whose values never had a type: their VarLenFeature's float32 is a guess, as
    any dtype parses them (to no values)."""
    typed = (Kind.BYTES, Kind.FLOAT, Kind.INT64)
    return frozenset(name for name, column in zip(names, columns) if not np.isin(column.kinds, typed).any())
