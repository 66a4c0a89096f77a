"""tfrecord_lite: fast TFRecord reading and writing for Python, without TensorFlow.

Public names live here; ``implementation`` says whether the compiled core ("cython") or
its pure-Python twin ("python") is active.
"""

from . import _native, errors
from .dataset import TFRecordDataset, to_npy, to_numpy
from .errors import *  # noqa: F403 - the whole hierarchy is public
from .example import (
    RaggedValue,
    SparseTensorValue,
    decode_example,
    decode_examples,
    encode_example,
    encode_examples,
    encode_sequence_example,
    parse_example,
    parse_sequence_example,
    parse_single_example,
    parse_single_sequence_example,
)
from .features import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    RawTensorFeature,
    Schema,
    SparseFeature,
    VarLenFeature,
    infer_schema,
)
from .index import IndexedDataset, TFRecordFile, build_index
from .ops import merge, split
from .reader import TFRecordReader
from .sharded import ShardedWriter, ShardInfo, write_parallel
from .writer import TFRecordWriter

__version__ = "0.1.0"

__all__ = [
    # files
    "TFRecordReader",
    "TFRecordWriter",
    "crc32c",
    "masked_crc32c",
    "implementation",
    # Example codec
    "FixedLenFeature",
    "VarLenFeature",
    "RaggedFeature",
    "SparseFeature",
    "FixedLenSequenceFeature",
    "RawTensorFeature",
    "Schema",
    "infer_schema",
    "SparseTensorValue",
    "RaggedValue",
    "parse_example",
    "parse_single_example",
    "parse_sequence_example",
    "parse_single_sequence_example",
    "decode_example",
    "decode_examples",
    "encode_example",
    "encode_examples",
    "encode_sequence_example",
    # many files
    "TFRecordDataset",
    "TFRecordFile",
    "IndexedDataset",
    "build_index",
    "to_numpy",
    "to_npy",
    # writing at scale
    "ShardedWriter",
    "ShardInfo",
    "write_parallel",
    "merge",
    "split",
] + errors.__all__


def crc32c(data, value: int = 0) -> int:
    """CRC32C (Castagnoli) of a bytes-like object, optionally continuing from value."""
    return _native.framing.crc32c(data, value)


def masked_crc32c(data) -> int:
    """TFRecord's masked CRC32C of a bytes-like object."""
    return _native.framing.masked_crc32c(data)


def __getattr__(name):
    if name == "implementation":
        return _native.implementation
    raise AttributeError(f"module 'tfrecord_lite' has no attribute {name!r}")
