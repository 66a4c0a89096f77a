"""Multi-file reading pipeline: ``TFRecordDataset``, its options, and its resumable state.

Files are resolved and sharded by ``tfrecord_lite.files``. Each ``iter()`` is a
``_pipeline.Run``: the TF-compatible interleave of the files, seeded shuffling, batching
and parsing in a thread pool, in bounded descriptors and memory. ``tfrecord_lite._resume``
says where one stands, so that a later one can go on from there. What a dataset yields is
a pure function of the files, the options, the seed and the epoch when
``deterministic=True``.
"""

from __future__ import annotations

import operator
import random
import sys
import threading
from typing import Any, Iterator

import numpy as np

from ._typing import Compression, Features, Files, ParseFn, StorageOptions
from .errors import ArgumentTypeError, InvalidArgumentError, TFRecordError, positive_int
from .features import check_spec_mapping
from .files import check_shard, resolve_files, shard_plan
from .io import normalize_compression
from ._pipeline import Run
from ._resume import check_state
from .parsing import make_parse
from .reader import DEFAULT_MAX_RECORD_BYTES, ON_CORRUPT, check_max_record_bytes

__all__ = ["TFRecordDataset"]

_STATE_VERSION = 2  # 2 adds the file positions ("cursor"); version 1 states still load


class TFRecordDataset:
    """Records of many TFRecord files as one stream of records, parsed examples, or batches.

    files: list of paths, glob pattern, directory, or one path; fsspec URLs
        (``s3://bucket/train-*``) too, resolved and read through fsspec with
        ``storage_options``.
    features: a feature spec for ``tfrecord_lite.parse_example``; None yields raw ``bytes``.
    parse: instead of ``features``, any callable taking a list of records and returning a
        batch (run in the worker threads).
    bytes_output: "column" gives bytes features as BytesColumn (see ``parse_example``).
    output: "arrow" yields ``pyarrow.RecordBatch`` batches (``tfrecord_lite.arrow.to_arrow``;
        needs features and batch_size).
    batch_size / drop_remainder: yield lists of records (raw) or parsed batches; unbatched
        parsed output is one dict per record.
    num_threads: worker threads for reading, CRC checks and parsing.
    max_open_files: upper bound on descriptors (remote files: open handles, each holding
        up to two read blocks) held at once, whatever the number of files.
    cycle_length / block_length: interleave ``cycle_length`` files, ``block_length`` records
        from each in turn, with exactly the order of TensorFlow's
        ``Dataset.from_tensor_slices(files).interleave(TFRecordDataset, cycle_length,
        block_length)``. cycle_length defaults to ``min(num_threads, max_open_files)``; set it
        explicitly for an order that does not change with num_threads.
    deterministic: False lets whichever open file has records ready go first (faster when
        files are slow or uneven); resumable state then is unavailable.
    shuffle_files / shuffle_buffer / seed: per-epoch file-order shuffle and a TF-style record
        shuffle buffer, reproducible for a seed and epoch, different across epochs. seed None
        draws one at construction (kept in ``state_dict()``).
    shard: (index, count), see ``tfrecord_lite.files.shard_plan``.
    compression / on_corrupt / check_crc / max_record_bytes / memory_map: as in ``TFRecordReader``.
    ``memory_map=True`` scans local files in the page cache, with no read calls or copies:
    raw batches are then views of the files' pages, and the pages read count as the
    process's resident memory for as long as the dataset keeps the mappings (from epoch to
    epoch, up to 1,024 files). Not under the pure-Python backend before Python 3.13, whose
    mappings each keep a descriptor while records of theirs live: the files are read.
    prefetch: parse tasks kept ready ahead of the consumer (default 2 x num_threads), fewer
        where they would hold over 128 MiB of records (large records). A task is one batch;
        small batches of a spec of only FixedLenFeature / RawTensorFeature are parsed
        several at a time (about 4,096 records or 4 MiB, times num_threads // 4 from 8
        threads on, at most 4 times), each batch's arrays then being views of the task's.
        Raw records are read ahead one piece per open file whatever this is; batched raw
        output is made as it is taken (it is index arrays over the read blocks).
    num_epochs: passes per ``iter()`` (0: none); None repeats forever. Each ``iter()`` continues the
        epoch count (or call ``set_epoch``), so a new pass reshuffles. Each epoch is batched
        on its own (TensorFlow's ``.batch(...).repeat(num_epochs)``): no batch spans two.

    Worker errors are raised by the consumer's ``next()`` with their path/offset/index, after
    every record before the bad one (whole batches; parsed), as TensorFlow delivers them.
    Leaving a loop early (break, ``close()``, garbage collection) stops the threads and
    closes the files.
    """

    def __init__(self, files: Files, features: Features | None = None, *, parse: ParseFn | None = None,
                 bytes_output: str = "object", output: str = "numpy",
                 batch_size: int | None = None, drop_remainder: bool = False, num_threads: int = 1,
                 max_open_files: int = 16, cycle_length: int | None = None, block_length: int = 1,
                 deterministic: bool = True, shuffle_files: bool = False, shuffle_buffer: int = 0,
                 seed: int | None = None, shard: tuple[int, int] | None = None,
                 compression: Compression = "auto", on_corrupt: str = "raise", prefetch: int | None = None,
                 num_epochs: int | None = 1, check_crc: bool = True,
                 storage_options: StorageOptions = None, memory_map: bool = False,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        if features is not None and parse is not None:
            raise InvalidArgumentError("pass features or parse, not both")
        if features is not None:
            check_spec_mapping(features)
        if parse is not None and not callable(parse):
            raise ArgumentTypeError(f"parse must be a function of a batch of records, not {parse!r:.80}")
        if on_corrupt not in ON_CORRUPT:
            raise InvalidArgumentError(f"on_corrupt must be one of {ON_CORRUPT}, not {on_corrupt!r}")
        self.storage_options = storage_options
        self.files = resolve_files(files, storage_options)
        self.features = features
        self.parse = parse
        self.batch_size = positive_int("batch_size", batch_size, allow_none=True)
        if output not in ("numpy", "arrow") or bytes_output not in ("object", "column"):
            raise InvalidArgumentError(f"output must be 'numpy' or 'arrow' and bytes_output 'object' or 'column', "
                                       f"not {output!r} and {bytes_output!r}")
        if output == "arrow" and (features is None or self.batch_size is None):
            raise InvalidArgumentError("output='arrow' yields RecordBatches parsed with a spec",
                                       hint="pass features= and batch_size=")
        self.bytes_output, self.output = bytes_output, output
        self.drop_remainder = bool(drop_remainder)
        self.num_threads = positive_int("num_threads", num_threads)
        self.max_open_files = positive_int("max_open_files", max_open_files)
        if cycle_length is None:
            cycle_length = min(self.num_threads, self.max_open_files)
        self.cycle_length = positive_int("cycle_length", cycle_length)
        if self.cycle_length > self.max_open_files:
            raise InvalidArgumentError(
                f"cycle_length={cycle_length} would hold more files open than max_open_files="
                f"{max_open_files}", hint="lower cycle_length or raise max_open_files")
        self.block_length = positive_int("block_length", block_length)
        self.deterministic = bool(deterministic)
        self.shuffle_files = bool(shuffle_files)
        self.shuffle_buffer = _integer("shuffle_buffer", shuffle_buffer or 0)
        if self.shuffle_buffer < 0:
            raise InvalidArgumentError("shuffle_buffer must be >= 0")
        self.seed = _integer("seed", seed) if seed is not None else random.SystemRandom().randrange(2**63)
        self.shard = check_shard(shard)
        self._positions, self._record_rule = shard_plan(len(self.files), self.shard)
        self.compression = normalize_compression(compression, allow_auto=True)
        self.on_corrupt = on_corrupt
        self.check_crc = bool(check_crc)
        self.max_record_bytes = check_max_record_bytes(max_record_bytes)
        self.memory_map = bool(memory_map)
        self.prefetch = positive_int("prefetch", prefetch if prefetch is not None else 2 * self.num_threads)
        # 0 reads nothing, as tf.data's repeat(0).
        self.num_epochs = positive_int("num_epochs", num_epochs, allow_none=True, allow_zero=True,
                                       hint="pass None to repeat forever")
        self._next_epoch = 0
        self._resume = None  # (epoch, elements, stop epoch, file positions) for the next iter()
        self._position = None  # the newest iterator's _Position
        # File positions are tracked (a small cost per chunk of records) once state_dict() or
        # load_state_dict() has been called, from the next epoch that starts.
        self._track_positions = False
        self._buffers = None  # read buffers its iterations reuse (_pipeline.Run)
        self._maps = None  # with memory_map, the files' mappings they reuse (_pipeline.Run)

    # -- public ------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if self._resume is not None:
            start, skip, stop, cursor = self._resume
        else:
            start, skip, cursor = self._next_epoch, 0, None
            stop = None if self.num_epochs is None else start + self.num_epochs
        self._resume = None
        self._next_epoch = start + 1 if stop is None else stop
        it = _Iterator(self, start, stop, skip, cursor)
        self._position = it.position
        return it

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` start at this epoch (its shuffles depend on it). A state
        loaded for this same epoch keeps its position: a training loop calls set_epoch as each
        epoch starts, the one it resumes included."""
        epoch = _epoch(epoch)
        if self._resume is not None and self._resume[0] == epoch:
            return
        self._next_epoch = epoch
        self._resume = None

    def num_elements(self) -> int:
        """Elements one epoch yields for this dataset's shard: records, or batches when
        batch_size is set (the last short one counted unless drop_remainder). Each file's
        record count comes from its index sidecar, else from one scan whose result is kept
        as the sidecar (see ``count_records``); a file that scan finds damaged is read as the
        dataset reads it and counted as it yields (``on_corrupt``'s records dropped; under
        "raise", its error). A sidecar written before the damage counts the dropped records."""
        from .index import count_shard

        total = count_shard(self.files, self._positions, self._record_rule, self.storage_options,
                            dict(compression=self.compression, check_crc=self.check_crc, on_corrupt=self.on_corrupt,
                                 max_record_bytes=self.max_record_bytes))
        if self.batch_size is None:
            return total
        return total // self.batch_size if self.drop_remainder else -(-total // self.batch_size)

    def state_dict(self) -> dict[str, Any]:
        """Where the newest iteration stands: the next ``iter()`` of a dataset built with the
        same files and options, after ``load_state_dict``, yields exactly what this one would
        have yielded next, shuffle included. How resuming seeks: ``tfrecord_lite._resume``.
        Positions are tracked in epochs that start after the first call of state_dict() or
        load_state_dict(); a state from an untracked epoch resumes by reading again."""
        self._need_deterministic("state_dict")
        self._track_positions = True
        epoch, elements, stop, cursor = self._resume_point()
        return {"version": _STATE_VERSION, "epoch": epoch, "elements": elements, "stop_epoch": stop,
                "seed": self.seed, "fingerprint": self._fingerprint(), "cursor": cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` output on the next ``iter()``."""
        self._need_deterministic("load_state_dict")
        self._resume = check_state(state, _STATE_VERSION, self._fingerprint(), self.cycle_length)
        self.seed = int(state["seed"])
        self._track_positions = True

    def __getstate__(self):
        # A copy carries the position, not the running iteration: its iter() goes on from there.
        state = self.__dict__.copy()
        state["_position"] = None
        state["_buffers"] = state["_maps"] = None
        if self.deterministic:
            state["_resume"] = self._resume_point()
        return state

    # -- internals ---------------------------------------------------------------------

    def _need_deterministic(self, method):
        # Resuming goes by positions in the order; where thread timing picks the order, the
        # records after a position are unknown (a state loaded here dropped those of the
        # files it had open).
        if not self.deterministic:
            raise TFRecordError(f"{method}() needs deterministic=True: otherwise the order "
                                "depends on thread timing and cannot be replayed",
                                hint="build the dataset with deterministic=True to save or resume its position")

    def _resume_point(self):
        """(epoch, elements, stop epoch, file positions or None) of the newest iteration."""
        pos = self._position
        if self._resume is not None:
            return self._resume
        if pos is not None and not pos.exhausted:
            cursor = pos.cursor
            if pos.elements and cursor is not None and cursor.epoch == pos.epoch:
                cursor = cursor.snapshot(pos.elements * (self.batch_size or 1))
            else:
                cursor = None
            return pos.epoch, pos.elements, pos.stop, cursor
        epoch = self._next_epoch
        return epoch, 0, None if self.num_epochs is None else epoch + self.num_epochs, None

    def _fingerprint(self):  # the options of _resume.FINGERPRINT
        return [list(self.files), self.shard and list(self.shard), self.batch_size, self.drop_remainder,
                self.cycle_length, self.block_length, self.shuffle_files, self.shuffle_buffer,
                self.features is not None or self.parse is not None]

    def _rng(self, epoch, stage):
        # One independent stream per (seed, epoch, stage): reproducible, and epochs differ.
        # SeedSequence takes no negative entropy: a negative seed (hash() of a name) gets
        # words of its own, apart from every other seed's.
        words = [self.seed, epoch, stage] if self.seed >= 0 else [-self.seed, epoch, stage, 1]
        state = np.random.SeedSequence(words).generate_state(2, np.uint64)
        return random.Random(int(state[0]) << 64 | int(state[1]))

    def _epoch_files(self, epoch):
        positions = list(self._positions)
        if self.shuffle_files:
            self._rng(epoch, 0).shuffle(positions)
        return positions

    def _reuse(self, other: TFRecordDataset) -> None:
        """Take over another dataset's read buffers and mappings (an epoch's successor)."""
        self._buffers, self._maps = other._buffers, other._maps

    def _parse_fn(self):
        return make_parse(self.features, self.parse, self.bytes_output, self.output)

class _Iterator:
    """The consumer's handle on one iteration. The generator and the workers reference only
    the Run, never this object, so dropping the last reference to it (``break``) frees it at
    once and its ``__del__`` stops the run."""

    def __init__(self, ds: TFRecordDataset, start, stop, skip, cursor=None):
        self._run = Run(ds, start, stop, skip, cursor)
        self._gen = self._run.generate()
        self.position = self._run.position

    @property
    def records_read(self) -> int:
        """Raw records the workers have read so far (read-ahead included)."""
        return self._run.records_read

    def __iter__(self):
        return self

    def __next__(self):
        try:
            out = next(self._gen)
        except BaseException:
            self.close()
            raise
        self.position.elements += 1
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    # Bound here: as the interpreter ends, this module's names may be cleared already.
    _finalizing = staticmethod(sys.is_finalizing)

    def close(self) -> None:
        """Stop the workers, wait for reads in flight, close every file."""
        # Not as the interpreter ends, when a generator holding the iteration (a torch
        # dataset's, or a user's with ``with``) closes it as the modules are cleared:
        # concurrent.futures' exit hook has joined the threads, and what the pool's shutdown
        # and the resume position need may be gone (numpy imports some methods on first use).
        if self._finalizing():
            return
        if self._run.in_worker():
            # Garbage collection in one of the run's own workers collected this iterator (a
            # reference cycle): a thread cannot join itself, so another one stops the run.
            threading.Thread(target=self._stop, name="tfrecord_lite-close", daemon=True).start()
            return
        self._stop()

    def _stop(self):
        self._run.close()
        self._gen.close()

def _integer(name, value) -> int:
    """value as an int: a float or a str is refused, not truncated or parsed."""
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{name} must be an integer, not {value!r}") from None


def _epoch(value) -> int:
    """An epoch number: an integer >= 0 (each seeds its shuffles)."""
    epoch = _integer("epoch", value)
    if epoch < 0:
        raise InvalidArgumentError(f"epoch must be >= 0, not {epoch}", hint="count epochs from 0")
    return epoch
