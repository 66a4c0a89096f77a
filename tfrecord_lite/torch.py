"""PyTorch adapters; torch is imported on first use of a class here, never by
``import tfrecord_lite``.

``TFRecordIterableDataset`` streams through ``TFRecordDataset`` and shards itself: across
DataLoader workers (``torch.utils.data.get_worker_info()``) and across processes of
``torch.distributed`` (rank x world size, when initialized; a worker started by spawn or
forkserver takes its loader process's; ``rank=`` replaces it: a data-parallel rank), on top of
any ``shard=`` given. ``worker_shard()`` gives the same (index, count) to an IterableDataset
of one's own.
Every record reaches exactly one (process, worker) pair. ``TFRecordMapDataset`` is map-style
over indexed files (``IndexedDataset``), for samplers. ``as_tensors=True`` turns NumPy arrays
into tensors with ``torch.from_numpy`` (zero copy; sparse and ragged parts, those in a
parse function's tuples and lists and NumPy scalars too, a big-endian or flipped array
copied); raw records stay ``bytes``, a batch of them a 1-D object array of ``bytes`` (as a
bytes feature is), and datetime64 arrays stay arrays.

Every class here pickles (DataLoader workers started by fork, spawn or forkserver).

Epochs: each pass starts the next epoch, so shuffles differ from pass to pass and depend on
``seed`` and the epoch only. A pass is an ``iter()`` of the dataset in the main process, or one
pass of a DataLoader over it, whatever its workers (none, persistent or not; any start
method): the dataset and its workers' copies share one count. ``set_epoch(e)`` makes the next
pass epoch ``e``, and the count goes on from there; calling it each epoch (as for
DistributedSampler) gives exactly the epochs set, and a state loaded for that epoch keeps its
position (as TFRecordDataset's does). A process the dataset is handed to
otherwise (a spawned rank) counts apart.

``len(ds)``: what ``iter(ds)`` yields here for one epoch (times ``num_epochs``): records, or
batches with ``batch_size`` (honouring ``drop_remainder``), of the shard of the worker and
rank that asks (in the main process, the rank's); asked by ``len(DataLoader)`` with workers,
what makes that the batches they yield, each worker's short last one included. Counts come
from index sidecars, or from one scan kept as a sidecar (``TFRecordDataset.num_elements``).

``state_dict()`` / ``load_state_dict()``: torchdata's ``StatefulDataLoader`` resumes
mid-epoch from them, per worker; the state holds file byte offsets, so resuming seeks.

Crossing to the main process: in a DataLoader worker each batch crosses as one buffer in
shared memory the worker reuses, plus a small layout (``tfrecord_lite._crossing``); the main
process gets the same structure, types and dtypes. Collate functions in the worker see the
dict or list as it is.

JAX: ``tfrecord_lite.jax.device_put`` moves parsed batches to a device, bytes kept on the host.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from typing import Any

from ._crossing import _packed
from ._typing import Features, Files
from .batch import RecordBatch
from .dataset import TFRecordDataset, _epoch
from .errors import InvalidArgumentError, TFRecordError
from .example import RaggedValue, native_order
from .files import check_shard, resolve_files, shard_plan
from .random_access import IndexedDataset

__all__ = ["TFRecordIterableDataset", "TFRecordMapDataset", "worker_shard"]

_classes: dict = {}


def _distributed() -> tuple[int, int] | None:
    """(rank, world size) where torch.distributed is initialized in this process."""
    import torch.distributed as dist

    return (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() else None


def _rank_and_worker(rank: tuple[int, int] | None = None, worker: tuple[int, int] | None = None,
                     chosen: tuple[int, int] | None = None) -> tuple[tuple[int, int], tuple[int, int]]:
    """((rank, world size), (worker, workers)) of the calling process; rank: the loader
    process's, for a worker started by spawn or forkserver (torch.distributed is not
    initialized there), else torchrun's there (_launched_rank); worker: that of a worker
    asked about from the main process; chosen: the user's rank, instead of all those."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if worker is None:
        worker = (info.id, info.num_workers) if info is not None else (0, 1)
    return chosen or _distributed() or rank or (info is not None and _launched_rank()) or (0, 1), worker


def _launched_rank() -> tuple[int, int] | None:
    """(RANK, WORLD_SIZE) of the environment, which torchrun sets for each rank and a worker
    inherits, in a process not started by fork (a forked worker sees its loader process's
    torch.distributed, initialized or not)."""
    process = multiprocessing.current_process()
    method = getattr(process, "_start_method", None) or multiprocessing.get_start_method(allow_none=True)
    if method in (None, "fork"):
        return None
    try:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    return (rank, size) if 0 <= rank < size else None


def _compose(outer, inner) -> tuple[int, int]:
    """Shard inner of the part shard outer holds: outer (u, n) keeps the positions u, u + n,
    ...; their i-th, (i + c)-th, ... are u + n * i, u + n * (i + c), ..., shard (u + n * i,
    n * c). For records, kept where (file + record) % count == index, it splits outer's
    residue into c alike."""
    if outer is None:
        return inner
    (u, n), (i, c) = (int(v) for v in outer), inner
    return u + n * i, n * c


def worker_shard(shard: tuple[int, int] | None = None, rank: tuple[int, int] | None = None) -> tuple[int, int]:
    """(index, count) for this DataLoader worker of this distributed rank, composed with shard:
    the workers' shards split the rank's, and the ranks' split shard.

    rank: (rank, world size), by default torch.distributed's. A worker started by spawn or
    forkserver has no process group: there it is RANK and WORLD_SIZE of the environment
    (torchrun's), else pass the rank, noted as the dataset is made in the loader's process."""
    rank, worker = _rank_and_worker(chosen=check_shard(rank, "rank"))
    return _compose(_compose(check_shard(shard), rank), worker)


def _plan(files, shard, storage_options, rank=None, worker=None, chosen=None):
    """(files, shard) that this worker of this rank reads: shard of the data, then the rank's
    shard of that, then the worker's. Where a level takes whole files (see shard_plan) the
    next shards those files, not the data: so the workers read exactly what the rank's shard
    holds (its len()), whatever their number, and the ranks what shard holds."""
    levels = [level for level in _rank_and_worker(rank, worker, chosen) if level[1] > 1]
    if not levels:
        return files, shard
    if shard is None:
        shard = levels.pop(0)
    if levels:
        files = resolve_files(files, storage_options)
    for level in levels:
        positions, rule = shard_plan(len(files), shard)
        if rule is None:
            files, shard = [files[k] for k in positions], level
        else:
            shard = _compose(shard, level)
    return files, shard


_ROWS = 64  # processes that iterate the dataset or run DataLoaders over it, each its own count
_SLOTS = 8  # passes whose workers may still be joining: a fast persistent worker can start
# the next pass before a slow one has started this one
_MAX = 2**63 - 1
_LOCK_WAIT = 60.0  # seconds


class _EpochCount:
    """The epoch the next pass starts, shared by a dataset and the copies its DataLoader
    workers run (a forked worker inherits the memory, a spawned one gets it as it starts).

    A pass is an iter() in a process, or one pass of a DataLoader that process runs: its
    workers each call iter() once, and the first of them takes the epoch for all. The workers
    of a pass know it by their loader's process, its base seed and their copy's count of
    iter() calls (persistent workers keep their copies); a pass whose workers have all joined
    is done, so a later one under the same key (a loader seeded alike) is a new pass. Each
    process has a count of its own, which starts at the creating process's: processes that got
    the dataset otherwise than as DataLoader workers (spawned ranks, one per GPU) count apart.
    Layout: [clock], per row (pid, next epoch, clock), per slot (pid, seed, count, workers
    joined, epoch, clock at its start), per row whether set_epoch chose its next epoch."""

    def __init__(self, epoch: int = 0, cell=None, lock=None, owner: int | None = None):
        import multiprocessing.sharedctypes

        self._fork_lock, self._spawn_lock = False, None  # for workers started by spawn (__reduce__)
        if cell is None:
            cell = multiprocessing.sharedctypes.RawArray("q", 1 + 3 * _ROWS + 6 * _SLOTS + _ROWS)
            cell[1:4] = os.getpid(), epoch, 0
            # The start method in force, or the default one without fixing it (get_context()
            # would, and a later set_start_method() would fail).
            method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
            lock, self._fork_lock = multiprocessing.get_context(method).Lock(), method == "fork"
        self.cell, self.lock = cell, lock
        self.owner = os.getpid() if owner is None else owner

    def _row(self) -> int:
        """Where the calling loader process's count is (a new row: the owner's count)."""
        from torch.utils.data import get_worker_info

        parent = multiprocessing.parent_process() if get_worker_info() is not None else None
        pid = os.getpid() if parent is None else parent.pid  # a worker's loader, also under forkserver
        cell, rows = self.cell, range(1, 1 + 3 * _ROWS, 3)
        cell[0] += 1
        for at in rows:
            if cell[at] == pid:
                cell[at + 2] = cell[0]
                return at
        start = next((cell[at + 1] for at in rows if cell[at] == self.owner), 0)
        at = min((at for at in rows if cell[at] != self.owner), key=lambda at: cell[at + 2])
        cell[at:at + 3] = pid, start, cell[0]
        cell[_chosen(at)] = 0
        return at

    @contextlib.contextmanager
    def _locked(self):
        """The lock, held for a few reads and writes: a wait this long means a process died
        holding it (killed mid-update), and every later pass would wait for ever."""
        if not self.lock.acquire(timeout=_LOCK_WAIT):
            raise TFRecordError(f"the shared epoch count of a TFRecordIterableDataset stayed locked for "
                                f"{_LOCK_WAIT:g} s: a DataLoader worker was killed while updating it",
                                hint="make the dataset anew (and its DataLoader)")
        try:
            yield
        finally:
            self.lock.release()

    @property
    def next(self) -> int:
        with self._locked():
            return self.cell[self._row() + 1]

    def set(self, epoch: int, chosen: bool = False) -> None:
        """chosen: by set_epoch, which a state loaded before the next pass leaves alone."""
        with self._locked():
            at = self._row()
            self.cell[at + 1], self.cell[_chosen(at)] = epoch, chosen

    def resumed(self, epoch: int, within: int | None) -> None:
        """The count goes on at epoch after a resumed pass that is within that epoch (None:
        a state of no pass), unless set_epoch has chosen another epoch for the next pass
        since the last one began: StatefulDataLoader loads states as a pass starts, after a
        loop's set_epoch, and starts the next pass at once where the state's had ended."""
        with self._locked():
            at = self._row()
            if not self.cell[_chosen(at)] or self.cell[at + 1] == within:
                self.cell[at + 1], self.cell[_chosen(at)] = epoch, 0

    def take(self, key, workers: int, step: int) -> int:
        """The epoch of the pass this iter() belongs to; the count goes on by step."""
        cell = self.cell
        with self._locked():
            row = self._row()
            slots = range(1 + 3 * _ROWS, 1 + 3 * _ROWS + 6 * _SLOTS, 6)
            if key is not None:
                key = (cell[row], *key)
                for at in slots:
                    if tuple(cell[at:at + 3]) == key and 0 < cell[at + 3] < workers:
                        cell[at + 3] += 1
                        return cell[at + 4]
            epoch = cell[row + 1]
            cell[row + 1], cell[_chosen(row)] = min(epoch + step, _MAX), 0
            if key is not None:
                at = min(slots, key=lambda at: cell[at + 5])  # the oldest pass
                cell[at:at + 6] = *key, 1, epoch, cell[0]
            return epoch

    def __reduce__(self):
        from multiprocessing.context import get_spawning_popen

        if get_spawning_popen() is None:
            # Not a process being started (pickle, deepcopy): a count of its own from here.
            return _EpochCount, (self.next,)
        lock = self.lock
        if self._fork_lock:  # a fork context's lock does not cross into a spawned process
            if self._spawn_lock is None:
                self._spawn_lock = multiprocessing.get_context("spawn").Lock()
            lock = self._spawn_lock
        return _EpochCount, (0, self.cell, lock, self.owner)


def _chosen(row: int) -> int:
    """Where _EpochCount keeps whether set_epoch chose the next epoch of the row at row."""
    return 1 + 3 * _ROWS + 6 * _SLOTS + (row - 1) // 3


def _loader_asking(frame):
    """The DataLoader whose __len__ is the frame, if it is one."""
    from torch.utils.data import DataLoader

    if frame.f_code is DataLoader.__len__.__code__:
        loader = frame.f_locals.get("self")
        return loader if isinstance(loader, DataLoader) else None
    return None


def _loader_seed():
    """(base seed of this DataLoader iterator's workers, as an int64; workers), or (None, 1)
    outside workers: torch draws the base seed anew for each iterator (see _EpochCount)."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None:
        return None, 1
    return (info.seed - info.id) % 2**64 - 2**63, info.num_workers


@contextlib.contextmanager
def _located_in_workers():
    """Our errors raised in a DataLoader worker reach the main process with their .path,
    .offset and .index (torch rebuilds them from their traceback text: TFRecordError._carry)."""
    try:
        yield
    except TFRecordError as exc:
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            exc._carry()
        raise


_NOT_TENSORS = "OSUVMm"  # dtype kinds: objects, bytes, str, void, datetime64, timedelta64


def _to_tensors(value):
    """Numeric arrays as tensors, those of sparse and ragged values, of the tuples and lists a
    parse function returns and the 0-d ones of unbatched examples (NumPy scalars) too; bytes
    stay as they are, as do dates and times (torch has no dtype for them)."""
    import numpy as np
    import torch

    if isinstance(value, np.generic) and value.dtype.kind not in _NOT_TENSORS:
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.kind in _NOT_TENSORS:
            return value
        if not value.flags.writeable or min(value.strides, default=0) < 0:
            # A parse function's np.frombuffer(record): torch warns, and an in-place op on the
            # tensor would write into the record. A flipped array (x[:, ::-1]): torch refuses it.
            value = value.copy()
        return torch.from_numpy(native_order(value))  # a RawTensorFeature('>f4') costs a copy
    if isinstance(value, dict):
        return {k: _to_tensors(v) for k, v in value.items()}
    if isinstance(value, tuple):  # a parse function's (features, label); SparseTensorValue
        items = map(_to_tensors, value)
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if type(value) is list:
        return [_to_tensors(v) for v in value]
    if isinstance(value, RaggedValue):
        return RaggedValue(_to_tensors(value.values), _to_tensors(value.row_splits))
    return value


def _build():
    from torch.utils.data import Dataset, IterableDataset

    class TFRecordIterableDataset(IterableDataset):
        """TFRecordDataset for DataLoader, sharded per worker and per rank (module doc)."""

        def __init__(self, files: Files, features: Features | None = None, *, as_tensors: bool = False,
                     shard: tuple[int, int] | None = None, rank: tuple[int, int] | None = None,
                     **options: Any) -> None:
            super().__init__()
            self.files, self.features, self.as_tensors = files, features, bool(as_tensors)
            self.shard, self.options = shard, options
            # (rank, world size) to shard by instead of torch.distributed's: the data-parallel
            # rank where model-parallel ranks must read alike; (0, 1) shards by none.
            self.rank = check_shard(rank, "rank")
            self._epochs = _EpochCount()  # the epoch the next pass starts, shared with the workers
            self._iters = 0  # iter() calls of this copy: with the loader's seed, its pass
            self._next = None  # the epoch after this copy's newest iteration, for state_dict()
            if options.get("seed") is None:
                # From torch's generator, as RandomSampler does: torch.manual_seed makes the
                # shuffles reproducible, and every worker copy shares it.
                import torch

                self.options["seed"] = int(torch.empty((), dtype=torch.int64).random_().item())
            if self.as_tensors and options.get("output") == "arrow":
                raise InvalidArgumentError("as_tensors=True converts NumPy batches; output='arrow' yields "
                                           "pyarrow RecordBatches", hint="pass one of as_tensors and output='arrow'")
            # The options are checked here rather than in each worker as it starts, and a glob
            # or directory is listed once.
            self.files = TFRecordDataset(files, features, shard=shard, **options).files
            self._loaded: dict | None = None  # a state_dict() for the next iter()
            self._current = None  # the TFRecordDataset of the newest iter()
            self._ended = False  # the newest iter() yielded its last item
            self._rank = None  # the rank of the process that pickled this copy (__getstate__)

        @property
        def epoch(self) -> int:
            """The epoch the next pass starts (module doc)."""
            return self._epochs.next

        @epoch.setter
        def epoch(self, epoch: int) -> None:
            self.set_epoch(epoch)

        def set_epoch(self, epoch: int) -> None:
            """Make the next pass start at this epoch, here and in the DataLoader workers
            this dataset's copies run in, persistent ones included (module doc)."""
            epoch = _epoch(epoch)
            if epoch >= 2**63:
                raise InvalidArgumentError(f"epoch must be < 2**63 (it is shared as an int64), not {epoch}")
            if self._loaded is not None and self._loaded_epoch() == epoch:
                return  # as TFRecordDataset.set_epoch: a loop calls it for the epoch it resumes too
            self._epochs.set(epoch, chosen=True)
            self._loaded = self._next = None
            self._ended = False  # a state from here on starts the epoch set, not "nothing left"

        def _loaded_epoch(self) -> int:
            """The epoch the loaded state's position is in."""
            state = self._loaded
            if state.get("ended"):  # its "epoch" is the next one's
                return state["epoch"] - (self.options.get("num_epochs", 1) != 0)
            inner = state.get("dataset")
            return inner.get("epoch") if isinstance(inner, dict) else state["epoch"]

        def dataset(self) -> TFRecordDataset:
            """A TFRecordDataset over this worker's shard, at the next epoch."""
            return self._dataset()

        def _dataset(self, worker=None) -> TFRecordDataset:
            files, shard = _plan(self.files, self.shard, self.options.get("storage_options"), self._rank, worker,
                                 self.rank)
            ds = TFRecordDataset(files, self.features, shard=shard, **self.options)
            ds.set_epoch(self.epoch)
            if self._current is not None:
                ds._reuse(self._current)  # the last epoch's read buffers and mappings
            return ds

        def __iter__(self):
            count, self._iters = self._iters, self._iters + 1
            state, self._loaded = self._loaded, None
            if state is not None:
                with _located_in_workers():
                    self._check_split(state)
            self._ended = state is not None and state.get("ended", False)
            if self._ended:
                # Resuming an iteration that had ended: nothing is left of it. (A worker that
                # ran out before the others; StatefulDataLoader asks it for one more item.)
                self._current = None
                return iter(())
            with _located_in_workers():
                ds = self.dataset()
                if state is not None and state["dataset"] is not None:
                    ds.load_state_dict(state["dataset"])
                elif state is None:
                    seed, workers = _loader_seed()
                    key = None if seed is None else (seed, count)
                    ds.set_epoch(self._epochs.take(key, workers, self.options.get("num_epochs") or 1))
                # StatefulDataLoader asks for states only once the epoch runs: track positions
                # from its start, so that any state resumes by seeking.
                ds._track_positions = True
                it = iter(ds)
            self._next = ds._next_epoch
            if state is not None:  # a resumed pass: the count goes on after it
                self._epochs.resumed(self._next, ds._position.epoch)
            self._current = ds
            return self._items(ds, it)

        def __len__(self):
            """Elements that iter() yields here: one epoch (times num_epochs) of the shard this
            worker and rank read (module doc). Asked by len(DataLoader) with workers: what
            makes that len the batches its workers yield (each its own short last one)."""
            epochs = self.options.get("num_epochs", 1)
            if epochs is None:
                raise TypeError("a TFRecordIterableDataset with num_epochs=None has no length")
            loader = _loader_asking(sys._getframe(1))
            if loader is None or not loader.num_workers:
                return self.dataset().num_elements() * epochs
            workers = loader.num_workers
            counts = [self._dataset((w, workers)).num_elements() * epochs for w in range(workers)]
            size = loader.batch_size
            if size is None:
                return sum(counts)
            # Each worker's fetcher batches its own elements; the loader divides what this
            # returns by batch_size, rounding as drop_last says.
            batches = sum(c // size if loader.drop_last else -(-c // size) for c in counts)
            return batches * size if loader.drop_last else max(batches * size - size + 1, 0)

        def _items(self, ds, it):
            from torch.utils.data import get_worker_info

            pack = get_worker_info() is not None  # in a worker: batches cross packed (module doc)
            with contextlib.closing(it), _located_in_workers():
                for item in it:
                    if type(item) is RecordBatch:
                        # DataLoader's default_convert hands an array on as it is, but remakes
                        # a sequence record by record: 8x the time it took to read them.
                        item = item.to_numpy()
                    elif self.as_tensors:
                        item = _to_tensors(item)
                    yield _packed(item) if pack else item
            self._ended = self._current is ds  # unless a newer iter() runs

        def state_dict(self) -> dict:
            """Where this copy's newest iteration stands (per DataLoader worker under
            torchdata's StatefulDataLoader); see TFRecordDataset.state_dict."""
            if self._loaded is not None:
                return self._loaded
            current = self._current
            # An iteration that has ended (and was not resumed from ended) starts the next one.
            current = None if current is None or self._ended or current._position.exhausted else current.state_dict()
            epoch = self.epoch if self._next is None else self._next
            return {"epoch": epoch, "dataset": current, "ended": self._ended, "split": self._split()}

        def _split(self) -> list:
            """[[rank, world size], [worker, workers]] of this copy."""
            return [list(level) for level in _rank_and_worker(self._rank, chosen=self.rank)]

        def _check_split(self, state: dict) -> None:
            """A state is the position in one worker's shard of one rank's: another worker
            or rank reads other records (its dataset state would be refused for another
            shard, which the user never gave)."""
            saved, now = state.get("split"), self._split()
            if saved is None or saved == now:  # None: saved before states said it
                return

            def say(split):
                try:
                    (rank, world), (worker, workers) = split
                except (TypeError, ValueError):
                    return repr(split)
                return f"DataLoader worker {worker} of {workers} on rank {rank} of {world}"

            raise InvalidArgumentError(f"the state was saved by {say(saved)} and is loaded by {say(now)}",
                                       hint="resume with the num_workers and the world size the state was saved "
                                       "with (num_workers=0 reads as one worker)")

        def load_state_dict(self, state: dict) -> None:
            """Make the next iter() resume from a state_dict()."""
            inner = state.get("dataset")  # checked as the pass starts (TFRecordDataset.load_state_dict)
            self._epochs.resumed(_epoch(state["epoch"]), inner.get("epoch") if isinstance(inner, dict) else None)
            self._loaded, self._next = state, None

        def __getstate__(self):
            state = self.__dict__.copy()
            state["_current"] = None  # the running iteration stays with this copy
            # A worker started by spawn or forkserver has no process group: it shards by the
            # rank of its loader's process, which pickles the dataset for it (a copy saved or
            # handed on otherwise shards where it runs).
            from multiprocessing.context import get_spawning_popen

            state["_rank"] = (_distributed() or (0, 1)) if get_spawning_popen() is not None else None
            return state

    class TFRecordMapDataset(Dataset):
        """Map-style dataset over indexed files: ``ds[i]`` is one record or parsed example."""

        def __init__(self, files: Files, features: Features | None = None, *, as_tensors: bool = False,
                     **options: Any) -> None:
            self.data = IndexedDataset(files, features, **options)
            self.as_tensors = bool(as_tensors)

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            with _located_in_workers():
                item = self.data[i]
            return _to_tensors(item) if self.as_tensors else item

        def __getitems__(self, indices) -> list:
            """The items of a DataLoader batch (torch calls this with a batch's indices): runs
            of consecutive records read at once and all parsed as one batch, not one by one."""
            with _located_in_workers():
                items = self.data._getitems(indices)
            return [_to_tensors(item) for item in items] if self.as_tensors else items

    classes = {"TFRecordIterableDataset": TFRecordIterableDataset, "TFRecordMapDataset": TFRecordMapDataset}
    for name, cls in classes.items():
        cls.__qualname__ = name  # found again through __getattr__ when pickled (spawned workers)
    return classes


def __getattr__(name):
    if name in ("TFRecordIterableDataset", "TFRecordMapDataset"):
        if not _classes:
            _classes.update(_build())
        return _classes[name]
    raise AttributeError(f"module 'tfrecord_lite.torch' has no attribute {name!r}")
