"""Writing one dataset as many files: TF/Beam shard naming, routing records to shards
(round-robin, stable key hash, or rolling to a new file at a size limit), all-or-nothing
commit of the whole group, and ``write_parallel``, which encodes items in a thread or
process pool while exactly one writer owns each shard.

Shard ``i`` of ``n`` is named ``f"{prefix}-{i:05d}-of-{n:05d}{suffix}"``
(``data-00003-of-00016.tfrecord``), the names TensorFlow and Beam use.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import os
import pickle
import queue
import threading
from typing import Any, Callable, Hashable, Iterable, NamedTuple

import numpy as np

from . import _native
from . import fs as _fs
from ._typing import Buffer, Compression, PathLike, Progress, StorageOptions
from .errors import ArgumentTypeError, EncodeError, InvalidArgumentError, TFRecordError, positive_int
from .io import CommitOnExit, check_level, normalize_compression
from .progress import progress as _progress
from .batch import RecordBatch
from .writer import TFRecordWriter, _chunks, _tf_options, abort_group, close_group

__all__ = ["ShardedWriter", "ShardInfo", "shard_path", "key_to_shard", "write_parallel"]

DEFAULT_SUFFIX = ".tfrecord"


def _check_prefix(prefix) -> str:
    """prefix as a str; one ending in a directory separator is refused: its shards would be
    named ``-00000-of-00004.tfrecord``, no name and a leading dash that commands take for an
    option."""
    prefix = os.fspath(prefix)
    if prefix.endswith(("/", os.sep)):
        raise InvalidArgumentError(f"the shard prefix {prefix!r} is a directory: the shards would be named "
                                   f"{shard_path(prefix, 0, 2)!r}, ...", path=prefix,
                                   hint=f"end it with a file name: {prefix + 'train'!r} gives "
                                   f"{shard_path(prefix + 'train', 0, 2)!r}, ...")
    if _fs.is_url(prefix) and _fs._bucket_only(prefix):  # else each shard names a bucket of its own
        raise InvalidArgumentError(f"the shard prefix {prefix!r} names a bucket: the shards would be the buckets "
                                   f"{shard_path(prefix, 0, 2)!r}, ...", path=prefix,
                                   hint=f"put them in it: {prefix + '/train'!r} gives "
                                   f"{shard_path(prefix + '/train', 0, 2)!r}, ...")
    return prefix


def check_shard_index(index) -> None:
    """Refuse a path as index=: it names the sidecar of one file, and every shard would write
    its own over it."""
    if isinstance(index, (str, bytes, os.PathLike)):
        raise InvalidArgumentError(f"index must be True or False for shards, not {index!r}: each shard's "
                                   "sidecar is its own path + '.index'", hint="pass index=True")


def writer_options(compression, compression_level, *, index=False, fsync=False, storage_options=None,
                   path=None) -> dict:
    """TFRecordWriter's keyword arguments for every file a group writes (shards, merge and
    split outputs), checked once before any file is opened. compression may be a
    tf.io.TFRecordOptions, whose compression_level is honoured as TFRecordWriter honours it."""
    compression, compression_level = _tf_options(compression, compression_level)
    normalize_compression(compression)
    return dict(compression=compression, compression_level=check_level(compression_level, path), index=index,
                fsync=fsync, storage_options=storage_options)


def shard_path(prefix, index: int, num_shards: int, suffix: str = DEFAULT_SUFFIX) -> str:
    """``prefix-00003-of-00016.tfrecord``: shard ``index`` (from 0) of ``num_shards``."""
    return f"{os.fspath(prefix)}-{index:05d}-of-{num_shards:05d}{suffix}"


class ShardInfo(NamedTuple):
    """A committed shard: its path and record count. Usable wherever a path is (os.fspath)."""

    path: str
    records: int | None  # None when merge copied bytes without counting

    def __fspath__(self) -> str:
        return self.path


def key_to_shard(key, num_shards: int) -> int:
    """The shard of a routing key: ``crc32c(key bytes) % num_shards``, stable across runs,
    processes and machines (unlike Python's salted ``hash``). str keys are UTF-8 encoded,
    ints are routed by their decimal digits, bytes-like keys by their bytes."""
    if isinstance(key, str):
        try:
            data = key.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: a file name os.fsdecode() could not decode
            raise InvalidArgumentError(
                f"the routing key {key!r} has no UTF-8 encoding ({exc.reason} at position {exc.start})",
                hint="route by bytes instead: os.fsencode(key) for a file name, or key.encode() with an "
                "error handler such as 'surrogateescape'",
            ) from None
    elif isinstance(key, (bytes, bytearray, memoryview)):
        data = key
    elif hasattr(key, "__index__") and not isinstance(key, bool):
        data = str(key.__index__()).encode("ascii")
    else:
        raise ArgumentTypeError(f"a routing key must be str, bytes or int, not {type(key).__name__}")
    return _native.framing.crc32c(data) % num_shards


class ShardedWriter(CommitOnExit):
    """Write records across shard files that are committed together.

    Either ``num_shards`` (a fixed count) or ``max_records_per_shard`` and/or
    ``max_bytes_per_shard`` (roll to a new shard when the next record would pass a limit; a
    record larger than the byte limit gets a shard to itself). The byte limit counts
    uncompressed frame bytes (data + 16 per record).

    Routing with a fixed count: ``write(record)`` goes round-robin; ``write(record, key=k)``
    goes to ``key_to_shard(k, num_shards)``. Records keep their order within a shard.

    Naming: with a fixed count, shards carry their final names from the start (under hidden
    temporary files until close). When rolling, the count is known only at close, so every
    shard is written under a temporary name and renamed to ``-of-N`` at close.

    Nothing appears under a final name before ``close()`` succeeds; on an exception inside
    ``with`` (or ``abort()``), or if any shard fails to commit, no shard is left. Empty
    shards are written (as TensorFlow and Beam do); rolling over no records writes one empty
    shard. compression, compression_level, index, fsync and storage_options are as in
    TFRecordWriter and apply to each shard; the prefix may be an fsspec URL (``s3://bucket/out/train``).
    Open files: a fixed count keeps every shard open until close (two files each with an
    index); rolling shards are closed as they fill.
    Thread-safe. After close, ``shards`` lists a ShardInfo per shard.
    """

    def __init__(self, prefix: PathLike, num_shards: int | None = None, *,
                 max_records_per_shard: int | None = None, max_bytes_per_shard: int | None = None,
                 suffix: str = DEFAULT_SUFFIX, compression: Compression = None, index: bool = False,
                 fsync: bool = False, storage_options: StorageOptions = None,
                 compression_level: int | None = None) -> None:
        rolling = max_records_per_shard is not None or max_bytes_per_shard is not None
        if (num_shards is None) == (not rolling):
            raise InvalidArgumentError(
                "ShardedWriter needs either num_shards (a fixed shard count) or "
                "max_records_per_shard/max_bytes_per_shard (roll to a new shard at a limit), not "
                + ("both" if rolling else "neither")
            )
        num_shards, max_records_per_shard, max_bytes_per_shard = (
            None if value is None else positive_int(name, value) for name, value in (
                ("num_shards", num_shards), ("max_records_per_shard", max_records_per_shard),
                ("max_bytes_per_shard", max_bytes_per_shard)))
        self.prefix = _check_prefix(prefix)
        check_shard_index(index)
        self.suffix = suffix
        self.max_records = max_records_per_shard
        self.max_bytes = max_bytes_per_shard
        self.rolling = rolling  # shards roll over at a limit; their count is known at close
        self._options = writer_options(compression, compression_level, index=index, fsync=fsync,
                                       storage_options=storage_options, path=self.prefix)
        self._lock = threading.Lock()
        self._next = 0  # round-robin position
        self._writers: list[TFRecordWriter] = []
        self.shards: list[ShardInfo] | None = None
        self.closed = False
        try:
            with _descriptors(num_shards or 1, index, self.prefix), self._naming_rolled():
                for i in range(num_shards or 1):
                    self._add_shard(num_shards)
        except BaseException:
            abort_group(self._writers)
            raise

    @property
    def num_shards(self) -> int:
        return len(self._writers)

    @property
    def records_written(self) -> int:
        return sum(w.records_written for w in self._writers)

    def write(self, record: Buffer, key: Hashable | None = None) -> None:
        """Append one record, to the shard chosen by key (or round-robin, or the current one
        when rolling)."""
        if key is None and self.rolling:
            # The limit check and the write are one step: records of other threads landing
            # between them would take the shard past its limit.
            with self._lock, self._naming_rolled():
                self._check_open()
                self._rolled_writer(record).write(record)
            return
        self._writer_for(key).write(record)

    def write_many(self, records: Iterable[Buffer], keys: Iterable[Hashable] | None = None) -> None:
        """Append many records (with one key each, if keys is given: exactly as many keys as
        records, else InvalidArgumentError). Records with a len() are counted against the
        keys before anything is written. Other iterables are read in chunks, so a count that
        differs is found where one side runs out, after the records before were written; inside
        ``with`` the error discards every shard anyway (pass a list to write nothing on it)."""
        if keys is not None:
            if self.rolling:
                raise InvalidArgumentError("routing by key needs a fixed num_shards, not rolling shards")
            if hasattr(records, "__len__"):
                # Counted before anything is written; an iterator of keys is read one past the
                # records, to tell an extra key.
                counted = len(keys) if hasattr(keys, "__len__") else None
                if counted is None:
                    keys = list(itertools.islice(keys, len(records) + 1))
                if len(keys) != len(records):
                    raise _key_count(self.prefix, len(records), len(keys) if counted is not None or
                                     len(keys) < len(records) else f"more than {len(records)}")
        if self.rolling:
            for record in records:
                self.write(record)
            return
        n = len(self._writers)
        keys_iter = None if keys is None else iter(keys)
        done = 0  # records written
        for chunk in _chunks(records, 1024):
            groups = collections.defaultdict(list)
            if keys_iter is None:
                with self._lock:
                    self._check_open()
                    start = self._next
                    self._next = (start + len(chunk)) % n
                for s in range(min(n, len(chunk))):
                    groups[(start + s) % n] = chunk[s::n]
            else:
                # Unsized records are counted as they come: a chunk short of keys is refused
                # whole, but the chunks before it are written.
                chunk_keys = list(itertools.islice(keys_iter, len(chunk)))
                if len(chunk_keys) < len(chunk):
                    raise _key_count(self.prefix, f"at least {done + len(chunk)}", done + len(chunk_keys),
                                     f"the {done} records before were written")
                for record, key in zip(chunk, chunk_keys):
                    groups[key_to_shard(key, n)].append(record)
            for shard, group in groups.items():
                self._writers[shard].write_many(group)
            done += len(chunk)
        if keys_iter is not None and next(keys_iter, _NONE) is not _NONE:
            raise _key_count(self.prefix, done, f"more than {done}", "the records were written")

    def close(self) -> list[ShardInfo]:
        """Commit every shard (renaming rolled shards to ``-of-N``); returns ``shards``."""
        with self._lock:
            if self.closed:
                return self.shards
            self.closed = True
            n = len(self._writers)
            paths = [shard_path(self.prefix, i, n, self.suffix) for i in range(n)]
            with self._naming_rolled():
                close_group(self._writers, paths)
            self.shards = [ShardInfo(w.path, w.records_written) for w in self._writers]
            return self.shards

    def abort(self) -> None:
        """Discard every shard; nothing appears under any final name."""
        with self._lock:
            self.closed = True
            abort_group(self._writers)

    def _check_open(self):
        if self.closed:
            raise TFRecordError(f"{self.prefix}: write to a closed ShardedWriter")

    def _add_shard(self, num_shards):
        i = len(self._writers)
        name = shard_path(self.prefix, i, num_shards, self.suffix) if num_shards else self._provisional(i)
        self._writers.append(TFRecordWriter(name, atomic=True, **self._options))

    def _provisional(self, i) -> str:
        """Rolled shard i's name until close: its count is unknown until then, so its
        temporary file carries this name and is renamed to -of-N at close."""
        name = f"{self.prefix}-{i:05d}{self.suffix}"
        if _fs.is_url(name):
            # An object store's upload completes under its key: keep that key hidden (globs
            # and directory listings skip it) until the rename to -of-N.
            head, _, base = name.rpartition("/")
            name = f"{head}/.{base}.partial"
        return name

    @contextlib.contextmanager
    def _naming_rolled(self):
        """Errors of rolled shards name them as they will be found, ``prefix-00002-of-NNNNN``,
        not by the provisional name that no file ever has."""
        try:
            yield
        except BaseException as exc:
            if self.rolling:
                for i in range(len(self._writers) + 1):  # + 1: a shard failing to open
                    _rename_in_error(exc, self._provisional(i), f"{self.prefix}-{i:05d}-of-NNNNN{self.suffix}")
            raise

    def _writer_for(self, key):
        if key is not None:
            self._check_open()
            if self.rolling:
                raise InvalidArgumentError("routing by key needs a fixed num_shards, not rolling shards")
            return self._writers[key_to_shard(key, len(self._writers))]
        with self._lock:
            self._check_open()
            i = self._next
            self._next = (i + 1) % len(self._writers)
            return self._writers[i]

    def _rolled_writer(self, record):
        """The current rolling shard, or a new one if record would take it past a limit;
        the caller holds the lock until the record is written."""
        w = self._writers[-1]
        size = _frame_bytes(record)
        if size is None:
            return w  # whose write raises the error: no new shard for a record that is not one
        if w.records_written and (
            (self.max_records is not None and w.records_written >= self.max_records)
            or (self.max_bytes is not None and w.bytes_written + size > self.max_bytes)
        ):
            w._park()  # full: a rolled shard holds no descriptor until the commit
            with _descriptors(None, self._options["index"], self.prefix):
                self._add_shard(None)
            w = self._writers[-1]
        return w


_NONE = object()


def _rename_in_error(exc, old: str, new: str) -> None:
    """Where exc names the file old (its sidecar too), it names new instead, in place."""
    if isinstance(exc, TFRecordError):
        named = [exc.path, exc.detail, exc.hint]
        exc.path, exc.detail, exc.hint = (x.replace(old, new) if isinstance(x, str) else x for x in named)
        if [exc.path, exc.detail, exc.hint] != named:
            exc.args = (exc._render(),)
    elif isinstance(exc, OSError):
        for attr in ("filename", "filename2"):
            name = getattr(exc, attr)
            if isinstance(name, str) and old in name:
                setattr(exc, attr, name.replace(old, new))


@contextlib.contextmanager
def _descriptors(num_shards, index, prefix):
    """Opening shards (num_shards at once, or None: a rolled one): running out of file
    descriptors (EMFILE) is an error that says how many the shards need and what to do."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        try:
            import resource

            limit = f" (ulimit -n is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]})"
        except (ImportError, OSError, ValueError):
            limit = ""
        need = (num_shards or 1) * (2 if index else 1)
        raise TFRecordError(
            f"out of file descriptors{limit}: " + (f"{num_shards} shards written at once keep {need} files open"
                                                   if num_shards else f"a new shard needs {need}")
            + (" (a shard and its index)" if index else ""), path=prefix,
            hint="Raise the limit (ulimit -n, or resource.setrlimit(resource.RLIMIT_NOFILE, ...)), write "
            "fewer shards, or roll shards (max_records_per_shard / max_bytes_per_shard) or split() a "
            "file: those hold one shard open at a time",
        ) from exc


def _key_count(prefix, records, keys, written="nothing was written") -> InvalidArgumentError:
    return InvalidArgumentError(f"write_many got {records} records but {keys} keys", path=prefix,
                                hint=f"pass one key per record; {written}")


def _frame_bytes(record) -> int | None:
    """The record's frame size; None if it is not bytes-like (the writer raises a clear error)."""
    try:
        return memoryview(record).nbytes + _native.framing.OVERHEAD_BYTES
    except TypeError:
        return None


# -- write_parallel ---------------------------------------------------------------------

def write_parallel(items: Iterable[Any], encode: Callable[[Any], Any], prefix: PathLike, num_shards: int,
                   num_workers: int | None = None, executor: Any = "thread", *, suffix: str = DEFAULT_SUFFIX,
                   compression: Compression = None, index: bool = False, fsync: bool = False,
                   chunk_size: int = 256, batched: bool = False, progress: Progress = None,
                   mp_context: Any = None, storage_options: StorageOptions = None,
                   compression_level: int | None = None) -> list[ShardInfo]:
    """Encode ``items`` with ``encode(item) -> bytes`` in parallel and write them to
    ``num_shards`` shards; return a ShardInfo (path, records) per shard.

    Items are cut into chunks of ``chunk_size``; chunk ``k`` goes to shard
    ``k % num_shards``, so item ``i`` lands in shard ``(i // chunk_size) % num_shards`` and
    the output is the same whatever the number of workers. Records keep input order within
    a shard.

    executor: "thread" (encode runs in a thread pool; best when encode releases the GIL, as
    numpy and the compiled codec do), "process" (a process pool; encode and the items must
    be picklable, so encode must be a module-level function, not a lambda or closure, and a
    script must guard its entry point with ``if __name__ == "__main__":``), or any
    ``concurrent.futures.Executor``. Workers also frame the records (CRCs included); each
    shard has one writer thread (``num_workers`` threads share the shards), so compression
    runs in parallel across shards.
    mp_context: the multiprocessing context for "process" (default "forkserver" where
    available, else "spawn"; both are safe with the writer threads).

    batched=True: encode receives a whole chunk (a list of up to chunk_size items) and
    returns an iterable of records for it, any number of them; a vectorised encoder (a block
    of NumPy rows per item, ``chunk_size=1``) fits this way. Errors then name the chunk's
    first item. Returning ``encode_examples(block, as_batch=True)`` (a framed RecordBatch)
    is the fastest: it is encoded and framed without the GIL, so workers run in parallel.

    compression, compression_level, index, fsync: as in TFRecordWriter, for each shard.

    Memory stays bounded: at most ``2 * num_workers`` chunks are being encoded and two per
    shard are queued for writing; ``items`` may be any iterable, consumed lazily.

    prefix may be an fsspec URL (``s3://bucket/out/train``, with ``storage_options``); each
    shard is then uploaded as it is written and completed only when all shards succeed.

    If encode raises for an item, an EncodeError names the item's position and its shard;
    pending work is cancelled, running workers finish their chunk, and every shard is
    discarded: no file is left under a final name. Shards appear only when all succeed.
    """
    num_shards = positive_int("num_shards", num_shards)
    chunk_size = positive_int("chunk_size", chunk_size)
    if num_workers is not None:
        num_workers = positive_int("num_workers", num_workers, hint="or None for one per CPU")
    _check_prefix(prefix)
    check_shard_index(index)
    options = writer_options(compression, compression_level, index=index, fsync=fsync,
                             storage_options=storage_options, path=os.fspath(prefix))
    num_workers = num_workers or os.cpu_count() or 1
    pool, own_pool = _make_pool(executor, num_workers, encode, mp_context)
    total = len(items) if hasattr(items, "__len__") else None
    writers = []
    failure: list[BaseException] = []  # first failure in a writer thread
    threads = []
    pending = collections.deque()
    # The bar counts items, as its total does (batched encoders return any number of records).
    bar = _progress(total=total, desc=f"write {os.path.basename(os.fspath(prefix))}", enabled=progress,
                    unit="item")
    try:
        with _descriptors(num_shards, index, os.fspath(prefix)):
            for i in range(num_shards):  # appended one by one: a failed open aborts those before it
                writers.append(TFRecordWriter(shard_path(prefix, i, num_shards, suffix), **options))
        # One writer thread per encoding worker, not per shard: thread t owns the shards
        # t, t + n_threads, ... (so each shard keeps one writer and its order). Writes run
        # without the GIL; more threads than cores would only take turns with the encoders.
        n_threads = min(num_shards, num_workers)
        per_thread = -(-num_shards // n_threads)
        queues = [queue.Queue(maxsize=2 * per_thread) for _ in range(n_threads)]
        for i, q in enumerate(queues):
            t = threading.Thread(target=_shard_loop, args=(writers, q, failure), daemon=True,
                                 name=f"tfrecord_lite-shards-{i}")
            t.start()
            threads.append((t, q))

        def collect():
            shard, first, size, future = pending.popleft()
            try:
                frames, count, lengths = future.result()
            except EncodeError:
                raise
            except Exception as exc:
                raise EncodeError(
                    f"items {first}..{first + size - 1} (shard {shard} of {num_shards}) could not be "
                    f"encoded by a worker: {type(exc).__name__}: {exc}",
                    item=first, shard=shard, path=writers[shard].path,
                    hint="with executor='process', encode and the items must be picklable",
                ) from exc
            queues[shard % len(queues)].put((shard, frames, count, lengths))
            bar.update(size)
            if failure:
                raise failure[0]

        for k, chunk in enumerate(_chunks(items, chunk_size)):
            shard = k % num_shards
            future = pool.submit(_encode_chunk, encode, chunk, k * chunk_size, shard, num_shards,
                                 writers[shard].path, batched)
            pending.append((shard, k * chunk_size, len(chunk), future))
            while len(pending) > 2 * num_workers:
                collect()
        while pending:
            collect()
        for t, q in threads:
            q.put(None)
            t.join()
        threads = []
        if failure:
            raise failure[0]
        close_group(writers)
        return [ShardInfo(w.path, w.records_written) for w in writers]
    except BaseException as exc:
        failure.append(exc)  # writer threads drop what is still queued
        for _, _, _, future in pending:
            future.cancel()
        for t, q in threads:
            q.put(None)
            t.join()
        abort_group(writers)
        raise
    finally:
        bar.close()
        if own_pool:
            pool.shutdown(wait=True, cancel_futures=True)


def _make_pool(executor, num_workers, encode, mp_context):
    import concurrent.futures as cf

    if isinstance(executor, cf.Executor):
        return executor, False
    if executor == "thread":
        return cf.ThreadPoolExecutor(num_workers, thread_name_prefix="tfrecord_lite-encode"), True
    if executor == "process":
        try:
            pickle.dumps(encode)
        except Exception as exc:
            raise InvalidArgumentError(
                f"executor='process' needs a picklable encode function, but {encode!r} is not ({exc})",
                hint="define encode at module level (not a lambda, closure or local function), "
                "or use executor='thread'",
            ) from None
        import multiprocessing

        if mp_context is None:
            methods = multiprocessing.get_all_start_methods()
            mp_context = "forkserver" if "forkserver" in methods else "spawn"
        if isinstance(mp_context, str):
            mp_context = multiprocessing.get_context(mp_context)
        return cf.ProcessPoolExecutor(num_workers, mp_context=mp_context), True
    raise InvalidArgumentError(f"executor must be 'thread', 'process' or a concurrent.futures.Executor, "
                               f"not {executor!r}")


def _encode_chunk(encode, chunk, first, shard, num_shards, path, batched=False):
    """Worker: encode and frame one chunk; the frames travel back as one bytearray with
    their data lengths (so that a shard's index needs no second look at them), or as the
    RecordBatch that a batched encode returned."""
    j, records = 0, []
    what = f"items {first}..{first + len(chunk) - 1}" if batched else f"item {first}"
    try:
        if batched:
            records = encode(chunk)
            if type(records) is RecordBatch:  # the shard's writer takes it as it is
                return records, len(records), None
            if isinstance(records, (bytes, bytearray, memoryview, str)):  # its items would be ints
                raise _NotARecord(f"encode returned one {type(records).__name__}; with batched=True it "
                                  "returns an iterable of the chunk's records (a list of bytes)")
            records = list(records)
        else:
            for j, item in enumerate(chunk):
                what = f"item {first + j}"
                records.append(encode(item))
                if type(records[-1]) is not bytes:  # not a record encode_frames takes: this item's error
                    _check_record(records[-1], "")
        # One core call frames them all, without the GIL for all but the smallest chunks.
        try:
            out = _native.framing.encode_frames(records)
        except _native.BUFFER_ERRORS:
            for k, record in enumerate(records):  # name the record that is not one
                _check_record(record, f" as record {k} of the {len(records)} it returned")
            raise
        lengths = _native.spans.value_lengths(records)
        if lengths is None:  # not all bytes: other buffers
            lengths = np.array([memoryview(r).nbytes for r in records], np.int64)
    except Exception as exc:
        returned = isinstance(exc, _NotARecord)  # encode did not raise: what it gave is no record
        raise EncodeError(
            f"{what} (shard {shard} of {num_shards}): "
            + (str(exc) if returned else f"encode raised {type(exc).__name__}: {exc}"),
            item=first + j, shard=shard, path=path,
            hint="No shard was written; fix encode or the item and run again",
        ) from (exc.__cause__ if returned else exc)
    return out, len(lengths), lengths


class _NotARecord(Exception):
    """encode returned something that is not a bytes-like record (it did not raise)."""


def _check_record(record, where) -> None:
    try:
        _native.framing.check_buffer(record)
    except _native.BUFFER_ERRORS as exc:
        raise _NotARecord(f"encode returned a value of type {type(record).__name__}{where}, "
                          f"not a bytes-like record ({exc})") from exc


def _shard_loop(writers, q, failure):
    """The one writer thread of some shards: append framed chunks (shard, frames, count)
    to their shard's writer until None arrives."""
    while True:
        got = q.get()
        if got is None:
            return
        if failure:
            continue  # keep draining so the producer never blocks on a full queue
        shard, frames, count, lengths = got
        try:
            writers[shard]._write_frames(frames, count, lengths)
        except BaseException as exc:
            failure.append(exc)
