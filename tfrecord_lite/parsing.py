"""The per-batch parse step shared by TFRecordDataset, IndexedDataset and the adapters:
``make_parse`` (a feature spec or a custom callable as one picklable step), the errors it
raises made to name their record's origin (``LocatedParse``), and ``unbatch`` (per-record
results of a parsed batch)."""

from __future__ import annotations

import numpy as np

from .batch import locate_error
from .errors import TFRecordError
from .features import FixedLenSequenceFeature, RaggedFeature, SparseFeature, VarLenFeature

__all__ = ["make_parse", "ParseFeatures", "LocatedParse", "unbatch"]

# Specs whose batch value is not indexed per record (its i-th item is not record i's value).
_NOT_POSITIONAL = (VarLenFeature, SparseFeature, RaggedFeature, FixedLenSequenceFeature)


def make_parse(features, parse=None, bytes_output="object", output="numpy"):
    """The per-batch parse step: ``parse`` itself, a ``ParseFeatures`` for ``features``, or
    None for raw records."""
    if parse is not None or features is None:
        return parse
    # Only options that differ from the defaults are passed: parse_example(records, features)
    # stays the whole call for the common case.
    options = {k: v for k, v in (("bytes_output", bytes_output), ("output", output))
               if v not in ("object", "numpy")}
    return ParseFeatures(features, options)


class ParseFeatures:
    """``parse_example(records, features, **options)`` as a top-level callable, so that
    datasets holding it pickle (spawn and forkserver DataLoader workers). The codec is
    imported at call time: it is optional until used."""

    __slots__ = ("features", "options")

    def __init__(self, features, options=None):
        self.features = features
        self.options = options or {}

    def __call__(self, records):
        return (_codec or _load_codec()).parse_example(records, self.features, **self.options)


_codec = None  # tfrecord_lite.example once a ParseFeatures first runs


def _load_codec():
    # Imported at the first call, not at every one: the import statement took 2 µs a batch.
    global _codec
    from . import example

    _codec = example
    return example


class LocatedParse:
    """A parse step (records -> output) whose errors about a record name the record's
    origin when the records know it (see ``tfrecord_lite.batch.locate_error``)."""

    __slots__ = ("parse",)

    def __init__(self, parse):
        self.parse = parse

    def __call__(self, records):
        try:
            return self.parse(records)
        except TFRecordError as exc:
            locate_error(exc, records)
            raise


def unbatch(parsed, n, parse, records):
    """Per-record results from a parsed group: dict values, the arrays of a tuple and
    sequences are indexed per record; anything not splittable is parsed record by record instead. A feature spec's
    results are parse_single_example's: sparse, ragged and sequence values do not split by
    position (a SparseTensorValue is a 3-tuple; a sequence is padded to the group's longest),
    so their records are parsed alone."""
    features = _features(parse)
    if features is not None and isinstance(parsed, dict) and any(
            isinstance(spec, _NOT_POSITIONAL) for spec in features.values()):
        if n == 1:
            return [{name: (_codec or _load_codec())._unbatch(spec, parsed[name]) for name, spec in features.items()}]
    elif isinstance(parsed, dict):
        if all(_rows(v) == n for v in parsed.values()):
            return [{k: _row(v, i) for k, v in parsed.items()} for i in range(n)]
    elif type(parsed) is tuple and parsed and all(len(getattr(c, "shape", ())) and c.shape[0] == n for c in parsed):
        # A tuple of arrays (x, y) is columns, as tf.data's unbatch() splits it: its length
        # is no record count (a group of 2 records gave x and y as the two records).
        return [tuple(c[i] for c in parsed) for i in range(n)]
    elif _rows(parsed) == n:
        return [_row(parsed, i) for i in range(n)]
    if n == 1:
        return [parsed]
    return [unbatch(parse([r]), 1, parse, [r])[0] for r in records]


def _rows(value):
    """How many records a batch value holds by position: a RaggedValue's rows, a sequence's
    items; a SparseTensorValue's (not its three fields) only for one record, as a batch's
    dense shape is its widest record's (those records are parsed one by one); else None."""
    codec = _codec or _load_codec()
    if isinstance(value, codec.SparseTensorValue):
        return 1 if [int(d) for d in value.dense_shape[:1]] == [1] else None
    return len(value) if hasattr(value, "__len__") else None


def _row(value, i):
    """Record i's part of a batch value, as parse_single_example gives it: a sparse value
    less its batch dimension, a ragged one its row's values."""
    codec = _codec or _load_codec()
    if isinstance(value, codec.SparseTensorValue):  # the one record of its batch
        return codec.SparseTensorValue(np.asarray(value.indices)[:, 1:], value.values, value.dense_shape[1:])
    if isinstance(value, codec.RaggedValue):
        return _values(value.values, value.row_splits[i], value.row_splits[i + 1])
    return value[i]


def _values(values, start, end):
    """values[start:end], where values may be a RaggedValue (more ragged levels)."""
    if isinstance(values, (_codec or _load_codec()).RaggedValue):
        splits = values.row_splits[start:end + 1]
        return type(values)(_values(values.values, splits[0], splits[-1]), splits - splits[0])
    return values[start:end]


def _features(parse):
    """The feature spec of a parse step made by make_parse, None for a custom callable."""
    if type(parse) is LocatedParse:
        parse = parse.parse
    return parse.features if type(parse) is ParseFeatures else None
