"""Arrow tables written as tf.train.Examples: ``write_arrow`` and the column conversions
behind it (see ``tfrecord_lite.arrow``, which exports them, for the types it takes)."""

from __future__ import annotations

import os
import re
from math import prod
from typing import Any

import numpy as np
import pyarrow as pa

from ._typing import PathLike
from .encoding import encode_example, encode_examples
from .errors import ArgumentTypeError, FeatureSpecError

# Field metadata of a RawTensorFeature's column: its dtype (numpy's spelling, byte order
# included), so that write_arrow writes the column back as the raw bytes it was read from.
RAW_DTYPE = b"tfrecord_lite.raw_dtype"
_DATASET_ROWS = 65536  # rows per batch taken from a Hugging Face Dataset


def _unsupported(name, type_):
    leaf, depth = type_, 0
    while _is_list(leaf):
        leaf, depth = leaf.value_type, depth + 1
    if depth > 1 and _scalar(_leaf_type(leaf)):
        what = "flatten each row's lists into one (an Example holds one flat list per feature), or drop the column"
    elif pa.types.is_temporal(leaf):
        ints = "int32 (days since the epoch)" if pa.types.is_date32(leaf) else "int64 (units since the epoch)"
        what = f"cast it to numbers or text: table.cast(...) with {name!r} as {ints} or string, or drop the column"
    elif pa.types.is_decimal(leaf):
        what = f"cast it to numbers or text: table.cast(...) with {name!r} as float64 or string, or drop the column"
    elif pa.types.is_struct(leaf):
        what = f"table.flatten() makes a column of each of its fields ({name}.<field>), or drop the column"
    else:
        what = "cast it to numbers, strings or binary, or lists of those (e.g. table.cast(...)), or drop the column"
    return FeatureSpecError(f"column {name!r}: Arrow type {type_} cannot be held by a tf.train.Example", hint=what)


def _leaf(name, arr: pa.Array):
    """(numpy array or list of bytes, values per item): the values under any fixed-size
    lists, flattened, checked to hold no nulls."""
    size = 1
    while True:
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if arr.null_count:  # at every level: .values drops a null item's mask, not its values
            raise FeatureSpecError(f"column {name!r}: a list holds a null value, which an Example cannot hold",
                                   hint="fill or drop the nulls inside the lists (pyarrow.compute.fill_null)")
        if not pa.types.is_fixed_size_list(arr.type):
            break
        k = arr.type.list_size
        arr = arr.values.slice(arr.offset * k, len(arr) * k)
        size *= k
    t = arr.type
    if _numeric(t):
        return arr.to_numpy(zero_copy_only=False), size
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arr.to_pylist(), size
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return [v.encode() for v in arr.to_pylist()], size
    raise _unsupported(name, t)


def _encodable(name, arr: pa.Array):
    """The column as encode_examples takes it: an (n, k) numeric array, or one value per row
    (a list of bytes, or a list of arrays / bytes lists); null rows hold a placeholder.
    Extension columns stored as lists (Arrow's and Ray's fixed-shape tensors: each row's
    values flattened, as an Example holds a shaped array) are written as that storage, in
    row-major order of the logical shape; other extension types (Python objects, ragged
    tensors) are refused by name."""
    if _stored(arr.type) is not arr.type:
        arr = _row_major(arr)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    n = len(arr)
    if _valueless(arr.type):  # list<null>: each row [] or null
        import pyarrow.compute as pc

        if pc.sum(pc.list_value_length(arr)).as_py():
            raise FeatureSpecError(f"column {name!r}: a list holds a null value, which an Example cannot hold",
                                   hint="fill or drop the nulls inside the lists (pyarrow.compute.fill_null)")
        return [[]] * n
    if arr.null_count and not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        arr = _fill_nulls(name, arr)
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        if arr.null_count:
            import pyarrow.compute as pc  # 150 ms to import: only here

            # A null row's slot may hold anything, nulls included: only the other rows' values
            # are taken (and checked).
            lengths = pc.list_value_length(arr).fill_null(0).to_numpy()
            leaf = pc.list_flatten(arr)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
        else:
            offsets = arr.offsets.to_numpy()
            first = int(offsets[0]) if n else 0
            leaf = arr.values.slice(first, int(offsets[-1]) - first if n else 0)
            offsets = offsets - first
        values, size = _leaf(name, leaf)
        widths = np.diff(offsets)
        if isinstance(values, np.ndarray) and n and (widths == widths[0]).all():
            # every row as long (a tensor column's storage): one (n, k) array, not n arrays
            return values.reshape(n, int(widths[0]) * size)
        return _rows(values, (offsets * size).tolist())
    values, size = _leaf(name, arr)
    if isinstance(values, np.ndarray):
        return values.reshape(n, size)
    if size == 1:
        return values
    return _rows(values, range(0, (n + 1) * size, size))


def _row_major(arr: pa.Array) -> pa.Array:
    """An extension column's storage, a fixed-shape tensor's rows in the row-major order of
    their logical shape: Arrow's fixed_shape_tensor may store them permuted (logical
    dimension i is physical dimension permutation[i]; from_numpy_ndarray of a transposed
    array makes one)."""
    storage = arr.storage
    permutation = list(getattr(arr.type, "permutation", None) or ())
    if permutation == sorted(permutation):
        return storage
    shape = arr.type.shape
    size = prod(shape)
    order = np.arange(size).reshape(shape).transpose(permutation).reshape(-1)
    flat = storage.values.slice(storage.offset * size, len(storage) * size)
    take = (np.arange(len(storage))[:, None] * size + order).reshape(-1)
    validity = storage.is_valid().buffers()[1] if storage.null_count else None  # from_arrays' mask: pyarrow 15
    return pa.Array.from_buffers(storage.type, len(storage), [validity], children=[flat.take(pa.array(take))])


def _rows(values, bounds):
    """values cut at bounds, one part per row. An empty row of bytes (a list) is an empty
    object array, which is written as an empty bytes_list, as TensorFlow's typed Feature is,
    where an empty list would be a Feature holding no list."""
    if isinstance(values, np.ndarray):
        return [values[a:b] for a, b in zip(bounds, bounds[1:])]
    empty = np.empty(0, object)
    return [values[a:b] if a != b else empty for a, b in zip(bounds, bounds[1:])]


def _stored(t):
    """t, or the storage type of an extension type stored as lists (fixed-shape tensors)."""
    if isinstance(t, pa.BaseExtensionType):  # Arrow's own (fixed_shape_tensor) and Python-defined (Ray's)
        s = t.storage_type
        if pa.types.is_list(s) or pa.types.is_large_list(s) or pa.types.is_fixed_size_list(s):
            return s
    return t


def _fill_nulls(name, arr):
    """A placeholder in each null row (the rows are encoded again without the feature)."""
    t = arr.type
    leaf = _leaf_type(t)
    if not _scalar(leaf):
        raise _unsupported(name, t)
    zero = pa.array([b"" if pa.types.is_binary(leaf) or pa.types.is_large_binary(leaf)
                     else "" if pa.types.is_string(leaf) or pa.types.is_large_string(leaf)
                     else False if pa.types.is_boolean(leaf) else 0], leaf)
    fill = zero
    for size in _fixed_sizes(t)[::-1]:
        fill = pa.FixedSizeListArray.from_arrays(pa.concat_arrays([fill] * size), size)
    return arr.fill_null(fill[0])


def _fixed_sizes(t):
    sizes = []
    while pa.types.is_fixed_size_list(t):
        sizes.append(t.list_size)
        t = t.value_type
    return sizes


def _batch_records(batch: pa.RecordBatch, deterministic: bool) -> list:
    """The batch's rows as serialized Examples."""
    names = batch.schema.names
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise FeatureSpecError(f"a table written as Examples needs distinct column names, but {twice!r} "
                               "names more than one column", hint="rename or drop one (table.rename_columns)")
    arrays = {}
    unnamed = _pandas_unnamed_index(batch.schema)
    for field, arr in zip(batch.schema, batch.columns):
        if pa.types.is_null(field.type) or field.name in unnamed:
            continue
        if not _holdable(field.type) and not _valueless(field.type):
            raise _unsupported(field.name, field.type)
        arrays[field.name] = _plain(arr)
    columns = {name: _encodable(name, arr) for name, arr in arrays.items()}
    if not columns:
        return [encode_example({})] * batch.num_rows
    raw = set()
    for name, column in columns.items():
        dtype = _marked_dtype(batch.schema.field(name))
        # values no longer of the marked dtype (cast since) are written as numbers
        if (dtype is not None and isinstance(column, np.ndarray) and column.ndim == 2
                and column.dtype == dtype.newbyteorder("=")):
            columns[name] = column.astype(dtype, copy=False)  # in the byte order read
            raw.add(name)
    records = encode_examples(columns, deterministic, raw)
    nulls = [(name, arr.is_null().to_numpy(zero_copy_only=False)) for name, arr in arrays.items() if arr.null_count]
    if nulls:
        any_null = np.logical_or.reduce([mask for _, mask in nulls])
        null_of = dict(nulls)
        for row in np.flatnonzero(any_null).tolist():
            mapping = {name: column[row].tobytes() if name in raw else column[row] for name, column in columns.items()
                       if name not in null_of or not null_of[name][row]}
            records[row] = encode_example(mapping, deterministic)
    return records


def _marked_dtype(field: pa.Field):
    """The dtype, byte order included, a field read from a RawTensorFeature is marked with
    (its RAW_DTYPE metadata), or None: not marked, or marked with no dtype numpy knows."""
    spelled = (field.metadata or {}).get(RAW_DTYPE)
    if spelled is None:
        return None
    try:
        return np.dtype(spelled.decode())
    except (TypeError, ValueError, UnicodeDecodeError):
        return None


def _pandas_unnamed_index(schema) -> set:
    """The columns of an unnamed pandas index (``__index_level_0__``...) that
    Table.from_pandas adds to a frame without a RangeIndex (a filtered one): row labels, not
    data, which pandas' to_dict("records") and Ray leave out too. A named index is data."""
    meta = schema.pandas_metadata if schema.metadata and b"pandas" in schema.metadata else None
    index = (meta or {}).get("index_columns", [])
    return {c for c in index if isinstance(c, str) and re.fullmatch(r"__index_level_\d+__", c)}


def _valueless(t) -> bool:
    """A column of type null or list<null>: no row holds a value. A null row is no feature,
    an empty list a Feature of no kind (as encode_example writes [])."""
    return pa.types.is_null(t) or (_is_list(t) and pa.types.is_null(t.value_type))


def _holdable(t) -> bool:
    """Whether an Example can hold a column of this Arrow type (one Feature per row)."""
    t = _plain_type(_stored(t))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return _scalar(_leaf_type(t))


def _type_test(name):
    return getattr(pa.types, name, lambda t: False)  # view types: pyarrow 16 on


_is_string_view, _is_binary_view = _type_test("is_string_view"), _type_test("is_binary_view")
_is_list_view, _is_large_list_view = _type_test("is_list_view"), _type_test("is_large_list_view")


def _is_list(t) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or _is_list_view(t) or _is_large_list_view(t))


def _plain_type(t):
    """t with string and binary views and fixed-size binary as large_string / large_binary,
    and list views as large lists, at any depth: the types the encoder reads."""
    if _is_string_view(t):
        return pa.large_string()
    if _is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.large_binary()
    if _is_list(t):
        item = _plain_type(t.value_type)
        if pa.types.is_fixed_size_list(t):
            return t if item == t.value_type else pa.list_(item, t.list_size)
        if pa.types.is_list(t):
            return t if item == t.value_type else pa.list_(item)
        return pa.large_list(item)
    return t


def _plain(arr: pa.Array) -> pa.Array:
    """arr as _plain_type's type, dictionaries decoded. List views are rebuilt as lists from
    their logical values (pyarrow's cast of a list view with nulls gives an invalid array)."""
    if _stored(arr.type) is not arr.type:
        return arr  # read as its storage
    if pa.types.is_dictionary(arr.type):  # a null in the dictionary is none in the indices' count
        arr = arr.dictionary_decode()
    target = _plain_type(arr.type)
    if target == arr.type:
        return arr
    if _is_list_view(arr.type) or _is_large_list_view(arr.type):
        import pyarrow.compute as pc

        lengths = pc.list_value_length(arr).fill_null(0).to_numpy()
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64())
        arr = pa.LargeListArray.from_arrays(offsets, _plain(pc.list_flatten(arr)),
                                            mask=arr.is_null() if arr.null_count else None)
    return arr.cast(target)


def _leaf_type(t):
    """The value type under fixed-size lists and a dictionary encoding."""
    while pa.types.is_fixed_size_list(t):
        t = t.value_type
    return t.value_type if pa.types.is_dictionary(t) else t


def _numeric(t) -> bool:
    """Whether values of this Arrow type are numbers or booleans (a numpy array of them)."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _scalar(t) -> bool:
    """Whether a Feature can hold values of this Arrow type: numbers, booleans, bytes, text."""
    return (_numeric(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t))


def _batches(data):
    """The RecordBatches of a Table, a RecordBatch, an iterable (a RecordBatchReader) of
    either, a Hugging Face Dataset, or what has to_batches() (a pyarrow dataset or scanner);
    anything else (a pandas DataFrame iterates its column names) is refused."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        items = [data]
    elif type(data).__module__.split(".")[0] == "datasets" and callable(getattr(data, "iter", None)):
        # Its rows as it holds them: ds.data is the table under the indices that select,
        # filter and shuffle leave, every row of it in its stored order.
        items = data.with_format("arrow").iter(batch_size=_DATASET_ROWS)
    elif callable(getattr(data, "to_batches", None)):  # streamed, a batch at a time
        items = data.to_batches()
    else:
        items = data
    # Only what defines __iter__: iter() also walks an object by __getitem__(0), (1), ...,
    # which raised a bare TypeError from inside (polars' LazyFrame: "not subscriptable").
    items = iter(items) if hasattr(type(items), "__iter__") else iter([data])
    for item in items:
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        elif isinstance(item, pa.RecordBatch):
            yield item
        else:
            what = (type(data).__name__ if item is data
                    else f"an iterable of {type(item).__name__} (a {type(data).__name__})")
            raise ArgumentTypeError(f"write_arrow takes a pyarrow Table, a RecordBatch or an iterable of them, "
                                    f"not {what}",
                                    hint="convert first: pyarrow.Table.from_pandas(df), pyarrow.table(mapping), "
                                         "polars' df.to_arrow() (lazy: .collect() first)")


def write_arrow(table_or_batches: Any, path_or_prefix: PathLike, *, num_shards: int | None = None,
                deterministic: bool = False, **writer_options: Any) -> int:
    """Write the rows of a ``pyarrow.Table``, a RecordBatch, an iterable of RecordBatches, a
    Hugging Face Dataset or what has ``to_batches()`` (a pyarrow dataset or scanner) as
    tf.train.Examples, one Feature per column (see the module docstring for the types);
    returns the number of records written.

    Without num_shards, one file through ``TFRecordWriter(path, **writer_options)``
    (compression, index, fsync, ...); with it, shards ``<prefix>-0000i-of-0000n.tfrecord``
    through ``ShardedWriter(prefix, num_shards, **writer_options)``. deterministic sorts the
    features as ``encode_examples(..., deterministic=True)`` does. The writers are atomic: on
    an error nothing appears under the final names."""
    from .sharded import ShardedWriter
    from .writer import TFRecordWriter

    writer: TFRecordWriter | ShardedWriter
    if num_shards is None:
        writer = TFRecordWriter(path_or_prefix, **writer_options)
    else:
        writer = ShardedWriter(path_or_prefix, num_shards, **writer_options)
    with writer:
        return _write_batches(_batches(table_or_batches), writer, deterministic, {}, path_or_prefix)


def _write_batches(batches, writer, deterministic, kinds, path, of="") -> int:
    """Write the batches' rows; each column is one kind of Feature throughout (check_kinds)."""
    count = 0
    for batch in batches:
        records = _batch_records(batch, deterministic)
        if batch.num_rows:  # an empty block's types may be anything
            check_kinds(kinds, _kinds(batch.schema), f"row {count}{of}", path)
        writer.write_many(records)
        count += len(records)
    return count


def _kinds(schema) -> dict:
    """name -> the kind of Feature its column is written as (int64, float or bytes); columns
    of no values (any kind parses them) and an unnamed pandas index are left out."""
    kinds = {}
    unnamed = _pandas_unnamed_index(schema)
    for field in schema:
        t = _plain_type(_stored(field.type))
        if _valueless(t) or field.name in unnamed:
            continue
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            t = t.value_type
        leaf = _leaf_type(t)
        dtype = _marked_dtype(field)
        try:
            raw = dtype is not None and pa.from_numpy_dtype(dtype.newbyteorder("=")) == leaf
        except pa.ArrowException:  # a dtype Arrow has no type for: not this column's
            raw = False
        kinds[field.name] = ("bytes" if raw or not _numeric(leaf) else
                             "float" if pa.types.is_floating(leaf) else "int64")
    return kinds


def check_kinds(kinds: dict, new: dict, where: str, path) -> None:
    """Refuse a column written as another kind of Feature than before (an int64 column in one
    batch, double in the next: a Ray block typed so): no one spec would parse the records.
    kinds takes in the new columns."""
    for name, kind in new.items():
        before = kinds.setdefault(name, (kind, where))
        if before[0] != kind:
            raise FeatureSpecError(
                f"column {name!r} is {before[0]} values at {before[1]} but {kind} values at {where}: "
                "no one feature spec parses both", path=os.fspath(path),
                hint="cast the column to one type throughout (table.cast(...); Ray: "
                     "ds.map_batches(..., batch_format='pyarrow') casting it)")
