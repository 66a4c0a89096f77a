"""tfrecord_lite: fast TFRecord reading and writing for Python, without TensorFlow.

Public names live here; ``implementation`` says whether the compiled core ("cython") or
its pure-Python twin ("python") is active.
"""

from typing import TYPE_CHECKING

from . import _native, encoding, errors, example, features
from ._typing import Buffer
from .dataset import TFRecordDataset
from .export import to_npy, to_numpy
from .errors import *  # noqa: F403 - each of these modules' __all__ is public as a whole
from .encoding import *  # noqa: F403
from .example import *  # noqa: F403
from .features import *  # noqa: F403
from .index import build_index
from .random_access import IndexedDataset, TFRecordFile
from .ops import merge, split
from .batch import RecordBatch
from .reader import TFRecordReader
from .memory import release_memory, tune_malloc
from .sharded import ShardedWriter, ShardInfo, write_parallel
from .writer import TFRecordWriter

from ._version import __version__  # noqa: E402

__all__ = [
    # files
    "TFRecordReader",
    "RecordBatch",
    "TFRecordWriter",
    "crc32c",
    "masked_crc32c",
    "implementation",
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
    # process memory
    "release_memory",
    "tune_malloc",
]
__all__ += example.__all__
__all__ += encoding.__all__
__all__ += features.__all__
__all__ += errors.__all__


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC32C (Castagnoli) of a bytes-like object, optionally continuing from value."""
    return _native.framing.crc32c(data, value)


def masked_crc32c(data: Buffer) -> int:
    """TFRecord's masked CRC32C of a bytes-like object."""
    return _native.framing.masked_crc32c(data)


implementation: str  # "cython" or "python", looked up when read (tests switch it)

if not TYPE_CHECKING:  # hidden from type checkers, which would accept any attribute
    def __getattr__(name):
        if name == "implementation":
            return _native.implementation
        raise AttributeError(f"module 'tfrecord_lite' has no attribute {name!r}")
