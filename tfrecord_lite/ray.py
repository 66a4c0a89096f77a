"""Ray Data without TensorFlow: ``read_tfrecords`` (a ``ray.data.Datasource`` producing
Arrow blocks through ``tfrecord_lite.arrow``) and ``write_tfrecords`` (a
``ray.data.Datasink`` writing TF/Beam-named shards atomically). The only module that
imports ray (the ``ray`` extra).

Reading splits the work into read tasks by file and, when there are fewer files than
tasks, splits uncompressed files that have an index sidecar (``path + ".index"``, see
``tfrecord_lite.index``) into runs of whole records of about equal bytes. Each record is
read by exactly one task. ``build_index=True`` writes missing sidecars first (a scan of each
uncompressed file), so that a few large files spread over many tasks. With
``on_corrupt="skip"`` or ``"stop"`` every file is read whole by one task, as
``TFRecordReader`` reads it. Planning, on the driver, looks at up to 16 files at once (size,
first bytes, sidecar: a few requests each on an object store), as does the sample a spec is
inferred from once the first file falls short of it.

Writing gives each write task that has rows one shard (a task of only empty blocks writes
none, as Ray's file datasinks skip them; an empty dataset gets one empty shard, as TF and
Beam write). The task writes it under a hidden staging name
(``.<prefix name>-<write id>-<task index><suffix>``, which globs and directory listings skip),
and when every task has succeeded, ``on_write_complete`` renames the shards, in task
order, to ``<prefix>-00003-of-00016<suffix>``. The count is known only then. If any task
fails or a rename fails, every staging file and every shard already renamed is removed (and
local files those had replaced are put back), so no file appears under a final name unless
the whole write succeeded. A column written as int64 values by one task and float or bytes
by another (Ray types each block on its own) fails the write so, before any rename.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import uuid
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
from ray.data import Datasink, Datasource, ReadTask
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data import extensions as _extensions
from ray.data.extensions import ArrowTensorArray, ArrowVariableShapedTensorType

from . import _native
from . import _arrow_write as _write
from . import arrow as _arrow
from . import fs as _fs
from ._typing import Compression, Features, Files, PathLike, StorageOptions
from .files import resolve_files
from .errors import (ArgumentTypeError, FeatureSpecError, InvalidArgumentError, TFRecordError,
                     TruncatedRecordError)
from .index import build_index as _build_index
from .index import _sidecar, index_path, load_index
from .io import _temp_stem, detect_compression, normalize_compression
from .reader import ON_CORRUPT, TFRecordReader, _read_exact
from .sharded import DEFAULT_SUFFIX, ShardInfo, _check_prefix, shard_path
from ._replaced import drop_kept, keep_replaced, put_back
from .writer import TFRecordWriter, check_index_compression

try:
    from ray.data.extensions import ArrowPythonObjectType
except ImportError:  # older Ray does not store objects it cannot convert as pickles
    ArrowPythonObjectType = ()
# Ray's fixed-shape tensor types: V2 (64-bit offsets) is newer than Ray 2.9
_TENSOR_TYPES = tuple(getattr(_extensions, name) for name in ("ArrowTensorType", "ArrowTensorTypeV2")
                      if hasattr(_extensions, name))

__all__ = ["read_tfrecords", "write_tfrecords", "TFRecordDatasource", "TFRecordDatasink", "RECORD_COLUMN"]

RECORD_COLUMN = "record"  # the one column of raw=True reads
_SAMPLE = 1000  # records read to infer the schema and the size of a record in memory
_BLOCK_BYTES = 64 << 20  # record bytes per output block (Ray's blocks target 128 MiB)
_BLOCK_RECORDS = 65536
_PIECE_BYTES = 32 << 20  # bytes read at once from an index range
_COMPRESSION_GUESS = 4  # uncompressed / compressed bytes assumed for the size estimate
_ROWS_COLUMN = "__bsp_stub"  # holds the rows of a block of no columns: see _TaskReader.block


class TFRecordDatasource(Datasource):
    """TFRecord files as a Ray ``Datasource``; see ``read_tfrecords`` for the arguments."""

    def __init__(self, paths, features=None, *, columns=None, raw=False, compression="auto",
                 check_crc=True, on_corrupt="raise", build_index=False, storage_options=None):
        super().__init__()
        self._projection_map = None
        self.compression = normalize_compression(compression, allow_auto=True)
        self.check_crc = bool(check_crc)
        if on_corrupt not in ON_CORRUPT:
            raise InvalidArgumentError(f"on_corrupt must be one of {ON_CORRUPT}, not {on_corrupt!r}")
        self.on_corrupt = on_corrupt
        self.storage_options = storage_options
        self.raw = bool(raw)
        if self.raw and (features is not None or columns is not None):
            raise InvalidArgumentError("raw=True reads whole records into one column; drop features/columns",
                                       hint="pass raw=True alone, or a feature spec without raw")
        self._on_driver = _driver_node(paths)
        self.paths = resolve_files(paths, storage_options)
        sample = self._sample()
        if not self.raw:
            features = dict(_arrow._spec_for(self.paths, features, columns, records=sample,
                                             reader="read_tfrecords (without raw=True)"))
            _arrow.arrow_schema(features)  # an unsupported spec fails here, not in a task
        self.features = features
        # In-memory bytes per record byte, and the records per block that keep blocks near
        # _BLOCK_BYTES, both from the sample.
        record_bytes = sum(len(r) for r in sample)
        mean = record_bytes / len(sample) if sample else 1
        self.block_records = int(max(1, min(_BLOCK_RECORDS, _BLOCK_BYTES // max(1, mean))))
        self._expansion = (self._reader(features).block(sample).nbytes / record_bytes) if record_bytes else 1.0
        self._files = list(_arrow._in_order(lambda p: self._describe(p, build_index), self.paths))

    # -- planning (on the driver) ----------------------------------------------------------

    def _sample(self):
        """The first _SAMPLE records, from as many files as it takes (some may be empty)."""
        return _arrow._sample(self.paths, _SAMPLE, self.compression, self.check_crc, self.storage_options,
                              self.on_corrupt)

    def _describe(self, path, build_index):
        """(path, size on disk, compression, (record offsets, frame lengths) or None)."""
        size = _fs.size(path, self.storage_options)
        compression = self.compression
        if compression == "auto":  # one small ranged read: a stream would GET the whole object
            head = _read_span(path, 0, min(size, _native.framing.HEADER_BYTES), self.storage_options) if size else b""
            compression = detect_compression(head)
        index = None
        # Records skipped or stopped at are counted by no index, and "stop" ends the whole
        # file: such a read takes each file whole, in one task, as TFRecordReader does.
        if compression is None and self.on_corrupt == "raise":
            sidecar = _sidecar(path)  # None for a presigned URL: scanned by its read
            if sidecar is not None and build_index and not _fs.exists(sidecar, self.storage_options):
                _build_index(path, check_crc=self.check_crc, storage_options=self.storage_options)
            if sidecar is not None and _fs.exists(sidecar, self.storage_options):  # a stale one raises
                index = load_index(path, sidecar, storage_options=self.storage_options)
        return path, size, compression, index

    def _units(self, parallelism):
        """Pieces of work: (path, compression, byte ranges or None for the whole file,
        records or None, bytes). Indexed files are cut into about parallelism pieces of
        the total bytes when there are fewer files than that."""
        total = sum(size for _, size, _, _ in self._files) or 1
        split = len(self._files) < parallelism
        units = []
        for path, size, compression, index in self._files:
            if index is None or not split or len(index[0]) < 2:
                records = None if index is None else len(index[0])
                units.append((path, compression, None, records, size))
                continue
            offsets, lengths = index
            ends = offsets + lengths
            parts = max(1, min(len(offsets), round(parallelism * size / total)))
            # Record k starts part floor(offset_k * parts / size): parts of equal bytes,
            # each a contiguous run of whole records.
            owner = (offsets * parts) // max(1, size)
            cuts = np.flatnonzero(np.diff(owner)) + 1
            for a, b in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(offsets)]])):
                units.append((path, compression, _pieces(offsets[a:b], ends[a:b], int(a)), int(b - a),
                              int(ends[b - 1] - offsets[a])))
        return units

    def estimate_inmemory_data_size(self):
        size = sum(s * (_COMPRESSION_GUESS if c else 1) for _, s, c, _ in self._files)
        return int(size * self._expansion)

    def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
        units = self._units(max(1, parallelism))
        groups = _pack(units, max(1, parallelism))
        features = self._projected()
        schema = self._schema(features)
        read = self._reader(features)
        tasks = []
        for group in groups:
            rows = [u[3] for u in group]
            meta = BlockMetadata(
                num_rows=None if None in rows else sum(rows),
                size_bytes=int(sum(u[4] * (_COMPRESSION_GUESS if u[1] else 1) for u in group) * self._expansion),
                input_files=sorted({u[0] for u in group}),
                exec_stats=None,
            )
            tasks.append(ReadTask(lambda group=group: read(group), meta,
                                  schema=schema, per_task_row_limit=per_task_row_limit))
        return tasks

    @property
    def supports_distributed_reads(self) -> bool:
        return not self._on_driver

    def supports_projection_pushdown(self) -> bool:
        return not self.raw

    def _projected(self):
        columns = self._get_data_columns()
        if self.raw or columns is None:
            return self.features
        return {c: self.features[c] for c in columns if c in self.features}

    def _schema(self, features):
        return pa.schema([(RECORD_COLUMN, pa.large_binary())]) if self.raw else _tensor_schema(features)

    def _reader(self, features):
        return _TaskReader(features, self.raw, self.check_crc, self.on_corrupt, self.storage_options,
                           self.block_records)

    def get_name(self) -> str:
        return "ReadTFRecordLite"


class _TaskReader:
    """What a read task needs (and pickles): never the indexes, only its byte ranges."""

    def __init__(self, features, raw, check_crc, on_corrupt, storage_options, block_records):
        self.features = features
        self.raw = raw
        self.check_crc = check_crc
        self.on_corrupt = on_corrupt
        self.storage_options = storage_options
        self.block_records = block_records
        self.schema = None if raw or not features else _tensor_schema(features)
        self.tensors = {} if self.schema is None else {
            f.name: _tensor_shape(f.type) for f in _arrow.arrow_schema(features) if _tensor_shape(f.type)}

    def block(self, records) -> pa.Table:
        if self.raw:
            batch = pa.RecordBatch.from_arrays([_binary_array(records)], [RECORD_COLUMN])
        elif not self.features:  # no column wanted (count()): rows without parsing
            # A table of no columns loses its rows when pickled: Ray's own readers hold them
            # in a column of nulls under this name, which Ray keeps out of the schema.
            return pa.table({_ROWS_COLUMN: pa.nulls(len(records))})
        else:
            batch = _arrow.to_arrow(records, self.features)
            if self.tensors:
                batch = pa.RecordBatch.from_arrays([_tensors(a, self.tensors[f.name]) if f.name in self.tensors
                                                    else a for f, a in zip(batch.schema, batch.columns)],
                                                   schema=self.schema)
        return pa.Table.from_batches([batch])

    def __call__(self, group):
        for path, compression, pieces, records, size in group:
            if pieces is None:
                got = 0
                with TFRecordReader(path, compression, self.check_crc, self.on_corrupt,
                                    storage_options=self.storage_options) as reader:
                    for batch in reader.record_batches(self.block_records):
                        got += len(batch)
                        yield self.block(batch)
                # A sidecar's count is the task's row count (and count()'s): a wrong one whose
                # frames still tile the file passes load_index's checks.
                if records is not None and got != records:
                    raise _stale(path, 0, size, got, records)
                continue
            for begin, end, count, first in pieces:
                data = _read_span(path, begin, end, self.storage_options)
                got = 0
                try:
                    with TFRecordReader(memoryview(data), None, self.check_crc) as reader:
                        for batch in reader.record_batches(self.block_records):
                            got += len(batch)
                            yield self.block(batch)
                except TFRecordError as exc:  # it names the piece's buffer
                    exc._within(path, begin, first)
                    raise
                if got != count or len(data) != end - begin:
                    raise _stale(path, begin, end, got, count)


def _stale(path, begin, end, got, count):
    """The error of bytes [begin, end) of path holding other than the count of records the
    sidecar gives them."""
    return TruncatedRecordError(f"bytes {begin}..{end} held {got} records where the index has {count}",
                                path=path, offset=begin,
                                hint="the index is stale: rebuild it with tfrecord_lite.build_index")


def _tensor_shape(t):
    """The shape of a column of (nested) fixed-size lists of numbers (a shaped FixedLenFeature
    or RawTensorFeature), or None."""
    shape = _write._fixed_sizes(t)
    return tuple(shape) if shape and _write._numeric(_write._leaf_type(t)) else None


def _tensor_schema(features) -> pa.Schema:
    """arrow_schema(features) with Ray's tensor type for shaped numeric columns: numpy
    batches give fixed-size lists as (n,) arrays of objects (nested ones Ray cannot turn back
    into columns, nor write_tfrecords write), and tensors as (n, k) or (n, a, b) arrays."""
    schema = _arrow.arrow_schema(features)
    for i, field in enumerate(schema):
        shape = _tensor_shape(field.type)
        if shape is not None:
            empty = np.empty((0, *shape), _write._leaf_type(field.type).to_pandas_dtype())
            schema = schema.set(i, field.with_type(ArrowTensorArray.from_numpy(empty).type))
    return schema


def _tensors(arr: pa.Array, shape) -> pa.Array:
    """A column of nested fixed-size lists as Ray tensors of that shape (numbers: no copy)."""
    values = arr
    for _ in shape:
        values = values.flatten()  # slicing respected
    return ArrowTensorArray.from_numpy(values.to_numpy(zero_copy_only=False).reshape(len(arr), *shape))


def _pieces(offsets, ends, first):
    """Byte ranges (begin, end, records, index of the first record in the file) of about
    _PIECE_BYTES over contiguous frames, record first onwards."""
    group = (offsets - offsets[0]) // _PIECE_BYTES
    cuts = np.flatnonzero(np.diff(group)) + 1
    starts = np.concatenate([[0], cuts])
    stops = np.concatenate([cuts, [len(offsets)]])
    return [(int(offsets[a]), int(ends[b - 1]), int(b - a), first + int(a)) for a, b in zip(starts, stops)]


def _pack(units, n):
    """At most n groups of consecutive units with about equal bytes: a unit joins the group
    in which its middle byte falls."""
    if len(units) <= n:
        return [[u] for u in units]
    sizes = np.array([u[4] for u in units], dtype=np.float64)
    middles = np.cumsum(sizes) - sizes / 2
    owner = np.minimum(n - 1, (middles * n // max(1.0, sizes.sum())).astype(np.int64))
    groups = {}
    for u, g in zip(units, owner.tolist()):
        groups.setdefault(g, []).append(u)
    return list(groups.values())


def _read_span(path, begin, end, storage_options):
    """Bytes [begin, end) of a file: one ranged request for a URL, reads for a local file."""
    if _fs.is_url(path):
        fs, p = _fs.filesystem(path, storage_options)
        return _fs.read_range(fs, p, begin, end, path)
    with open(_fs.local_path(path), "rb", buffering=0) as f:
        f.seek(begin)
        return _read_exact(f, end - begin)


def _binary_array(records) -> pa.Array:
    """A large_binary array of records (a RecordBatch gathered from its blocks with numpy,
    without a Python object per record, or a list of bytes)."""
    segments = getattr(records, "segments", None)
    if segments is None:
        return pa.array(list(records), type=pa.large_binary())
    values, lengths = [], []
    for frames, starts, lens in segments:
        buf = np.frombuffer(frames, np.uint8)
        within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        values.append(buf[np.repeat(starts, lens) + within])
        lengths.append(lens)
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    data = np.concatenate(values) if values else np.zeros(0, np.uint8)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(lengths),
                                            [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def read_tfrecords(paths: Files, features: Features | None = None, *, columns: Sequence[str] | None = None,
                   raw: bool = False, compression: Compression = "auto", check_crc: bool = True,
                   on_corrupt: str = "raise", build_index: bool = False, storage_options: StorageOptions = None,
                   override_num_blocks: int | None = None, **options: Any) -> Any:
    """A ``ray.data.Dataset`` of the Examples in TFRecord files, read without TensorFlow.

    paths: a path, glob, directory or list of them; fsspec URLs (``s3://``, ``memory://``...)
        with ``storage_options``.
    features: a feature spec (as for ``parse_example``; the Arrow types are those of
        ``tfrecord_lite.arrow.arrow_schema``, shaped numeric features as Ray tensors: numpy
        batches hold (n, k) arrays); None infers one with ``infer_schema`` from the first
        1,000 records (pass a spec when later records differ).
    columns: feature names to keep; the others are not parsed. ``Dataset.select_columns``
        is pushed down into the read the same way.
    raw: one ``large_binary`` column ``"record"`` holding each record's bytes, unparsed.
    compression / check_crc: as in ``TFRecordReader`` (``"auto"`` detects GZIP/ZLIB per file).
    on_corrupt: as in ``TFRecordReader``: "skip" drops bad records (each read task logs them),
        "stop" ends a file at its first bad record. Either reads every file whole in one task.
    build_index: write missing ``.index`` sidecars of uncompressed files before reading, so
        that a few large files can be split between tasks.
    override_num_blocks and the other options (``concurrency``, ``ray_remote_args``...) go to
    ``ray.data.read_datasource``.
    """
    import inspect

    import ray.data

    # read_datasource hands keywords it does not name to legacy datasources: here they would
    # be dropped without a word (a misspelt option, an option of another reader).
    kinds = {n: p.kind for n, p in inspect.signature(ray.data.read_datasource).parameters.items()}
    unknown = [k for k in options if kinds.get(k) is not inspect.Parameter.KEYWORD_ONLY]
    if unknown:
        raise ArgumentTypeError(f"read_tfrecords got an unexpected keyword argument {unknown[0]!r}",
                                hint="besides its own, it takes those of ray.data.read_datasource "
                                     "(concurrency, ray_remote_args, ...)")
    _check_shared(paths, "read")
    source = TFRecordDatasource(paths, features, columns=columns, raw=raw, compression=compression,
                                check_crc=check_crc, on_corrupt=on_corrupt, build_index=build_index,
                                storage_options=storage_options)
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks, **options)


def _given(paths) -> list:
    """The paths given as strings: one, or those of a list (not of an iterator, left unread)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else paths if isinstance(paths, (list, tuple)) else ()
    return [p for p in items if isinstance(p, str)]


def _driver_node(paths) -> bool:
    """Whether paths are local:// ones, which Ray reads and writes on the driver's node only
    (files on its own disk), as its file datasources do."""
    return any(p.startswith("local://") for p in _given(paths))


def _check_shared(paths, done) -> None:
    """Refuse memory:// URLs, which live in one process: Ray's workers would not find what
    the driver wrote (nor the driver what they wrote), and fail after the work was done."""
    for path in _given(paths):
        if any(link.startswith("memory://") for link in path.split("::")):
            raise InvalidArgumentError(f"memory:// is in-process storage, which Ray's workers cannot see, so it "
                                       f"cannot be {done} here", path=path,
                                       hint="use storage every worker can reach: s3://, gs://, or a shared "
                                            "file system")


# -- writing --------------------------------------------------------------------------------

class TFRecordDatasink(Datasink):
    """Writes a Dataset as TF/Beam-named shards, one per write task with rows, committed together;
    see ``write_tfrecords``. After a successful write, ``shards`` lists a ShardInfo each."""

    def __init__(self, path_prefix, *, columns=None, record_column=None, compression=None, index=False,
                 deterministic=False, suffix=DEFAULT_SUFFIX, storage_options=None):
        self.prefix = _check_prefix(path_prefix)  # not a directory: no shards named '-00000-of-...'
        self._on_driver = _driver_node(self.prefix)
        if not _fs.is_url(self.prefix):
            self.prefix = _fs.local_path(self.prefix)  # file:// too
        self.columns = _arrow._names(columns)
        twice = sorted({c for c in self.columns or () if self.columns.count(c) > 1})
        if twice:  # else each write task fails once the dataset has been computed
            raise InvalidArgumentError(f"columns names {twice[0]!r} more than once: a record holds one feature of "
                                       "a name", hint="list each column once")
        self.record_column = record_column
        if record_column is not None and columns is not None:
            raise InvalidArgumentError("record_column writes one binary column verbatim; drop columns")
        self.options = dict(compression=normalize_compression(compression), index=index,
                            storage_options=storage_options)
        if index:  # here, not in every write task once the dataset has been computed
            check_index_compression(self.options["compression"], compression, self.prefix)
        self.deterministic = deterministic
        self.suffix = suffix
        self.storage_options = storage_options
        self.write_id = uuid.uuid4().hex[:12]
        self.shards = None
        paths = posixpath if _fs.is_url(self.prefix) else os.path
        self._directory, name = paths.split(self.prefix)
        # The name cut as temporary names are: a staging name is 5 bytes longer than the
        # shard's, and must fit wherever the shard's does.
        self._staging = paths.join(self._directory, f".{_temp_stem(name)}-{self.write_id}-")
        # The temporary files of the staging files (a task killed while writing leaves its own)
        self._temps = paths.join(self._directory, f".{_temp_stem(paths.basename(self._staging))}")

    @property
    def supports_distributed_writes(self) -> bool:
        return not self._on_driver

    def staging_path(self, task_index: int) -> str:
        return f"{self._staging}{task_index:05d}{self.suffix}"

    def on_write_start(self, schema=None) -> None:
        if _fs.is_url(self.prefix):
            _fs.make_dirs(self._directory, self.storage_options)
        elif self._directory:
            os.makedirs(self._directory, exist_ok=True)
        if schema is None:
            return
        names = schema.names
        wanted = [self.record_column] if self.record_column is not None else self.columns or []
        missing = [c for c in wanted if c not in names]
        if missing:
            raise FeatureSpecError(f"column {missing[0]!r} is not in the dataset ({', '.join(names)})",
                                   path=self.prefix, hint="pick columns among the dataset's")
        if self.record_column is not None:
            t = schema.field(self.record_column).type
            if not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
                raise FeatureSpecError(f"record_column {self.record_column!r} is {t}, not binary",
                                       path=self.prefix, hint="records are bytes: pass a binary column")

    def write(self, blocks, ctx):
        path = self.staging_path(ctx.task_idx)
        # Empty blocks write nothing, and a task of only empty blocks writes no shard (as
        # Ray's own file datasinks skip them): a filter leaves no empty shards behind.
        blocks = (a for a in map(BlockAccessor.for_block, blocks) if a.num_rows())
        first = next(blocks, None)
        if first is None:
            return {"task": ctx.task_idx, "path": None, "records": 0, "kinds": {}}
        tables = (_as_lists(self._select(a.to_arrow())) for a in itertools.chain([first], blocks))
        try:
            return self._write(path, tables, ctx.task_idx)
        except OSError as exc:  # name the prefix given, not the hidden staging name
            if exc.filename != path or exc.errno is None:
                raise
            raise OSError(exc.errno, f"{exc.strerror} (write task {ctx.task_idx})", self.prefix) from exc
        except TFRecordError as exc:
            if exc.path == path:
                exc.path = self.prefix
            raise

    def _write(self, path, tables, task):
        kinds = {}
        with TFRecordWriter(path, **self.options) as writer:
            if self.record_column is None:
                count = _write._write_batches((batch for t in tables for batch in t.to_batches()), writer,
                                              self.deterministic, kinds, self.prefix, f" of write task {task}")
            else:
                for table in tables:
                    for chunk in table.column(0).chunks:
                        if chunk.null_count:  # else the writer names a row of a hidden staging file
                            row = writer.records_written + int(np.argmax(chunk.is_null().to_numpy(False)))
                            raise FeatureSpecError(
                                f"record_column {self.record_column!r} holds a null, which is no record "
                                f"(row {row} of write task {task})", path=self.prefix,
                                hint="drop or fill the null rows first (Dataset.filter)")
                        writer.write_many(chunk.to_pylist())
                count = writer.records_written
        return {"task": task, "path": path, "records": count,
                "kinds": {name: kind for name, (kind, _) in kinds.items()}}

    def _select(self, table):
        if self.record_column is not None:
            return table.select([self.record_column])
        return table if self.columns is None else table.select(self.columns)

    def on_write_complete(self, write_result) -> None:
        done = sorted(write_result.write_returns, key=lambda r: r["task"])
        kinds = {}
        try:  # each task checked its own blocks; a column of one kind in every task too
            for r in done:
                _write.check_kinds(kinds, r["kinds"], f"write task {r['task']}", self.prefix)
        except FeatureSpecError as exc:
            self.on_write_failed(exc)
            raise
        done = [r for r in done if r["path"] is not None]
        if not done:  # an empty dataset still gets one (empty) shard, as TF and Beam write
            with TFRecordWriter(self.staging_path(0), **self.options) as writer:
                pass
            done = [{"task": 0, "path": writer.path, "records": 0}]
        finals = [shard_path(self.prefix, i, len(done), self.suffix) for i in range(len(done))]
        # Files of the same names (an earlier run's) are kept until every rename stands.
        kept = keep_replaced([p for f in finals for p in (f, index_path(f))], self.storage_options)
        moved = []
        try:
            for r, final in zip(done, finals):
                # The old sidecar goes before the data is renamed, the new one comes after, as
                # TFRecordWriter commits: no reader finds a sidecar beside other data.
                _fs.remove(index_path(final), self.storage_options)
                self._rename(r["path"], final)
                moved.append(final)  # from here a failure removes it, sidecar and all
                if self.options["index"]:
                    self._rename(index_path(r["path"]), index_path(final))
        except BaseException:
            for final in moved:
                self._remove(final)
            put_back(kept, self.storage_options)
            self.on_write_failed(None)
            raise
        drop_kept(kept, self.storage_options)
        self.shards = [ShardInfo(final, r["records"]) for final, r in zip(moved, done)]
        self._remove_staging()  # what attempts killed while writing left (their tasks were retried)

    def on_write_failed(self, error) -> None:
        self._remove_staging()

    def _remove_staging(self) -> None:
        """Remove every staging file of this write, and the temporary files that task
        attempts killed while writing left (an attempt that raised removed its own)."""
        found = []
        for pattern in (self._staging, self._temps):
            if _fs.is_url(self.prefix):  # listed, not globbed: the prefix may hold "[" or "*"
                fs, p = _fs.filesystem(pattern, self.storage_options)
                found += [fs.unstrip_protocol(f) for f in _listing(fs, posixpath.dirname(p))
                          if f.rstrip("/").startswith(p)]
            else:
                import glob

                found += glob.glob(glob.escape(pattern) + "*")
        for path in found:
            _fs.remove(path, self.storage_options)

    def _rename(self, src, dst):
        if _fs.is_url(src):
            fs, p = _fs.filesystem(src, self.storage_options)
            _fs.move(fs, p, _fs.filesystem(dst, self.storage_options)[1])
        else:
            os.replace(src, dst)

    def _remove(self, path):
        for p in (path, index_path(path)):
            _fs.remove(p, self.storage_options)

    def get_name(self) -> str:
        return "WriteTFRecordLite"


def _listing(fs, directory) -> list:
    """The names in a remote directory, as it is now (not as fs listed it earlier)."""
    try:
        fs.invalidate_cache(directory)
        return fs.ls(directory, detail=False)
    except FileNotFoundError:
        return []


def _as_lists(table: pa.Table) -> pa.Table:
    """table with the columns numpy batches leave that write_arrow does not take as lists of
    each row's values, flattened (an Example holds a shaped value so), null where the row is
    None: ragged numeric rows (Ray's variable-shaped tensors), Python objects (pickled by
    Ray: rows of bytes arrays, ragged rows with None among them, arrays of 2+ dimensions),
    lists of lists (rows of 2-D arrays, as Ray may convert them) and tensors of numpy
    strings (fixed-width UTF-32 in Arrow, written as UTF-8 text)."""
    for i, field in enumerate(table.schema):
        if isinstance(field.type, ArrowVariableShapedTensorType):
            chunks = [chunk.storage.flatten()[chunk.storage.type.get_field_index("data")]
                      for chunk in table.column(i).chunks]
        elif isinstance(field.type, ArrowPythonObjectType):
            chunks = [_object_lists(field.name, chunk.to_pylist()) for chunk in table.column(i).chunks]
        elif isinstance(field.type, _TENSOR_TYPES) and _is_text(field.type.storage_type):
            chunks = [_object_lists(field.name, list(chunk.to_numpy())) for chunk in table.column(i).chunks]
        elif _write._is_list(field.type) and not _write._holdable(field.type):  # lists of lists
            chunks = [_object_lists(field.name, chunk.to_pylist()) for chunk in table.column(i).chunks]
        else:
            continue
        column = pa.chunked_array(chunks, chunks[0].type if chunks else pa.large_list(pa.null()))
        table = table.set_column(i, field.with_type(column.type), column)
    return table


def _is_text(storage) -> bool:
    """Whether a tensor's storage holds fixed-width binary: numpy's 'U' (and 'S') values."""
    return pa.types.is_fixed_size_binary(_write._leaf_type(storage.value_type))


def _object_lists(name, rows) -> pa.Array:
    """Python objects as Arrow lists of their values, flattened: arrays (nested in object
    arrays too), lists and tuples are unpacked; None is a null row."""
    def values(obj, out):
        if isinstance(obj, np.ndarray) and obj.dtype != object:
            out.extend(obj.reshape(-1).tolist())
        elif isinstance(obj, (np.ndarray, list, tuple)):
            for item in (obj.reshape(-1) if isinstance(obj, np.ndarray) else obj):
                values(item, out)
        else:
            out.append(obj.item() if isinstance(obj, np.generic) else obj)
        return out

    try:
        array = pa.array([None if row is None else values(row, []) for row in rows])
    except (pa.ArrowException, OverflowError) as exc:
        raise FeatureSpecError(f"column {name!r} holds Python objects an Example cannot hold ({exc})",
                               hint="make each row an array or list of numbers, bytes or strings "
                                    "(or None), all of one kind") from None
    if not _write._holdable(array.type) and not _write._valueless(array.type):
        raise _write._unsupported(name, array.type)
    return array


def write_tfrecords(dataset: Any, path_prefix: PathLike, *, columns: Sequence[str] | None = None,
                    record_column: str | None = None, compression: Compression = None, index: bool = False,
                    deterministic: bool = False, suffix: str = DEFAULT_SUFFIX, storage_options: StorageOptions = None,
                    ray_remote_args: dict[str, Any] | None = None, concurrency: int | None = None) -> list[ShardInfo]:
    """Write a ``ray.data.Dataset`` as TFRecord shards ``<prefix>-00003-of-00016.tfrecord``,
    one per write task that has rows (``dataset.repartition(n)`` first for n shards; a task
    whose blocks are all empty, as a filter leaves them, writes none; an empty dataset gives
    one empty shard), in task order, and return a ShardInfo (path, records) per shard.

    Each row becomes a tf.train.Example with one Feature per column (the column types of
    ``tfrecord_lite.arrow.write_arrow``, and the ragged and object columns numpy batches
    leave, as lists of each row's values; ``columns`` picks and orders them), or, with
    ``record_column``, that binary column's values are written verbatim as records (the
    column ``read_tfrecords(..., raw=True)`` gives). compression and index are as in
    ``TFRecordWriter``; deterministic sorts features as protobuf does.

    Atomic: shards appear under their final names only after every write task succeeded; on
    failure nothing is left under a final name (see the module docstring).
    """
    _check_shared(path_prefix, "written")
    sink = TFRecordDatasink(path_prefix, columns=columns, record_column=record_column, compression=compression,
                            index=index, deterministic=deterministic, suffix=suffix,
                            storage_options=storage_options)
    dataset.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    return sink.shards
