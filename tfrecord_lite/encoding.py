"""tf.train.Example / SequenceExample encoding: Python values and column batches to
serialized records, byte for byte what ``SerializeToString()`` of the same messages gives
(``deterministic=True``: with sorted map keys, as ``SerializeToString(deterministic=True)``).

Values are normalized here (float -> float_list, int/bool -> int64_list, bytes/str ->
bytes_list, lists and arrays of them); the wire work happens in ``_native.example``
(compiled csrc/_example.pyx or its twin). Decoding and parsing live in ``example``.
"""

from __future__ import annotations

from functools import cmp_to_key, lru_cache
from typing import Any, Iterable, Literal, Mapping, overload

import numpy as np

from . import _native
from ._contract import Kind
from .batch import RecordBatch
from .errors import FeatureSpecError
from .features import name_utf8

__all__ = ["encode_example", "encode_examples", "encode_sequence_example"]

_, BYTES, FLOAT, INT64, EMPTY, RAW, ROWS = (k.value for k in Kind)

_FLOAT_SCALARS = (float, np.float32, np.float64, np.float16)
_INT_SCALARS = (int, bool, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32, np.bool_)


def _normalize(name, value):
    """(kind, values) for one feature value: float -> float_list, int/bool -> int64_list,
    bytes/str -> bytes_list; lists and arrays of them; an empty list -> a Feature with no
    kind (an empty array keeps its dtype's kind). Single numbers stay Python scalars,
    which the encoders take as they are."""
    t = type(value)
    if t in _FLOAT_SCALARS:
        return FLOAT, float(value)
    if t in _INT_SCALARS:
        value = int(value)
        if not -2**63 <= value < 2**63:
            raise FeatureSpecError(f"feature {name!r}: value {value} does not fit int64")
        return INT64, value
    if t is bytes:
        return BYTES, [value]
    if t is np.ndarray and value.dtype == np.float32 and value.flags.c_contiguous:
        return FLOAT, value.reshape(-1)
    if isinstance(value, (bytes, str, bytearray, memoryview, np.bytes_, np.str_)):
        return BYTES, [_as_bytes(name, value)]
    if isinstance(value, (list, tuple)):
        if not value:
            return EMPTY, None
        if all(isinstance(v, (bytes, str, bytearray, memoryview, np.bytes_, np.str_)) for v in value):
            return BYTES, [_as_bytes(name, v) for v in value]
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        if isinstance(value, (list, tuple)) and any(isinstance(v, (list, tuple, np.ndarray)) for v in value):
            raise FeatureSpecError(f"feature {name!r}: cannot encode {value!r:.80}: a nested list is flattened "
                                   "only when its rows have one length and its values one type",
                                   hint="a Feature holds one flat list; for one list per step use "
                                        "encode_sequence_example") from None
        raise FeatureSpecError(f"feature {name!r}: cannot encode {type(value).__name__}: {exc}") from None
    if arr.dtype.kind in "fiub":
        if arr.dtype == np.float64 and type(value) is not np.ndarray and isinstance(_first(value), _INTS):
            ints = _int64_values(name, value)
            if ints is not None:
                return INT64, ints
        return _numeric(name, arr, -1)
    if arr.dtype.kind in "SUO" and not isinstance(value, (list, tuple)):
        flat = arr.reshape(-1).tolist()
        if arr.dtype.kind != "O" or all(isinstance(v, (bytes, str)) for v in flat):
            return BYTES, [_as_bytes(name, v) for v in flat]
    if arr.dtype.kind == "O" and arr.size:  # ints past int64 and uint64 alike, or Python ints in an object array
        ints = _int64_values(name, value)
        if ints is not None:
            return INT64, ints
        flat = arr.reshape(-1).tolist()
        if all(isinstance(v, (float, np.floating, int, np.integer)) for v in flat):  # floats in an object array
            return _numeric(name, np.array(flat, dtype=np.float64), -1)  # (a pandas column): as a list of them
    if arr.dtype.kind in "SU" and arr.ndim > 1:  # numpy pads nested bytes to one width: never flattened
        raise FeatureSpecError(f"feature {name!r}: cannot encode {value!r:.80}: a nested list of bytes or str",
                               hint="pass a flat list of bytes or str (a Feature holds one flat list); for one "
                                    "list per step use encode_sequence_example")
    raise FeatureSpecError(f"feature {name!r}: cannot encode {value!r:.80} (want floats, ints, bools, bytes or str)")


def _numeric(name, arr, rows):
    """(kind, values) of a numeric array as the encoders take it: float32 or int64,
    C-contiguous, shaped (rows, -1), or flat when rows is -1."""
    if arr.dtype.kind == "f":
        kind, dtype = FLOAT, np.float32
    else:
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and arr.max() > _INT64_MAX:
            raise FeatureSpecError(f"feature {name!r}: value {arr.max()} does not fit int64")
        kind, dtype = INT64, np.int64
    with np.errstate(over="ignore"):  # a float past float32 is inf, as tf.train.FloatList stores it
        values = np.ascontiguousarray(arr, dtype=dtype)
    return kind, values.reshape(rows, -1) if rows >= 0 else values.reshape(-1)


_INT64_MAX = np.iinfo(np.int64).max


def _first(value):
    """The first value of a (nested) list: a float there makes it a float_list anyway."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value


_INTS = (int, np.integer)


def _int64_values(name, value):
    """A list of ints only as int64, or None if it holds anything else. numpy makes float64
    of ints past int64 (``[-1, 2**63]``) and of uint64 beside signed ints: written as a
    float_list, their values were rounded, and their kind was lost. One that does not fit
    is refused."""
    flat = np.asarray(value, dtype=object).reshape(-1)
    if not all(isinstance(v, _INTS) for v in flat):
        return None
    ints = [int(v) for v in flat]
    for v in ints:
        if not -2**63 <= v < 2**63:
            raise FeatureSpecError(f"feature {name!r}: value {v} does not fit int64")
    return np.array(ints, dtype=np.int64)


def _as_bytes(name, v) -> bytes:
    if isinstance(v, str):
        try:
            return v.encode()
        except UnicodeEncodeError as exc:
            raise FeatureSpecError(
                f"feature {name!r}: the str value {v!r:.80} has no UTF-8 encoding ({exc.reason} at position "
                f"{exc.start})", hint="pass bytes (os.fsencode(value) for a file name) or a valid str",
            ) from None
    if isinstance(v, bytes):
        return bytes(v) if type(v) is not bytes else v
    if isinstance(v, memoryview):  # its bytes as the core would borrow them
        try:
            _native.framing.check_buffer(v)
        except _native.BUFFER_ERRORS as exc:
            raise FeatureSpecError(f"feature {name!r}: cannot encode a memoryview as bytes: {exc}",
                                   hint="pass bytes values (bytes(value) copies a view's elements)") from None
        return v.tobytes()
    if isinstance(v, bytearray):
        return bytes(v)
    raise FeatureSpecError(f"feature {name!r}: cannot mix {type(v).__name__} into a bytes list")


_KEYS: dict = {}  # name -> UTF-8, for the names a program keeps writing


def _key(name) -> bytes:
    key = _KEYS.get(name)
    if key is None:
        if not isinstance(name, str):
            raise FeatureSpecError(f"feature names must be str, not {type(name).__name__} ({name!r})")
        key = name_utf8(name)
        if len(_KEYS) < 4096:
            _KEYS[name] = key
    return key


def _deterministic_cmp(a, b):
    """Map key order of protobuf's deterministic serialization (upb runtime): bytewise over
    the common prefix, and where one key is a prefix of the other the longer comes first."""
    n = min(len(a[1]), len(b[1]))
    x, y = a[1][:n], b[1][:n]
    if x != y:
        return -1 if x < y else 1
    return len(b[1]) - len(a[1])


_DETERMINISTIC = cmp_to_key(_deterministic_cmp)


def _order(mapping, deterministic):
    """(name, encoded key) pairs in mapping order, or in protobuf's deterministic order."""
    return _order_of(tuple(mapping), deterministic)


@lru_cache(maxsize=256)
def _order_of(names, deterministic):
    # Cached: batches of one schema ask again and again, and the sort holds the GIL.
    pairs = [(name, _key(name)) for name in names]
    return tuple(sorted(pairs, key=_DETERMINISTIC) if deterministic else pairs)


def _features_args(mapping, deterministic):
    pairs = _order(mapping, deterministic)
    normalized = [_normalize(name, mapping[name]) for name, _ in pairs]
    return [key for _, key in pairs], [kind for kind, _ in normalized], [vals for _, vals in normalized]


def encode_example(mapping: Mapping[str, Any], deterministic: bool = False) -> bytes:
    """Serialize {name: value} as a tf.train.Example. Values: scalars, lists or numpy
    arrays (flattened); float -> float_list, int/bool -> int64_list, bytes/str ->
    bytes_list. Features are written in mapping order; deterministic=True sorts them and
    gives exactly what ``tf.train.Example(features=tf.train.Features(feature=...))``
    serializes with ``deterministic=True`` (an empty mapping too: ``b"\\n\\x00"``, the empty
    Features message present, where a bare ``tf.train.Example()`` serializes to ``b""``)."""
    return _native.example.encode_example(*_features_args(mapping, deterministic))


def encode_sequence_example(context: Mapping[str, Any], feature_lists: Mapping[str, Any],
                            deterministic: bool = False) -> bytes:
    """Serialize a tf.train.SequenceExample: context {name: value} as in encode_example,
    feature_lists {name: sequence of step values} (a 2-D array gives one step per row)."""
    keys, kinds, values = _features_args(context or {}, deterministic)
    list_keys, list_steps = [], []
    for name, key in _order(feature_lists or {}, deterministic):
        list_keys.append(key)
        _rows(name, feature_lists[name], "a feature list", "step")
        list_steps.append([_normalize(name, step) for step in feature_lists[name]])
    return _native.example.encode_sequence_example(keys, kinds, values, list_keys, list_steps)


@overload
def encode_examples(columns: Mapping[str, Any], deterministic: bool = ..., raw: Iterable[str] = ..., *,
                    as_batch: Literal[False] = ...) -> list[bytes]: ...
@overload
def encode_examples(columns: Mapping[str, Any], deterministic: bool = ..., raw: Iterable[str] = ..., *,
                    as_batch: Literal[True]) -> RecordBatch: ...
def encode_examples(columns: Mapping[str, Any], deterministic: bool = False, raw: Iterable[str] = (), *,
                    as_batch: bool = False) -> list[bytes] | RecordBatch:
    """Serialize a batch column by column: columns maps name -> numpy array with a leading
    batch dimension (each row flattened into one feature), or a sequence with one value per
    row (anything encode_example takes). Columns named in ``raw`` (names, or one name) are
    written as one bytes value per row holding the row's raw array data (read back with
    RawTensorFeature).

    Returns a list of bytes (encoded without the GIL; making each record's bytes object
    holds it), or with ``as_batch=True`` a framed :class:`RecordBatch`: the records already
    framed as TFRecords in one buffer, built without the GIL and without a Python object per
    record, which ``TFRecordWriter.write_many`` and ``write_parallel`` copy verbatim (so
    encoding threads run in parallel)."""
    raw = _raw_names(raw, columns)
    n = None
    for name, column in columns.items():
        rows = _rows(name, column)
        if n is None:
            n = rows
        elif rows != n:
            raise FeatureSpecError(f"feature {name!r}: {rows} rows, but {n} in the first column")
    if not n:
        return RecordBatch(framed=True) if as_batch else []
    keys, kinds, data = [], [], []
    for name, key in _order(columns, deterministic):
        kind, value = _column(name, columns[name], n, name in raw)
        keys.append(key)
        kinds.append(kind)
        data.append(value)
    if not as_batch:
        return _native.example.encode_examples(keys, kinds, data, n)
    return RecordBatch(*_native.example.encode_examples_framed(keys, kinds, data, n), framed=True)


def _raw_names(raw, columns) -> frozenset:
    """The names of raw, one str taken as one name (not its substrings); each must be a
    column, or a misspelt one would be encoded as numbers without a word."""
    names = frozenset((raw,) if isinstance(raw, str) else raw)
    for name in names:
        if name not in columns:
            raise FeatureSpecError(f"raw names {name!r}, which is not one of the columns {list(columns)!r:.200}")
    return names


def _rows(name, column, what="a column", unit="row") -> int:
    """A column's row count (or a feature list's step count); a value without one (a scalar,
    a 0-d array, an iterator) is refused naming its feature."""
    try:
        # a str or bytes would be its characters, one per row
        if isinstance(column, (str, bytes, bytearray, np.generic)) or getattr(column, "ndim", 1) == 0:
            raise TypeError
        return len(column)
    except TypeError:
        raise FeatureSpecError(
            f"feature {name!r}: {what} needs one value per {unit} (an array or a sequence), not "
            f"{type(column).__name__} {column!r:.80}",
            hint="pass a list or an array (list(it) for an iterator); " + (
                "a value shared by every row repeated, as [value] * n or np.full(n, value)" if unit == "row"
                else "a single step as [value]"),
        ) from None


def _column(name, column, n, raw):
    if raw:
        try:
            arr = np.ascontiguousarray(column)
        except ValueError as exc:  # ragged rows
            raise FeatureSpecError(f"feature {name!r}: a raw column needs rows of one shape ({exc})") from None
        # numpy pads a list of bytes or str to one width, and an object array has no data
        if arr.dtype.kind == "O" or (arr.dtype.kind in "SU" and not isinstance(column, np.ndarray)):
            objects = arr.dtype.kind == "O"
            raise FeatureSpecError(
                f"feature {name!r}: a raw column needs an array of numbers, not "
                + ("an array of Python objects" if objects else f"a {type(column).__name__} of bytes or str"),
                hint="convert it with .astype(<a numeric dtype>)" if objects
                else "leave bytes and str columns out of raw: their values are written as they are",
            )
        return RAW, arr.reshape(n, -1).view(np.uint8).reshape(n, -1)
    if isinstance(column, np.ndarray) and column.dtype.kind in "fiub" and column.ndim >= 1:
        # Not through _normalize, whose checks for scalars and lists held the GIL that
        # parallel encoders share 0.2-0.6 µs a column longer: about 6 µs a W2 block.
        return _numeric(name, column, n)
    if not isinstance(column, np.ndarray) or column.ndim == 1:
        # One bytes value per row, the common case: the encoder's own list of them, made and
        # checked in C, as a Python loop over the rows would hold the GIL that parallel
        # encoders share (an array of fixed-width bytes or str gives its rows as Python's).
        items = column if type(column) is not np.ndarray or column.dtype.kind == "O" else column.tolist()
        items = _native.spans.bytes_list(items)
        if items is not None:
            return BYTES, items
    rows = [_normalize(name, v) for v in column]
    if all(kind == BYTES for kind, _ in rows):
        return BYTES, [v for _, v in rows]
    return ROWS, rows
