"""Apache Arrow in and out: parsed Examples as ``pyarrow.RecordBatch`` / ``Table``, and
Arrow tables written as TFRecord files of Examples. The only module that imports pyarrow
(the ``arrow`` extra).

Reading maps a feature spec to Arrow types (``arrow_schema``):

=============================================  ================================================
spec                                           Arrow type
=============================================  ================================================
FixedLenFeature, shape ()                      float32 / int64 / large_binary, never null
FixedLenFeature, shape (a, b, ...)             fixed_size_list<...>[b] nested in ...[a]
VarLenFeature, RaggedFeature                   large_list<float32 / int64 / large_binary>
FixedLenSequenceFeature (allow_missing=True)   large_list<fixed_size_list<...>[shape]> (items)
RawTensorFeature                               fixed_size_list of its numpy dtype, as shaped
                                               (native byte order; bools packed into bits)
=============================================  ================================================

A RawTensorFeature's field has the metadata ``RAW_DTYPE``: its dtype, byte order included,
by which ``write_arrow`` writes the column back as the raw bytes it was read from.

Lists are always ``large_list`` and bytes always ``large_binary`` (64-bit offsets): the core
produces int64 offsets, so bytes values reach Arrow without a copy and no column is limited
to 2 GiB. A FixedLenFeature takes its default where a record lacks it, as in
``parse_example``; a list column is null where the record lacks the key and ``[]`` where it
holds an empty list. SequenceExamples go through ``sequence_to_arrow``: context features as
above, each sequence feature a ``large_list`` of steps. SparseFeature has no Arrow form (read
its index and value keys as VarLenFeature) and raises FeatureSpecError.

Writing (``write_arrow``) takes numeric, bool, binary and string columns (views and
fixed-size binary too), fixed-size and variable lists of them (list views too; dictionary
columns are decoded first) and fixed-shape tensors (each row's values flattened, in the
order of its logical shape), one Feature per column and row (a column marked ``RAW_DTYPE``,
and of that dtype still, as one bytes value of each row's raw data); a null row omits the feature
from that record, and a column of type null from every record. An empty list of a column of
type list<null> (Ray types a block's empty lists so) is a Feature of no kind, which parses as
an empty list of any type. The columns of an unnamed pandas index (``__index_level_0__``,
which ``Table.from_pandas`` adds for a filtered or sorted frame) are row labels, not written.
A column is one kind of Feature in every batch (int64 for integers and bools, float, bytes):
one that is int64 in a batch and double or text in another is refused (``check_kinds``), as
no one feature spec would parse the records.
The records are byte-identical to TensorFlow's Examples of typed Features (``bytes_list``,
``float_list``, ``int64_list``) of the same values.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from math import prod
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from . import example as _ex
from .encoding import encode_example, encode_examples
from ._typing import Features, Files, PathLike, Progress, Records
from .batch import RecordBatch, parse_in_order
from .dataset import TFRecordDataset
from .files import resolve_files
from .reader import TFRecordReader
from .errors import ArgumentTypeError, FeatureSpecError, InvalidArgumentError
from .features import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    RawTensorFeature,
    SequenceSchema,
    SparseFeature,
    VarLenFeature,
    check_spec_mapping,
    infer_schema,
)

__all__ = ["RAW_DTYPE", "arrow_schema", "to_arrow", "sequence_to_arrow", "iter_batches", "read_table", "write_arrow",
           "write_parquet"]

_VALUE_TYPES = {"float32": pa.float32(), "int64": pa.int64(), "string": pa.large_binary()}
_READ_BATCH = 65536  # records per RecordBatch that read_table asks for
# Field metadata of a RawTensorFeature's column: its dtype (numpy's spelling, byte order
# included), so that write_arrow writes the column back as the raw bytes it was read from.
RAW_DTYPE = b"tfrecord_lite.raw_dtype"


def _fixed_type(value_type, shape):
    for dim in reversed(shape):
        value_type = pa.list_(value_type, dim)
    return value_type


def _check_spec(name, spec):
    if isinstance(spec, SparseFeature):
        raise FeatureSpecError(f"feature {name!r}: SparseFeature has no Arrow form",
                               hint=f"read {spec.index_key!r} and {spec.value_key!r} as VarLenFeature "
                               "columns instead")
    if not isinstance(spec, (FixedLenFeature, VarLenFeature, RaggedFeature, FixedLenSequenceFeature,
                             RawTensorFeature)):
        raise FeatureSpecError(f"feature {name!r}: {type(spec).__name__} is not a feature spec Arrow output takes")


def _field(name, spec) -> pa.Field:
    _check_spec(name, spec)
    if isinstance(spec, RawTensorFeature):
        try:
            value_type = pa.from_numpy_dtype(spec.dtype)
        except (pa.ArrowNotImplementedError, NotImplementedError, TypeError):
            value_type = None
        if value_type is None or not pa.types.is_primitive(value_type):  # 'S4' maps to binary, say
            raise FeatureSpecError(f"feature {name!r}: RawTensorFeature dtype {spec.dtype} has no Arrow type",
                                   hint="use a numeric or bool dtype, or read the value with "
                                        "FixedLenFeature([], bytes)")
        return pa.field(name, _fixed_type(value_type, spec.shape), nullable=False,
                        metadata={RAW_DTYPE: spec.dtype.str})
    value_type = _VALUE_TYPES[spec.dtype]
    if isinstance(spec, FixedLenFeature):
        return pa.field(name, _fixed_type(value_type, spec.shape), nullable=False)
    if isinstance(spec, FixedLenSequenceFeature):
        return pa.field(name, pa.large_list(_fixed_type(value_type, spec.shape)))
    return pa.field(name, pa.large_list(value_type))


def arrow_schema(features: Features) -> pa.Schema:
    """The ``pyarrow.Schema`` of ``to_arrow(records, features)`` (see the module docstring)."""
    return pa.schema([_field(name, spec) for name, spec in features.items()])


# -- numpy / BytesColumn -> Arrow, without a copy of the values ----------------------------

def _flat(values, value_type=None) -> pa.Array:
    """A flat primitive or large_binary array over the values' buffers."""
    if isinstance(values, _ex.BytesColumn):
        offsets = np.ascontiguousarray(values.offsets)
        return pa.Array.from_buffers(pa.large_binary(), values.size,
                                     [None, pa.py_buffer(offsets), pa.py_buffer(values.values)])
    if values.dtype == np.bool_:  # Arrow's booleans are bits: packed, a copy
        return pa.array(values.reshape(-1), pa.bool_())
    values = _ex.native_order(values)  # a RawTensorFeature's byte order as written: Arrow's is native
    if not values.flags.c_contiguous:
        values = np.ascontiguousarray(values)
    value_type = value_type or pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(value_type, values.size, [None, pa.py_buffer(values)])


def _nest(flat: pa.Array, dims, rows: int) -> pa.Array:
    """Fixed-size lists of flat's values, dims innermost first, rows lists at the top."""
    for i, dim in enumerate(dims):
        if dim:
            flat = pa.FixedSizeListArray.from_arrays(flat, dim)
        else:  # lists of no values: their number is not len(flat) / dim
            flat = pa.Array.from_buffers(pa.list_(flat.type, 0), rows * prod(dims[i + 1:]), [None],
                                         children=[flat])
    return flat


def _lists(flat: pa.Array, counts, absent) -> pa.Array:
    offsets = _ex._splits(counts)
    mask = pa.array(absent) if absent.any() else None
    return pa.LargeListArray.from_arrays(pa.array(offsets), flat, mask=mask)


def _column_array(col, spec, value_type) -> pa.Array:
    if isinstance(spec, FixedLenFeature):
        return _nest(_flat(_ex._dense(col, spec), value_type), spec.shape[::-1], col.batch)
    if isinstance(spec, RawTensorFeature):
        return _nest(_flat(_ex._raw(col, spec), value_type), spec.shape[::-1], col.batch)
    absent = col.kinds == _ex.ABSENT
    if isinstance(spec, FixedLenSequenceFeature):
        values, _, items, _ = _ex._items(col, spec)
        return _lists(_nest(_flat(values, value_type), spec.shape[::-1], int(items.sum())), items, absent)
    values, counts, _ = col.typed(spec.dtype)
    return _lists(_flat(values, value_type), counts, absent)


def _value_type(t):
    while pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return t


_LAYOUTS: dict = {}  # parse plan -> (schema, per output: value type, dims innermost first)


def _layout(plan, features):
    layout = _LAYOUTS.get(plan)
    if layout is None:
        schema = arrow_schema(features)
        layout = schema, [(_value_type(field.type), tuple(reversed(getattr(spec, "shape", ()))))
                          for field, spec in zip(schema, features.values())]
        if len(_LAYOUTS) >= 64:
            _LAYOUTS.clear()
        _LAYOUTS[plan] = layout
    return layout


def _arrays(plan, columns, types, batch) -> list:
    """One Arrow array per output of an Example (or context) plan. The common case, a
    FixedLenFeature every record holds, is inlined: it runs once per column of every batch."""
    arrays = []
    from_buffers, py_buffer = pa.Array.from_buffers, pa.py_buffer
    for (name, spec, index, uniform), (value_type, dims) in zip(plan.outputs, types):
        raw = columns[index]
        if uniform is not None and raw.uniform == uniform[0]:  # every record has it: no per-row work
            values = raw[uniform[1]]
            if type(values) is np.ndarray:  # from the core: 1-D and contiguous
                array = from_buffers(value_type, values.size, [None, py_buffer(values)], 0)
            else:
                array = _flat(values)
            array = _nest(array, dims, batch)
        else:
            array = _column_array(_ex._Column(plan.keys[index], raw, batch), spec, value_type)
        arrays.append(array)
    return arrays


def _record_batch(arrays, schema, rows) -> pa.RecordBatch:
    """A RecordBatch of rows records: from_arrays counts the rows of its first array, and
    a spec of no features has none."""
    if not arrays:
        return pa.RecordBatch.from_struct_array(pa.StructArray.from_buffers(pa.struct([]), rows, [None]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _no_sparse(features):
    for name, spec in features.items():
        if isinstance(spec, SparseFeature):
            _check_spec(name, spec)


def to_arrow(records: Records, features: Features) -> pa.RecordBatch:
    """Parse a batch of serialized Examples into a ``pyarrow.RecordBatch`` with the schema
    ``arrow_schema(features)``: the same checks and defaults as ``parse_example``, values
    taken from the core's buffers (bytes as one values buffer plus offsets) without a Python
    object per value. Also ``parse_example(records, features, output="arrow")``."""
    records = _ex._records(records)
    plan = _ex._plan(features, _ex._EXAMPLE_SPECS, "parse_example")
    _no_sparse(features)
    schema, types = _layout(plan, features)
    def parse(records):
        columns, _ = _ex._decode(records, plan, bytes_output="column")
        return _record_batch(_arrays(plan, columns, types, len(records)), schema, len(records))
    return parse_in_order(parse, records)


# -- SequenceExample -----------------------------------------------------------------------

def _step_field(name, spec) -> pa.Field:
    """A sequence feature: a list of steps, each a fixed-size item or a list of values."""
    if not isinstance(spec, (FixedLenSequenceFeature, VarLenFeature, RaggedFeature)):
        raise FeatureSpecError(f"feature {name!r}: {type(spec).__name__} is not a sequence feature spec")
    value_type = _VALUE_TYPES[spec.dtype]
    step = (_fixed_type(value_type, spec.shape) if isinstance(spec, FixedLenSequenceFeature)
            else pa.large_list(value_type))
    return pa.field(name, pa.large_list(step))


def _steps_array(col, spec, value_type) -> pa.Array:
    values, counts, _ = col.typed(spec.dtype)
    absent = col.steps < 0
    if isinstance(spec, FixedLenSequenceFeature):
        if not spec.allow_missing:
            col.required(~absent, "feature list is required but could not be found")
        stride = prod(spec.shape)
        bad = np.flatnonzero(counts != stride)
        if bad.size:
            col.fail(f"step has {counts[bad[0]]} values but the shape {list(spec.shape)} needs {stride}", bad[0])
        steps = _nest(_flat(values, value_type), spec.shape[::-1], len(counts))
    else:
        steps = _lists(_flat(values, value_type), counts, np.zeros(len(counts), dtype=bool))
    return _lists(steps, np.maximum(col.steps, 0), absent)


def sequence_to_arrow(records: Records, context_features: Features | None = None,
                      sequence_features: Features | None = None) -> pa.RecordBatch:
    """Parse a batch of serialized SequenceExamples into one ``pyarrow.RecordBatch``: the
    context features as ``to_arrow`` gives them, then each sequence feature as a
    ``large_list`` of steps (null where the record lacks the feature list), a step being a
    (nested) ``fixed_size_list`` for FixedLenSequenceFeature and a ``large_list`` of values
    for VarLenFeature / RaggedFeature. Checks as in ``parse_sequence_example``."""
    context_features = context_features or {}
    sequence_features = sequence_features or {}
    records = _ex._records(records)
    plan = _ex._plan(context_features, _ex._CONTEXT_SPECS, "context_features")
    seq_plan = _ex._plan(sequence_features, tuple(_ex._STEP_ROWS), "sequence_features")
    both = sorted(set(context_features) & set(sequence_features))
    if both:
        raise FeatureSpecError(f"feature {both[0]!r} is both a context and a sequence feature",
                               hint="give one of them another name")
    _no_sparse(context_features)
    schema, types = _layout(plan, context_features)
    def parse(records):
        columns, seq_columns = _ex._decode(records, plan, seq_plan, "column")
        batch = len(records)
        arrays = _arrays(plan, columns, types, batch)
        fields = list(schema)
        for name, spec, index, _ in seq_plan.outputs:
            field = _step_field(name, spec)
            col = _ex._Column(seq_plan.keys[index], seq_columns[index], batch)
            arrays.append(_steps_array(col, spec, _value_type(field.type)))
            fields.append(field)
        return _record_batch(arrays, pa.schema(fields), batch)
    return parse_in_order(parse, records)


_SAMPLE = 1000  # records infer_schema looks at when read_table is given no spec
_FILE_THREADS = 16  # files opened at once for a sample or a plan: each is a few requests to a store


def _in_order(fn, items):
    """fn(x) for x in items, in order, up to _FILE_THREADS at a time: thousands of remote
    files are not opened one request after another. The first failure in item order is
    raised; closing the generator early cancels the calls not yet started."""
    if len(items) < 2:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(min(_FILE_THREADS, len(items)), thread_name_prefix="tfrecord_lite-files") as pool:
        futures = [pool.submit(fn, x) for x in items]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def _sample(paths, n=_SAMPLE, compression="auto", check_crc=True, storage_options=None,
            on_corrupt="raise") -> RecordBatch:
    """The first n records of the files, from as many files as it takes (an empty first
    file must not leave an inferred spec empty): a RecordBatch, so that an error parsing
    them names the record's file. Damage is handled as the read that follows handles it.
    When the first file falls short, the others are read concurrently; a file after those
    that complete the sample does not count, whatever its reading raised."""
    def head(path, n):
        with TFRecordReader(path, compression, check_crc, on_corrupt, storage_options=storage_options) as reader:
            return reader.head(n)

    parts = [head(paths[0], n)] if paths else []
    left = n - sum(map(len, parts))
    if left > 0:
        rest = _in_order(lambda path, most=left: head(path, most), paths[1:])
        try:
            for part in rest:
                parts.append(part[:left])
                left -= len(parts[-1])
                if left <= 0:
                    break
        finally:
            rest.close()
    return RecordBatch.concat(parts)


def _names(columns) -> list | None:
    """columns as a list of names; one str is refused, not read as its characters."""
    if isinstance(columns, (str, bytes)):
        raise ArgumentTypeError(f"columns must be a list of names, not one {type(columns).__name__}",
                                hint=f"pass [{columns!r}]")
    return None if columns is None else list(columns)


def _inferred(records: RecordBatch, reader="read_table and to-parquet"):
    """infer_schema of records read from files, refusing SequenceExamples, which Arrow
    tables do not hold; reader names the caller in that error."""
    features = infer_schema(records, sample=len(records))
    if isinstance(features, SequenceSchema):
        hint = ("parse them with tfrecord_lite.arrow.sequence_to_arrow(records, context_features, "
                "sequence_features) (infer_schema(path) gives the specs)")
        if reader.startswith("read_tfrecords"):
            hint = ("read them with raw=True and parse each batch: ds.map_batches(lambda b: pyarrow.Table."
                    "from_batches([sequence_to_arrow(b['record'], context_features, sequence_features)]), "
                    "batch_format='pyarrow'), sequence_to_arrow from tfrecord_lite.arrow")
        raise FeatureSpecError(f"the records are SequenceExamples (with feature lists), which {reader} "
                               "cannot read", path=records.locate(0)[0], hint=hint)
    return features


def _spec_for(paths, features, columns, dataset_options=None, records=None, reader="read_table and to-parquet"):
    """The spec to read: features (inferred from records, by default the files' first
    records read with the dataset's options, when None), cut to columns."""
    columns = _names(columns)
    if features is None:
        if records is None:
            options = dataset_options or {}
            records = _sample(paths, **{k: options[k] for k in ("compression", "check_crc", "storage_options",
                                                                "on_corrupt") if k in options})
        features = _inferred(records, reader)
    check_spec_mapping(features)
    if columns is not None:
        missing = [c for c in columns if c not in features]
        if missing:
            raise FeatureSpecError(f"column {missing[0]!r} is not in the features ({', '.join(features)})",
                                   hint="pick columns among the spec's names")
        features = {c: features[c] for c in columns}
    return features


def iter_batches(files: Files, features: Features | None = None, columns: Sequence[str] | None = None,
                 **dataset_options: Any) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
    """(schema, iterator of RecordBatches) of files, as read_table reads them."""
    storage_options = dataset_options.get("storage_options")
    paths = resolve_files(files, storage_options)
    features = _spec_for(paths, features, columns, dataset_options)
    dataset_options.setdefault("batch_size", _READ_BATCH)
    batches = TFRecordDataset(paths, features, output="arrow", **dataset_options) if paths else iter(())
    return arrow_schema(features), batches


def read_table(files: Files, features: Features | None = None, columns: Sequence[str] | None = None,
               **dataset_options: Any) -> pa.Table:
    """Every record of files (paths, a glob, a directory) as one ``pyarrow.Table``.

    features: the spec; None infers one with ``infer_schema`` from the first 1,000 records
        of the files, in order (pass a spec when later records differ).
    columns: names to keep (in this order); others are not parsed.
    dataset_options: passed to ``TFRecordDataset`` (num_threads, shard, compression, ...;
        batch_size sets the records per RecordBatch, 65,536 by default).
    """
    schema, batches = iter_batches(files, features, columns, **dataset_options)
    return pa.Table.from_batches(list(batches), schema=schema)


def write_parquet(files: Files, path: PathLike, features: Features | None = None, columns: Sequence[str] | None = None,
                  *, codec: str = "snappy", progress: Progress = None,
                  **dataset_options: Any) -> int:
    """Convert TFRecord files to one Parquet file, a RecordBatch at a time (memory stays
    about one batch); arguments as in read_table, codec is Parquet's compression. The file
    appears under ``path`` (a local path or an fsspec URL) only when complete. Returns the
    number of rows written."""
    import pyarrow.parquet as pq

    from . import fs as _fs
    from .progress import progress as progress_bar

    _check_codec(pq, codec)
    schema, batches = iter_batches(files, features, columns, **dataset_options)
    out = _fs.open_output(path, dataset_options.get("storage_options"))
    rows = 0
    try:
        with progress_bar(desc="to-parquet", enabled=progress) as bar, \
                pq.ParquetWriter(out.file, schema, compression=codec) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
                bar.update(batch.num_rows)
    except BaseException:
        out.discard()
        raise
    out.commit()
    return rows


def _check_codec(pq, codec) -> None:
    """Refuse a codec Parquet does not know ('bz2') or cannot write ('lzo') before anything is
    read: a one-row file is written to memory with it, so whatever fails is the codec."""
    probe = pa.record_batch({"x": [0]})
    try:
        with pq.ParquetWriter(pa.BufferOutputStream(), probe.schema, compression=codec) as writer:
            writer.write_batch(probe)
    except Exception as exc:
        raise InvalidArgumentError(f"Parquet codec {codec!r} cannot be used: {str(exc).rstrip('.')}",
                                   hint="use snappy (the default), zstd, gzip, brotli, lz4 or none") from None


# -- Arrow -> Examples ---------------------------------------------------------------------

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
        dtype = _raw_dtype(batch.schema.field(name), column)
        if dtype is not None:
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


def _raw_dtype(field: pa.Field, column):
    """The dtype a column read from a RawTensorFeature (its field's RAW_DTYPE metadata) is
    written back in, as one bytes value per row, or None: not marked, or its values are no
    longer of that dtype (they are then written as numbers)."""
    spelled = (field.metadata or {}).get(RAW_DTYPE)
    if spelled is None or not isinstance(column, np.ndarray):
        return None
    try:
        dtype = np.dtype(spelled.decode())
    except (TypeError, ValueError, UnicodeDecodeError):
        return None
    return dtype if column.ndim == 2 and column.dtype == dtype.newbyteorder("=") else None


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
        items = data.with_format("arrow").iter(batch_size=_READ_BATCH)
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
        spelled = (field.metadata or {}).get(RAW_DTYPE)
        try:
            raw = spelled is not None and pa.from_numpy_dtype(np.dtype(spelled.decode()).newbyteorder("=")) == leaf
        except (TypeError, ValueError, UnicodeDecodeError, pa.ArrowException):
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
