"""NumPy export of many files: ``to_numpy`` (one dict of dense arrays in memory) and
``to_npy`` (``.npy`` files through memory maps, one batch in memory at a time), both reading
through TFRecordDataset."""

from __future__ import annotations

import errno
import mmap
import os
from typing import Any

import numpy as np

from ._typing import Features, Files, ParseFn, PathLike, Progress
from .bytes_column import BytesColumn
from .dataset import TFRecordDataset
from . import fs as _fs
from .errors import FeatureSpecError, InvalidArgumentError, TFRecordError
from .io import AtomicFile, _named
from .progress import progress as progress_bar

__all__ = ["to_numpy", "to_npy"]


def to_numpy(files: Files, features: Features | None = None, *, parse: ParseFn | None = None,
             batch_size: int = 4096, **options: Any) -> dict[str, np.ndarray]:
    """Every record of ``files`` parsed into one dict of dense arrays (the data must fit in
    memory). Each value of ``parse_example``'s output must be an array with a leading batch
    dimension (FixedLenFeature); options go to TFRecordDataset. With a spec, files of no
    records give each feature as an empty array of its shape and dtype."""
    _need_spec("to_numpy", features, parse)
    _check_options("to_numpy", batch_size, options)
    ds = TFRecordDataset(files, features, parse=parse, batch_size=batch_size, **options)
    parts: dict = {}
    layout = _Layout()
    for batch in ds:
        layout.check(batch)
        for key, value in batch.items():
            parts.setdefault(key, []).append(value)
    for batch in _no_records(ds, features, parse) if not parts else ():
        layout.check(batch)
        parts = {key: [value] for key, value in batch.items()}
    return {key: _join(parts.pop(key)) for key in list(parts)}


def _join(parts: list) -> np.ndarray:
    """np.concatenate(parts), each part let go once copied: the output's pages are committed
    as they are written, so memory peaks at about one copy of the data, not two."""
    dtype = np.result_type(*{p.dtype for p in parts})  # as concatenate; few dtypes (numpy 1 takes 32)
    out = np.empty((sum(len(p) for p in parts),) + parts[0].shape[1:], dtype)
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        out[at:at + len(part)] = part
        at += len(part)
        del part
    return out


def to_npy(files: Files, features: Features | None = None, out_dir: PathLike = ".", *,
           parse: ParseFn | None = None, batch_size: int = 4096, progress: Progress = None,
           **options: Any) -> dict[str, np.memmap]:
    """Stream ``files`` into one ``<out_dir>/<feature>.npy`` per feature, chunk by chunk, and
    return them opened read-only as memory maps; memory use is one batch, whatever the
    dataset size. Two passes: the first counts records without parsing them (so each array is
    allocated once at its final size), the second parses and fills. Feature names are
    percent-encoded into file names. Each file is filled under a temporary name and renamed
    to its own when every array is complete: a failed conversion leaves files of the same
    names as they were. progress: show a bar (tqdm) — default when stderr is a terminal."""
    import urllib.parse

    _need_spec("to_npy", features, parse)
    _check_options("to_npy", batch_size, options)
    if _fs.is_url(out_dir):
        raise InvalidArgumentError("to_npy writes memory-mapped .npy files, which need a local directory",
                                   path=out_dir, hint="convert into a local directory, then copy the files")
    out_dir = _fs.local_path(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    ds = TFRecordDataset(files, features, parse=parse, batch_size=batch_size, **options)
    # Both passes read the files ds resolved: an iterator of paths is used up by one, and a
    # pattern matched twice may match a file written in between.
    total = sum(len(b) for b in TFRecordDataset(ds.files, batch_size=batch_size, **options))
    files_out, outs, filled = {}, {}, 0
    layout = _Layout()
    bar = progress_bar(total, "to_npy", progress)
    try:
        for batch in ds if total else _no_records(ds, features, parse):
            n = layout.check(batch)
            if filled + n > total:
                raise TFRecordError("the files gained records while they were being converted")
            for key, value in batch.items():
                if key not in outs:
                    if value.dtype.hasobject:
                        raise FeatureSpecError(
                            f"feature {key!r} parses to Python objects ({value.dtype}), which .npy "
                            "memory maps cannot hold",
                            hint="leave bytes features out of to_npy's spec, or read raw array "
                            "bytes with RawTensorFeature")
                    files_out[key] = AtomicFile(os.path.join(out_dir, urllib.parse.quote(key, safe="") + ".npy"))
                    outs[key] = _create(files_out[key], value.dtype, (total,) + value.shape[1:])
                out = outs[key]
                if not np.can_cast(value.dtype, out.dtype, "safe"):  # the assignment would truncate
                    raise FeatureSpecError(
                        f"feature {key!r} parses to {value.dtype} in one batch and {out.dtype} in an earlier one",
                        hint="the parse step must give each feature one dtype: its .npy array has the first batch's")
                out[filled:filled + n] = value
                _release_pages(out, filled + n)
            filled += n
            bar.update(n)
        if filled != total:
            raise TFRecordError(f"the files held {total} records when counted but {filled} when converted")
        for out in outs.values():
            out.flush()
        for f in files_out.values():
            f.commit()
    finally:
        bar.close()
        for f in files_out.values():
            f.discard()  # after its commit, a no-op
    return {key: np.load(f.path, mmap_mode="r") for key, f in files_out.items()}


def _need_spec(name, features, parse) -> None:
    """Refuse a call without a spec or parse function, before anything is read: its batches
    would be raw records, which make no arrays."""
    if features is None and parse is None:
        raise FeatureSpecError(f"{name} needs a feature spec (or a parse function) to make arrays of",
                               hint='pass features={"x": FixedLenFeature(shape, dtype), ...}; '
                                    "tfrecord_lite.infer_schema(path) suggests one")


def _no_records(ds, features, parse) -> list:
    """The parsed batch of no records when a spec says which arrays those are (empty ones
    of each feature's shape and dtype, so that an empty input still gives every feature);
    none for a parse function, which is never called without records."""
    return [ds._parse_fn()([])] if parse is None and features is not None else []


def _create(atomic: AtomicFile, dtype, shape) -> np.memmap:
    """A .npy file of dtype and shape in atomic's temporary file, mapped for writing, its disk
    space reserved: a full disk is then an OSError naming the file. Found only when written
    back, a page of a map that the disk has no room for kills the process (SIGBUS)."""
    try:
        out = np.lib.format.open_memmap(atomic.temp_path, mode="w+", dtype=dtype, shape=shape)
        fd = atomic.file.fileno()  # the same temporary file
        size = os.fstat(fd).st_size
        if size and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # no reserving there
                    raise
    except OSError as exc:
        raise _named(exc, atomic.path) from None
    return out


def _release_pages(out: np.memmap, rows: int) -> None:
    """Unmap the pages of out's first ``rows`` rows from this process. They are shared file
    pages, so their data stays in the page cache on its way to disk; only the process's
    resident set shrinks, keeping to_npy's memory at about one batch whatever the output."""
    mapping = getattr(out, "_mmap", None)
    if mapping is None or not hasattr(mapping, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return
    start = out.offset % mmap.ALLOCATIONGRANULARITY  # where the array begins in the mapping
    end = (start + rows * (out.nbytes // max(len(out), 1))) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > 0:
        mapping.madvise(mmap.MADV_DONTNEED, 0, end)


def _check_options(name, batch_size, options) -> None:
    """Refuse options that make no arrays: unbatched output (one record's values, with no
    batch dimension to join on), Arrow output and endless epochs (the export would never end)."""
    if batch_size is None:
        raise InvalidArgumentError(f"{name} needs batch_size: it joins batches of records into arrays",
                                   hint="pass a positive batch_size (records parsed at a time), or leave the default")
    if "num_epochs" in options and options["num_epochs"] is None:
        raise InvalidArgumentError(f"{name} with num_epochs=None would read the files forever",
                                   hint="pass a number of passes, or leave the default (1)")
    if options.get("output", "numpy") != "numpy":
        raise InvalidArgumentError(f"{name} makes NumPy arrays, not output={options['output']!r}",
                                   hint="leave output out")


class _Layout:
    """The features and row shapes of the first parsed batch, which every later batch must
    have: each feature becomes one array with a row per record."""

    def __init__(self):
        self.shapes = None  # feature -> shape of one row

    def check(self, batch) -> int:
        """The number of rows of batch, a dict of arrays of equal length."""
        if not isinstance(batch, dict):
            raise FeatureSpecError(
                f"expected a dict of arrays from the parse step, got {type(batch).__name__}",
                hint="make the parse function return {name: array}; merge a sequence example's "
                     "(context, feature_lists, lengths) into one dict")
        rows, shapes = None, {}
        for key, value in batch.items():
            if not isinstance(value, np.ndarray):
                raise FeatureSpecError(
                    f"feature {key!r} parses to {type(value).__name__}, not a dense array",
                    hint="leave bytes_output='column' out: bytes features then come as object arrays"
                    if isinstance(value, BytesColumn)
                    else "to_numpy/to_npy need fixed-length features (FixedLenFeature)")
            if value.ndim == 0 or (rows is not None and len(value) != rows[1]):
                raise FeatureSpecError(
                    f"feature {key!r} parses to an array of shape {value.shape} in a batch where "
                    + (f"{rows[0]!r} has {rows[1]} rows" if rows else "each record needs a row"),
                    hint="the parse step must return one row per record of the batch for every feature")
            rows = rows or (key, len(value))
            shapes[key] = value.shape[1:]
        if self.shapes is None:
            self.shapes = shapes
        elif shapes != self.shapes:
            key = next(k for k in {**self.shapes, **shapes} if shapes.get(k) != self.shapes.get(k))
            one, other = (f"rows of shape {s[key]}" if key in s else "no array" for s in (self.shapes, shapes))
            raise FeatureSpecError(f"feature {key!r} has {one} in one batch and {other} in another",
                                   hint="to_numpy/to_npy need every feature in every batch, with one shape "
                                        "(FixedLenFeature)")
        return rows[1] if rows else 0
