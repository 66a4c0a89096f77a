"""Apache Arrow in and out: parsed Examples as ``pyarrow.RecordBatch`` / ``Table``, and
Arrow tables written as TFRecord files of Examples (``write_arrow``, in ``_arrow_write``).
With that one, the only module that imports pyarrow (the ``arrow`` extra).

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

from concurrent.futures import ThreadPoolExecutor
from math import prod
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from . import example as _ex
from ._typing import Features, Files, PathLike, Progress, Records
from ._arrow_write import RAW_DTYPE, write_arrow
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


def _fixed_type(value_type, shape):
    for dim in reversed(shape):
        value_type = pa.list_(value_type, dim)
    return value_type


def _no_partitions(name, spec):
    if isinstance(spec, RaggedFeature) and spec.partitions:
        raise FeatureSpecError(f"feature {name!r}: RaggedFeature partitions have no Arrow form",
                               hint="parse with output='numpy' for the nested RaggedValue, or read the values "
                                    "and partition features as VarLenFeature columns")


def _check_spec(name, spec):
    _no_partitions(name, spec)
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
    _no_partitions(name, spec)
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
