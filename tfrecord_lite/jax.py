"""JAX helper: move parsed batches to a device. jax is imported here only, on first call,
never by ``import tfrecord_lite``.

``jax.device_put`` refuses a batch that holds bytes features (object arrays: ``Dtype object
is not a valid JAX array type``), and JAX has no string arrays. ``device_put`` here moves every
numeric array, including the components of ``SparseTensorValue`` and ``RaggedValue``, and
keeps bytes (object arrays, ``BytesColumn``, raw ``RecordBatch``) on the host
(``bytes="host"``, the default) or leaves them out (``"drop"``)::

    from tfrecord_lite.jax import device_put

    for batch in TFRecordDataset(files, spec, batch_size=256):
        batch = device_put(batch)        # numeric features are jax.Array on the device
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .batch import RecordBatch
from .bytes_column import BytesColumn
from .errors import InvalidArgumentError
from .example import RaggedValue, SparseTensorValue, native_order

__all__ = ["device_put"]

_DROP = object()  # marks a value that bytes="drop" leaves out


def device_put(batch: Any, device: Any = None, *, bytes: str = "host") -> Any:
    """``batch`` with its numeric arrays on ``device`` (jax's default device when None).

    batch: a parsed batch or example (dict of arrays, SparseTensorValue, RaggedValue), a
    sequence example's (context, feature_lists, lengths), or a list or tuple of those.
    bytes: "host" keeps bytes values (object arrays, bytes, lists of bytes) as they are;
    "drop" leaves them out (a dict loses the key; a sparse or ragged feature of bytes goes
    whole; a named tuple's field becomes None)."""
    if bytes not in ("host", "drop"):
        raise InvalidArgumentError(f"bytes must be 'host' or 'drop', not {bytes!r}",
                                   hint="'host' keeps bytes features as NumPy object arrays, 'drop' leaves them out")
    import jax

    out = _put(batch, lambda a: jax.device_put(native_order(a), device), bytes == "drop")
    return None if out is _DROP else out


def _put(value, put, drop):
    if isinstance(value, dict):
        moved = {key: _put(v, put, drop) for key, v in value.items()}
        return {key: v for key, v in moved.items() if v is not _DROP}
    if isinstance(value, SparseTensorValue):
        if _is_bytes(value.values):
            return _DROP if drop else value._replace(indices=put(value.indices), dense_shape=put(value.dense_shape))
        return SparseTensorValue(*(put(part) for part in value))
    if isinstance(value, RaggedValue):
        values = _put(value.values, put, drop)
        return _DROP if values is _DROP else RaggedValue(values, put(value.row_splits))
    if isinstance(value, np.ndarray) and not _is_bytes(value):
        return put(value)
    if _is_bytes(value):
        return _DROP if drop else value
    if isinstance(value, (list, tuple)):
        moved = [_put(v, put, drop) for v in value]
        if hasattr(type(value), "_fields"):  # a named tuple: its fields, a dropped one as None
            return type(value)(*(None if v is _DROP else v for v in moved))
        return type(value)(v for v in moved if v is not _DROP)
    return put(value)  # scalars and anything else jax takes


def _is_bytes(value) -> bool:
    """bytes, an object array or a BytesColumn (parse_example's bytes features), or a
    RecordBatch or list of bytes (raw records)."""
    if isinstance(value, (bytes, bytearray, memoryview, str, BytesColumn, RecordBatch)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.hasobject or value.dtype.kind in "SUV"
    return isinstance(value, list) and bool(value) and all(isinstance(v, (bytes, bytearray)) for v in value)
