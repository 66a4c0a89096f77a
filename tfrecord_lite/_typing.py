"""Type aliases used in the public signatures (annotations only; nothing here runs)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Mapping, Optional, Union

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Buffer as _Buffer

    # bytes, bytearray, memoryview, mmap, numpy arrays (typed as buffers from Python 3.12 on)
    Buffer = Union[_Buffer, np.ndarray[Any, Any]]
else:
    Buffer = Any

PathLike = Union[str, "os.PathLike[str]"]
# A list of paths, a glob pattern or a directory.
Files = Union[PathLike, Iterable[PathLike]]
# None/"" (raw), "gzip"/"GZIP", "zlib"/"ZLIB"; readers also take "auto".
Compression = Optional[str]
# name -> FixedLenFeature, VarLenFeature, ... (tfrecord_lite.features).
Features = Mapping[str, Any]
# A batch of serialized records: a list of bytes-likes or a RecordBatch.
Records = Iterable[Buffer]
# parsed batch -> anything, replacing parse_example in datasets.
ParseFn = Callable[[Any], Any]
# fsspec options for URLs (s3://, gs://, memory://, ...): credentials, endpoints.
StorageOptions = Optional[Mapping[str, Any]]
# True/False, or None for "when stderr is a terminal" (tfrecord_lite.progress).
Progress = Optional[bool]

__all__ = ["Buffer", "PathLike", "Files", "Compression", "Features", "Records", "ParseFn", "Progress", "StorageOptions",
           "BinaryIO"]
