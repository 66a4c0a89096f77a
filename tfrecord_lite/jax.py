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
from .errors import ArgumentTypeError, InvalidArgumentError
from .example import RaggedValue, SparseTensorValue, native_order

__all__ = ["device_put"]

_DROP = object()  # marks a value that bytes="drop" leaves out


def device_put(batch: Any, device: Any = None, *, bytes: str = "host") -> Any:
    """``batch`` with its numeric arrays on ``device`` (jax's default device when None).
    Without ``jax_enable_x64``, JAX keeps 64-bit integers as 32-bit ones: an int64 array with
    a value that does not fit is refused (InvalidArgumentError naming the feature) rather
    than wrapped.

    batch: a parsed batch or example (dict of arrays, SparseTensorValue, RaggedValue), a
    sequence example's (context, feature_lists, lengths), or a list or tuple of those.
    bytes: "host" keeps bytes values (object arrays, bytes, lists of bytes) as they are;
    "drop" leaves them out (a dict loses the key; a sparse or ragged feature of bytes goes
    whole; a named tuple's field becomes None)."""
    if bytes not in ("host", "drop"):
        raise InvalidArgumentError(f"bytes must be 'host' or 'drop', not {bytes!r}",
                                   hint="'host' keeps bytes features as NumPy object arrays, 'drop' leaves them out")
    import jax

    x64 = jax.config.read("jax_enable_x64")

    def put(value, name):
        if not x64:
            _check_32_bits(value, name)
        try:
            return jax.device_put(native_order(value), device)
        except (TypeError, ValueError) as exc:  # JAX's own errors name no feature
            raise _put_error(exc, name, device) from exc

    out = _put(batch, put, bytes == "drop", None)
    return None if out is _DROP else out


def _put(value, put, drop, name):
    """value with its numeric arrays put; name: the feature (dict key) it belongs to."""
    if isinstance(value, dict):
        moved = {key: _put(v, put, drop, key) for key, v in value.items()}
        return {key: v for key, v in moved.items() if v is not _DROP}
    if isinstance(value, SparseTensorValue):
        if _is_bytes(value.values):
            return _DROP if drop else value._replace(indices=put(value.indices, name),
                                                     dense_shape=put(value.dense_shape, name))
        return SparseTensorValue(*(put(part, name) for part in value))
    if isinstance(value, RaggedValue):
        values = _put(value.values, put, drop, name)
        return _DROP if values is _DROP else RaggedValue(values, put(value.row_splits, name))
    if isinstance(value, np.ndarray) and not _is_bytes(value):
        return put(value, name)
    if _is_bytes(value):
        return _DROP if drop else value
    if isinstance(value, (list, tuple)):
        moved = [_put(v, put, drop, name) for v in value]
        if hasattr(type(value), "_fields"):  # a named tuple: its fields, a dropped one as None
            return type(value)(*(None if v is _DROP else v for v in moved))
        return type(value)(v for v in moved if v is not _DROP)
    return put(value, name)  # scalars and anything else jax takes


def _put_error(exc, name, device):
    """exc, raised by jax.device_put for feature name, as an error that names it."""
    where = f"feature {name!r}" if name is not None else "a value"
    if isinstance(exc, TypeError):
        return ArgumentTypeError(f"{where} cannot go to a JAX device: {exc}",
                                 hint="JAX takes numeric arrays only: convert the feature or leave it out")
    import jax

    hint = None
    if isinstance(device, jax.sharding.Sharding):
        hint = ("a sharding that splits the batch needs every array's first dimension to divide among its "
                "devices; the parts of a sparse or ragged feature (indices, values, row_splits) are not "
                "batch-sized: put those features on one device, or pad them into a FixedLenFeature")
    target = "the default device" if device is None else device
    return InvalidArgumentError(f"{where} cannot go to {target}: {exc}", hint=hint)


def _check_32_bits(value, name) -> None:
    """Refuse 64-bit integers that do not fit in 32 bits: without jax_enable_x64, JAX makes
    int32 of an int64 array silently, wrapping such values (a millisecond timestamp, a hashed
    id), and Example integers are all int64."""
    if not isinstance(value, (np.ndarray, np.generic)) or value.dtype.kind not in "iu" \
            or value.dtype.itemsize != 8 or not value.size:
        return  # a NumPy scalar too: parse_single_example's int64 feature of shape []
    small = np.iinfo(np.int32 if value.dtype.kind == "i" else np.uint32)
    low, high = value.min(), value.max()
    if low < small.min or high > small.max:
        where = f"feature {name!r}" if name is not None else "an array"
        raise InvalidArgumentError(
            f"{where} holds {value.dtype} values outside {small.dtype}'s range ({high if high > small.max else low}), "
            f"which JAX without 64-bit mode would wrap silently",
            hint='enable it (jax.config.update("jax_enable_x64", True)) or map the feature to smaller values '
                 "before device_put")


def _is_bytes(value) -> bool:
    """bytes, an object array or a BytesColumn (parse_example's bytes features), or a
    RecordBatch or list of bytes (raw records)."""
    if isinstance(value, (bytes, bytearray, memoryview, str, BytesColumn, RecordBatch)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.hasobject or value.dtype.kind in "SUV"
    return isinstance(value, list) and bool(value) and all(isinstance(v, (bytes, bytearray)) for v in value)
