"""Which files a dataset reads: resolving paths, glob patterns, directories and fsspec URLs
into a list of files (``resolve_files``), and the exact sharding plan that splits them
between readers (``shard_plan``)."""

from __future__ import annotations

import glob
import operator
import os

from . import fs as _fs
from .errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["caret_negates", "check_shard", "resolve_files", "shard_plan"]


def resolve_files(files, storage_options=None) -> list[str]:
    """Paths from a list of paths, a glob pattern, a directory, or a single file; any of
    them may be an fsspec URL (``s3://bucket/train-*.tfrecord``), resolved remotely with
    ``storage_options``. ``file://`` URLs become local paths.

    A list keeps its order (as TensorFlow does); glob matches and directory entries are
    sorted. ``**`` in a glob matches any number of directories (``data/**/*.tfrecord`` finds
    the files at every depth under data/), locally and remotely alike, each directory
    once (a symlink loop is not followed). Directories list their non-hidden files (a
    broken symlink too, which reading then names), ignoring ``.index`` sidecars. A file
    that exists under the name given is itself, glob characters and all (``a[1].tfrecord``),
    as a shell leaves a pattern that names a file. ``[^a]``, like ``[!a]``, matches any
    character but ``a``, as in shells and ``tf.io.gfile.glob`` (Python's glob reads it as
    ``^`` or ``a``)."""
    if isinstance(files, (str, os.PathLike)):
        spec = os.fspath(files)
        paths = _fs.expand(spec, storage_options) if _fs.is_url(spec) else _local_files(_fs.local_path(spec))
    else:
        try:
            paths = [p if _fs.is_url(p) else _fs.local_path(p) for p in map(os.fspath, files)]
        except TypeError:  # not iterable, or an item that is not a path
            raise ArgumentTypeError(f"files must be a path, a glob, a directory or a list of paths, not {files!r:.80}",
                                    hint="e.g. TFRecordDataset(['a.tfrecord', 'b.tfrecord']) or "
                                         "TFRecordDataset('data/*.tfrecord')") from None
    if not paths:
        hint = "pass a list of paths, a glob pattern or a directory that holds files"
        if isinstance(files, (str, os.PathLike)) and not _fs.is_url(spec):
            hint = _why_none(_fs.local_path(spec)) or hint
        raise InvalidArgumentError(f"no TFRecord files found for {files!r}", hint=hint)
    return paths


def _why_none(spec: str):
    """What to do about a local directory or glob that names no file, where it can be told."""
    if os.path.isdir(spec):
        if any(not n.startswith(".") and os.path.isdir(os.path.join(spec, n)) for n in _names(spec)):
            return (f"it holds directories but no files: for the files at every depth under it, pass "
                    f"{os.path.join(spec, '**', '*.tfrecord')!r}")
        return None
    parts = spec.split(os.sep)
    fixed = os.sep.join(parts[:next((i for i, part in enumerate(parts) if _fs.GLOB_CHARS & set(part)), 0)])
    if fixed and not os.path.isdir(fixed):
        where = "" if os.path.isabs(fixed) else f" (relative to {os.getcwd()!r})"
        if fixed.startswith("~"):  # a shell expands it; a path given in Python is taken as it is
            where = ": '~' is not expanded, pass os.path.expanduser(pattern)"
        return f"the directory {fixed!r} does not exist{where}"
    return None


def _local_files(spec: str) -> list[str]:
    if os.path.isdir(spec):
        return sorted(
            os.path.join(spec, name) for name in os.listdir(spec)
            if not name.startswith(".") and not name.endswith(".index")
            and not os.path.isdir(os.path.join(spec, name))  # a broken link is listed: reading it says so
        )
    if _fs.GLOB_CHARS & set(spec) and not os.path.exists(spec):
        return sorted({p for p in _glob(caret_negates(spec)) if not p.endswith(".index") and not os.path.isdir(p)})
    return [spec]


def caret_negates(pattern: str) -> str:
    """pattern with ``[^...]`` written ``[!...]``: a bracket expression that starts with ``^``
    matches any character but those listed, as in shells and ``tf.io.gfile.glob`` (POSIX
    fnmatch), locally and remotely alike; Python's glob and fsspec would match ``^`` itself."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c != "[":
            out.append(c)
            continue
        j = i + (i < n and pattern[i] in "!^")
        j += j < n and pattern[j] == "]"  # a first "]" is a member, not the end
        while j < n and pattern[j] not in "]/":  # a bracket expression holds no separator
            j += 1
        if j >= n or pattern[j] == "/":  # no closing "]": a literal "["
            out.append(c)
            continue
        body = pattern[i:j]
        out.append("[" + ("!" + body[1:] if body.startswith("^") else body) + "]")
        i = j + 1
    return "".join(out)


def _glob(pattern: str) -> list[str]:
    """glob.glob, where a "**" component matches any number of directories, as fsspec's
    does for URLs (TensorFlow's gfile reads it as "*"), hidden ones left out. Python's
    recursive glob follows symlinked directories into loops (each file listed once per
    level until ELOOP, or never finishing); here each directory is walked once (_tree)."""
    parts = pattern.replace(os.altsep, os.sep).split(os.sep) if os.altsep else pattern.split(os.sep)
    if "**" not in parts:
        return glob.glob(pattern)
    i = parts.index("**")
    prefix, rest = os.sep.join(parts[:i]), parts[i + 1:]
    if i == 1 and not parts[0]:
        prefix = os.sep  # "/**/..."
    if _fs.GLOB_CHARS & set(prefix):
        roots = [r for r in glob.glob(prefix) if os.path.isdir(r)]
    else:
        roots = [prefix] if os.path.isdir(prefix or os.curdir) else []
    found = []
    for directory in (d for root in roots for d in _tree(root)):
        if rest:
            found += _glob(os.path.join(glob.escape(directory), *rest))
        else:  # a last "**": every file at any depth
            found += [os.path.join(directory, name) for name in _names(directory) if not name.startswith(".")]
    return found


def _names(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory or os.curdir))
    except OSError:  # gone, or not readable: nothing to list, as glob.glob finds nothing
        return []


def _tree(root: str) -> list[str]:
    """root and the non-hidden directories under it, each directory once: first the tree's
    own, then those that symlinked directories lead to that it does not hold (a link back
    into the tree, a loop, is not followed; of two links to one directory, the first)."""
    seen, found, links = set(), [], []

    def walk(top):
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                st = os.stat(directory or os.curdir)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            found.append(directory)
            below = []
            try:
                with os.scandir(directory or os.curdir) as entries:  # types without a stat each
                    for entry in sorted(entries, key=lambda e: e.name):
                        if not entry.name.startswith(".") and entry.is_dir():
                            path = os.path.join(directory, entry.name)
                            (links if entry.is_symlink() else below).append(path)
            except OSError:  # gone, or not readable: nothing under it, as glob.glob finds nothing
                continue
            stack += reversed(below)  # popped in sorted order

    walk(root)
    for link in links:  # grows as the trees that links lead to are walked
        walk(link)
    return found


def check_shard(shard, name: str = "shard") -> tuple[int, int] | None:
    """shard as (index, count) ints with 0 <= index < count (None stays None); floats and
    strings are refused, not truncated or parsed. name: the argument's, for errors."""
    if shard is None:
        return None
    what = "(index, count)" if name == "shard" else "(rank, world size)"
    try:
        index, count = (operator.index(v) for v in shard)
    except (TypeError, ValueError):  # not two integers
        raise ArgumentTypeError(f"{name} must be two integers {what}, not {shard!r}") from None
    if count < 1 or not 0 <= index < count:
        raise InvalidArgumentError(f"{name} must be {what} with 0 <= {what[1:-1].replace(', ', ' < ')}, "
                                   f"not {shard!r}")
    return index, count


def shard_plan(num_files: int, shard):
    """Which part of the data shard ``(index, count)`` reads, as (file positions, record rule).

    With at least ``count`` files, shard i takes files i, i+count, ... whole (record rule None).
    With fewer, every shard reads every file and keeps record j of file f when
    ``(f + j) % count == index`` (j counts records dropped by ``on_corrupt="skip"`` too): a
    partition that does not depend on reading order, so shards need not agree on a seed.
    Either way the shards' union is every record exactly once."""
    if shard is None:
        return list(range(num_files)), None
    index, count = check_shard(shard)
    if count == 1:
        return list(range(num_files)), None
    if num_files >= count:
        return list(range(index, num_files, count)), None
    return list(range(num_files)), (index, count)
