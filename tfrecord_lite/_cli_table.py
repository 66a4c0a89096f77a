"""The ``tfrecord-lite`` subcommands that read Examples as a table: ``schema``, ``stats``
and ``to-parquet`` (the rest, and the helpers they share, are in ``cli``)."""

from __future__ import annotations

import collections
import json
import os
import sys

import numpy as np

from . import _native
from . import fs as _fs
from .cli import (
    _bar,
    _check,
    _count,
    _names,
    _open,
    _path,
    _progress_args,
    _reader_args,
    _storage,
)
from .errors import TFRecordError
from .io import check_output_name
from .ops import tracked_blocks


def _sample_records(args):
    """The first --sample records of each FILE, as one RecordBatch that knows each record's
    file and index there (for errors)."""
    from .batch import RecordBatch

    parts = []
    for path in args.files:
        with _open(path, args) as r:
            parts.append(r.head(args.sample))
    return RecordBatch.concat(parts)


_SPEC_TYPES = ("FixedLenFeature", "VarLenFeature")  # what schema --format json writes


def _load_spec(path, storage_options):
    """The feature spec in the JSON file that `schema --format json` writes (a feature per
    name: {"type", "dtype", "shape"}), edited or not."""
    from .errors import FeatureSpecError
    from .features import FixedLenFeature, VarLenFeature

    hint = "Write one with: tfrecord-lite schema FILE --format json > spec.json"
    try:
        doc = json.loads(_fs.read_bytes(path, storage_options))
    except ValueError as exc:  # a UnicodeDecodeError too
        raise FeatureSpecError(f"--spec {path} is not JSON ({exc})", hint=hint) from None
    if not isinstance(doc, dict) or set(doc) == {"context", "feature_lists"}:
        raise FeatureSpecError(f"--spec {path} must map feature names to specs of tf.train.Example "
                               "features", hint=hint)
    spec = {}
    for name, entry in doc.items():
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind not in _SPEC_TYPES or not isinstance(entry.get("dtype"), str):
            raise FeatureSpecError(f"--spec {path}: feature {name!r} must be an object with \"type\" (one of "
                                   f"{', '.join(_SPEC_TYPES)}) and \"dtype\", not {entry!r:.80}", hint=hint)
        try:
            if kind == "VarLenFeature":
                spec[name] = VarLenFeature(entry["dtype"])
            else:
                spec[name] = FixedLenFeature(entry.get("shape") or [], entry["dtype"])
        except TFRecordError as exc:  # an unknown dtype, a shape that is not a list of ints
            raise FeatureSpecError(f"--spec {path}: feature {name!r}: {exc.detail}", hint=exc.hint or hint) from None
    return spec


def _spec_row(spec) -> tuple:
    """(spec type, dtype, shape as a list or None) of an inferred spec."""
    shape = getattr(spec, "shape", None)
    return type(spec).__name__, spec.dtype, None if shape is None else list(shape)


def _print_table(header, rows) -> None:
    rows = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def cmd_schema(args) -> int:
    """Infer a feature spec from the first records of each FILE (infer_schema) and print it:
    as a table, as TensorFlow code, as JSON, or as tfrecord_lite Python code. SequenceExamples
    give two specs, the context's and the feature lists'."""
    from .features import UNTYPED, SequenceSchema, infer_schema

    records = _sample_records(args)
    if not len(records):  # an empty spec would parse nothing the files may hold later
        where = args.files[0] if len(args.files) == 1 else f"any of the {len(args.files)} files"
        raise TFRecordError(f"no records in {where}: no feature spec to infer",
                            hint="Pass files that hold records (tfrecord-lite count FILE counts them)")
    schema = infer_schema(records, sample=len(records))  # its errors name the record's file
    parts = ({"context": schema.context, "feature_lists": schema.feature_lists}
             if isinstance(schema, SequenceSchema) else None)
    if args.format == "tf":  # a program to save and run, as --format python prints
        print("import tensorflow as tf\n\n" + schema.to_tf_code())
    elif args.format == "python":
        print(schema.to_code())
    elif args.format == "json":
        def as_json(specs):
            return {n: dict(zip(("type", "dtype", "shape"), _spec_row(s))) for n, s in specs.items()}
        print(json.dumps({k: as_json(v) for k, v in parts.items()} if parts else as_json(schema), indent=2))
    else:
        for title, specs in (parts or {None: schema}).items():
            if title:
                print(f"{title.replace('_', ' ')}:")
            _print_table(("feature", "spec", "dtype", "shape"),
                         [(n, kind, dtype + " *" * (n in specs.untyped), "" if shape is None else shape)
                          for n, (kind, dtype, shape) in ((n, _spec_row(s)) for n, s in specs.items())])
            if specs.untyped:
                print(f"* {UNTYPED}")
    return 0


class _FeatureStats:
    """What stats counts for one feature name."""

    def __init__(self):
        self.present = 0          # records holding the key (an empty Feature included)
        self.kinds = set()        # dtype names seen
        self.values = 0           # values over all records
        self.least = None         # fewest / most values in a record holding the key
        self.most = 0

    def add(self, kinds, counts):
        """A feature's column: each record's kind (ABSENT where it lacks the key) and count."""
        from .example import ABSENT

        held = kinds != ABSENT
        self._add(held, kinds[held], counts[held])

    def add_list(self, steps, kinds, counts):
        """A feature list's column: each record's steps (negative where it lacks the list),
        then each step's kind and count; a record's values are its steps' values."""
        held = steps >= 0
        steps = np.maximum(steps, 0)
        ends = np.cumsum(steps)
        sums = np.concatenate([[0], np.cumsum(counts)])
        self._add(held, kinds, (sums[ends] - sums[ends - steps])[held])

    def _add(self, held, kinds, counts):
        """held: the records holding the feature; kinds: the kinds seen; counts: the values
        of each record holding it."""
        from .example import _KIND_NAME

        if not held.any():
            return
        self.present += int(held.sum())
        self.kinds.update(_KIND_NAME[k] for k in set(kinds.tolist()) if k in _KIND_NAME)
        self.values += int(counts.sum())
        least, most = int(counts.min()), int(counts.max())
        self.least = least if self.least is None else min(self.least, least)
        self.most = max(self.most, most)


def cmd_stats(args) -> int:
    """Count the records and bytes of FILEs and, per feature, the records holding it and
    its values (total, fewest and most per record). A SequenceExample's feature lists are
    listed after its context, a list's values summed over its steps. Records that are not
    Examples or SequenceExamples fail."""
    from .batch import RecordBatch
    from .features import decode_records

    records = nbytes = 0
    features: dict = collections.defaultdict(_FeatureStats)
    lists: dict = collections.defaultdict(_FeatureStats)
    with _bar(args, "stats") as bar:
        for path in args.files:
            in_file = 0
            with _open(path, args) as r:
                for block in tracked_blocks(r, bar):
                    batch = RecordBatch(*block)
                    try:
                        names, columns, list_names, list_columns = decode_records(batch)
                    except TFRecordError as exc:  # name the file and the record within it
                        i = exc.index or 0  # the block's frames follow one another from batch_offset
                        raise type(exc)(exc.detail, path=path, index=r.batch_index + i,
                                        offset=r.batch_offset + int(block[1][i]) - _native.framing.HEADER_BYTES,
                                        hint="stats reads tf.train.Example and SequenceExample records") from None
                    for name, column in zip(names, columns):
                        features[name].add(column.kinds, column.counts)
                    for name, column in zip(list_names, list_columns):
                        lists[name].add_list(column.steps, column.kinds, column.counts)
                    in_file += len(batch)
                # A pipe has no size: what came through it is its size.
                nbytes += r.input_offset if _fs.is_special(path) else _fs.size(path, _storage(args))
            records += in_file
    # A feature is held by at least one record, so records > 0; JSON's share is the fraction.
    def rows(specs):
        return [(name, "/".join(sorted(s.kinds)) or None, s.present, s.present / records,  # None: only empty
                 s.values, s.least if s.least is not None else "-", s.most)
                for name, s in sorted(specs.items())]

    if args.format == "json":
        keys = ("dtype", "present", "share", "values", "min_values", "max_values")
        print(json.dumps({"files": len(args.files), "records": records, "bytes": nbytes,
                          **{part: {row[0]: dict(zip(keys, row[1:])) for row in rows(specs)}
                             for part, specs in (("features", features), ("feature_lists", lists))}},
                         indent=2))
        return 0
    print(f"{records} records, {nbytes} bytes in {len(args.files)} file(s)")
    for title, specs in ((("context", features), ("feature lists", lists)) if lists else ((None, features),)):
        if title:
            print(f"{title}:")
        _print_table(("feature", "dtype", "present", "share", "values", "min/rec", "max/rec"),
                     [(row[0], row[1] or "-", row[2], f"{row[3]:.1%}", *row[4:]) for row in rows(specs)])
    return 0


def cmd_to_parquet(args) -> int:
    """Convert FILEs to one Parquet file through Arrow (tfrecord_lite.arrow; needs pyarrow),
    with the feature spec of --spec, or else the one the schema command infers from the same
    records; OUT appears only when complete."""
    try:
        from .arrow import _inferred, write_parquet
    except ImportError:
        raise TFRecordError("to-parquet needs pyarrow", hint='pip install "tfrecordkit[arrow]" (or ".[arrow]" from a checkout)') from None

    check_output_name(args.output, url=_fs.is_url(args.output), example="out.parquet")
    for path in args.files:  # the dataset's readers would call a Parquet input damaged TFRecord
        _check(path, args.compression, _storage(args))
        if not _fs.is_url(path) and not _fs.is_url(args.output) and os.path.exists(args.output) \
                and os.path.samefile(path, args.output):
            raise TFRecordError("OUT is one of the inputs: the Parquet file would replace its TFRecord data",
                                path=args.output, hint="write the Parquet file under another name")
    piped = [p for p in args.files if _fs.is_special(p)]
    if piped and not args.spec:  # the sample would take the records the conversion needs
        raise TFRecordError("a pipe can be read only once, but inferring the spec reads the first records "
                            "before the conversion", path=piped[0],
                            hint="Pass --spec SPEC.json (tfrecord-lite schema FILE --format json writes one)")
    features = _load_spec(args.spec, _storage(args)) if args.spec else _inferred(_sample_records(args))
    rows = write_parquet(args.files, args.output, features, columns=args.columns, codec=args.codec,
                         progress=args.progress, compression=args.compression, batch_size=args.batch_size,
                         storage_options=_storage(args), on_corrupt=args.on_corrupt)
    print(f"{rows} rows, {len(args.files)} file(s) -> {args.output}", file=sys.stderr)
    return 0


_EPILOG_SCHEMA = """\
Features present in every sampled record with the same number of values become
FixedLenFeature, the others VarLenFeature.

examples:
  tfrecord-lite schema train-*.tfrecord
  tfrecord-lite schema train.tfrecord --format python > spec.py
"""

_EPILOG_TO_PARQUET = """\
Lists become Arrow large_list columns and bytes large_binary (see tfrecord_lite.arrow).

examples:
  tfrecord-lite to-parquet train-*.tfrecord -o train.parquet
  tfrecord-lite to-parquet data.tfrecord.gz -o small.parquet --columns id,label --codec zstd
  tfrecord-lite schema train-*.tfrecord --format json > spec.json   # then edit it
  tfrecord-lite to-parquet train-*.tfrecord -o train.parquet --spec spec.json
"""


def add_table_commands(sub, add) -> None:
    """The subcommands that read Examples as a table: schema, stats, to-parquet."""
    p = add("schema", cmd_schema, "print the feature spec inferred from files", _EPILOG_SCHEMA)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    p.add_argument("--format", default="table", choices=["table", "tf", "json", "python"],
                   help="table (default), tf (TensorFlow code), json, python (tfrecord_lite code)")
    p.add_argument("--sample", type=_count(1), default=1000, help="records read per file (default 1000)")
    _reader_args(p)
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("stats", help="records, bytes and per-feature counts of files",
                       description=cmd_stats.__doc__)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    p.add_argument("--format", default="table", choices=["table", "json"], help="table (default) or json")
    _reader_args(p)
    _progress_args(p)
    p.set_defaults(func=cmd_stats)

    p = add("to-parquet", cmd_to_parquet, "convert files to one Parquet file", _EPILOG_TO_PARQUET)
    p.add_argument("files", nargs="+", type=_path, metavar="FILE")
    p.add_argument("-o", "--output", required=True, type=_path, metavar="OUT", help="the Parquet file")
    p.add_argument("--spec", default=None, type=_path, metavar="SPEC.json",
                   help="the feature spec, as schema --format json writes it (default: inferred)")
    p.add_argument("--sample", type=_count(1), default=1000,
                   help="records read per file to infer the spec without --spec (default 1000), as in schema")
    p.add_argument("--columns", default=None, type=_names,
                   help="comma-separated features to keep, in this order (default: all)")
    p.add_argument("--codec", default="snappy", help="Parquet compression (default snappy; zstd, gzip, none)")
    p.add_argument("--batch-size", type=_count(1), default=65536, help="rows per Parquet row group (default 65536)")
    _reader_args(p, max_record=False)  # the dataset reads with the default
    _progress_args(p)
    p.set_defaults(func=cmd_to_parquet)
