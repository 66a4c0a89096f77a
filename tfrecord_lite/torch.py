"""PyTorch adapters; torch is imported on first use of a class here, never by
``import tfrecord_lite``.

``TFRecordIterableDataset`` streams through ``TFRecordDataset`` and shards itself: across
DataLoader workers (``torch.utils.data.get_worker_info()``) and across processes of
``torch.distributed`` (rank x world size, when initialized), on top of any ``shard=`` given.
Every record reaches exactly one (process, worker) pair. ``TFRecordMapDataset`` is map-style
over indexed files (``IndexedDataset``), for samplers. ``as_tensors=True`` turns NumPy arrays
into tensors with ``torch.from_numpy`` (zero copy); raw records stay ``bytes``.

Every class here pickles (DataLoader workers started by fork, spawn or forkserver).

Epochs: each ``iter()`` starts the next epoch, so persistent workers reshuffle. Workers that
are not persistent get a fresh copy each epoch; they reshuffle because, unless
``set_epoch`` drives the epochs, the seed is mixed with the loader's per-epoch worker seed
(reproducible under ``torch.manual_seed`` or ``DataLoader(generator=...)``). After
``set_epoch(e)`` shuffles depend on ``seed`` and ``e`` only.

``len(ds)``: what ``iter(ds)`` yields here for one epoch (times ``num_epochs``): records, or
batches with ``batch_size`` (honouring ``drop_remainder``), of the shard of the worker and
rank that asks (in the main process, the rank's). Counts come from index sidecars, or from
one scan kept as a sidecar (``TFRecordDataset.num_elements``).

``state_dict()`` / ``load_state_dict()``: torchdata's ``StatefulDataLoader`` resumes
mid-epoch from them, per worker; the state holds file byte offsets, so resuming seeks.

Crossing to the main process: in a DataLoader worker each dict (parsed batch) or list
(raw records) is yielded as a dict or list subclass that pickles as ONE buffer plus a small
layout: every array, tensor, object array of ``bytes``, list of ``bytes`` and BytesColumn in
it is copied into that buffer (bytes as values + int64 offsets, copied and split again by the
core), and the main process gets the very same structure, types and dtypes, its arrays and
tensors as views of the buffer. torch moves each tensor's storage through its own descriptor
handshake and pickles ``bytes`` one object at a time, which cost more than the batch took to
parse; one buffer per batch makes that one handshake (shared memory, for buffers of
``_SHM_MIN`` bytes or more) or one pipe write. Collate functions in the worker see the dict
or list as it is.

JAX: ``tfrecord_lite.jax.device_put`` moves parsed batches to a device, bytes kept on the host.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

from . import _native
from ._typing import Features, Files
from .bytes_column import BytesColumn
from .dataset import TFRecordDataset
from .index import IndexedDataset

__all__ = ["TFRecordIterableDataset", "TFRecordMapDataset", "worker_shard"]

_classes: dict = {}


def worker_shard(shard: tuple[int, int] | None = None) -> tuple[int, int]:
    """(index, count) for this DataLoader worker of this distributed rank, composed with shard."""
    import torch.distributed as dist
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    rank, world = 0, 1
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    index, count = rank * workers + worker, world * workers
    if shard is not None:
        # Shard (i, c) of shard (u, n) of the data is shard (u * c + i, n * c) of the data.
        index, count = int(shard[0]) * count + index, int(shard[1]) * count
    return index, count


def _loader_seed(seed: int) -> int:
    """seed mixed with this DataLoader iterator's base seed, which torch draws anew for each
    epoch's workers: so workers that are not persistent reshuffle each epoch too."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None:
        return seed
    import numpy as np

    base = (info.seed - info.id) % 2**64
    return int(np.random.SeedSequence([seed, base]).generate_state(1, np.uint64)[0] >> 1)


def _to_tensors(value):
    import numpy as np
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value) if value.dtype != object else value
    if isinstance(value, dict):
        return {k: _to_tensors(v) for k, v in value.items()}
    return value


# -- one buffer per batch across the process boundary ------------------------------------------

_ALIGN = 64  # every part starts aligned, so views of any dtype are aligned
_SHM_MIN = 1 << 20  # from this size a buffer crosses in shared memory, below it through the pipe
# A packed batch is one buffer plus a layout: a tree of tuples (tag, ...) that pickles at C
# speed. Dicts, lists and tuples are walked; arrays, tensors and bytes values become parts of
# the buffer; scalars stay in the tree; any other object is pickled apart, its own arrays
# still going into the buffer. Nodes from _LIST on carry a serial number after the tag: the
# main process builds each once, however often the batch holds it.
_DICT, _TUPLE, _NAMED, _OBJECT, _LIST, _PICKLED, _ARRAY, _TENSOR, _VALUES, _COLUMN = range(10)
_SCALARS = frozenset([int, float, str, bytes, bool, type(None)])


class _Packer:
    """Walks a structure into its layout, setting aside the parts to copy into one buffer."""

    def __init__(self):
        import torch

        self.tensor = torch.Tensor
        self.parts: list = []  # (offset, uint8 array or list of bytes to copy there)
        self.size = 0
        self.seen: dict = {}  # id(obj) -> (node, obj): a part met twice is one part

    def node(self, obj):
        kind = type(obj)
        if kind is dict:
            return (_DICT, tuple(obj), tuple(map(self.node, obj.values())))
        if kind is tuple:
            return (_TUPLE, tuple(map(self.node, obj)))
        if kind in _SCALARS:
            return (_OBJECT, obj)
        if isinstance(obj, tuple) and hasattr(kind, "_fields"):
            return (_NAMED, kind, tuple(map(self.node, obj)))
        got = self.seen.get(id(obj))
        if got is None:  # the object is kept too: a temporary's id could be reused
            tag, *rest = self._part(obj, kind)
            got = self.seen[id(obj)] = ((tag, len(self.seen), *rest) if tag >= _LIST else (tag, *rest), obj)
        return got[0]

    def _part(self, obj, kind):
        if kind is list:
            lengths = _native.framing.value_lengths(obj)
            return (_LIST, tuple(map(self.node, obj))) if lengths is None else self._values(obj, lengths, None)
        if kind is self.tensor:
            try:  # refused for GPU, sparse and grad-requiring tensors and dtypes numpy lacks
                return self._array(_TENSOR, obj.numpy())
            except (TypeError, RuntimeError):
                return (_OBJECT, obj)  # torch's own pickling shares them
        if kind is BytesColumn:
            return (_COLUMN, self.node(obj.values), self.node(obj.offsets), obj.shape)
        if kind is np.ndarray:
            if obj.dtype.hasobject:
                values = obj.reshape(-1).tolist()
                lengths = _native.framing.value_lengths(values)
                if lengths is not None:
                    return self._values(values, lengths, obj.shape)
            elif obj.dtype.fields is None and obj.dtype.itemsize:  # not structured or empty
                return self._array(_ARRAY, obj)
        data = io.BytesIO()
        _Apart(data, self, obj).dump(obj)
        return (_PICKLED, data.getvalue())

    def _place(self, nbytes: int, source) -> int:
        offset = self.size
        self.size += -(-nbytes // _ALIGN) * _ALIGN
        self.parts.append((offset, source))
        return offset

    def _values(self, values: list, lengths, shape):
        """Bytes values back to back, then their int64 offsets."""
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        at = self._place(int(offsets[-1]), values)
        return (_VALUES, at, self._place(offsets.nbytes, offsets.view(np.uint8)), len(values), shape)

    def _array(self, tag, array: np.ndarray):
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return (tag, self._place(array.nbytes, array.reshape(-1).view(np.uint8)), array.dtype.str, array.shape)

    def fill(self, buffer: np.ndarray) -> None:
        """Copy every part set aside into buffer."""
        for offset, source in self.parts:
            if type(source) is list:
                _native.framing.copy_values(source, buffer, offset)
            else:
                buffer[offset:offset + source.nbytes] = source


class _Apart(pickle.Pickler):
    """Pickles an object the walk does not know (a class of the user's, an object array),
    sending the arrays, tensors and bytes values in it to the packer's buffer."""

    def __init__(self, file, packer: _Packer, root):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.packer, self.root = packer, root

    def persistent_id(self, obj):
        kind = type(obj)
        if obj is self.root or (kind is not np.ndarray and kind is not self.packer.tensor
                                and kind is not list and kind is not BytesColumn):
            return None
        node = self.packer.node(obj)
        return None if node[0] == _OBJECT else node


def _pack(obj):
    """(_unpack, (buffer, layout)) for obj: the reduce value of a packed batch."""
    packer = _Packer()
    layout = packer.node(obj)
    if packer.size >= _SHM_MIN:
        import torch

        # Shared memory from the start (the one copy is the fill), found by its name as
        # torch's "file_system" sharing does: no descriptor handshake with this process.
        storage = torch.UntypedStorage._new_using_filename_cpu(packer.size)
        buffer = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
        manager, handle, size = storage._share_filename_cpu_()
        storage._shared_incref()  # the main process's rebuild drops this reference
        payload = (manager, handle, size)
    else:
        payload = buffer = np.empty(packer.size, dtype=np.uint8)
    packer.fill(buffer)
    return _unpack, (payload, layout)


class _Unpacker:
    def __init__(self, buffer: np.ndarray):
        import torch

        self.buffer = buffer
        self.from_numpy = torch.from_numpy
        self.built: dict = {}  # a part's serial number -> the part: one object however often met

    def build(self, node):
        tag = node[0]
        if tag == _DICT:
            return dict(zip(node[1], map(self.build, node[2])))
        if tag == _TUPLE:
            return tuple(map(self.build, node[1]))
        if tag == _NAMED:
            return node[1](*map(self.build, node[2]))
        if tag == _OBJECT:
            return node[1]
        got = self.built.get(node[1])
        if got is None:
            got = self.built[node[1]] = self._part(node)
        return got

    def _part(self, node):
        tag, buffer = node[0], self.buffer
        if tag == _LIST:
            return list(map(self.build, node[2]))
        if tag == _PICKLED:
            loader = pickle.Unpickler(io.BytesIO(node[2]))
            loader.persistent_load = self.build
            return loader.load()
        if tag == _COLUMN:
            return BytesColumn(self.build(node[2]), self.build(node[3]), node[4])
        if tag == _VALUES:
            _, _, at, offsets_at, n, shape = node
            items = _native.framing.split_values(buffer[at:], np.ndarray(n + 1, np.int64, buffer, offsets_at))
            return items.tolist() if shape is None else items.reshape(shape)
        _, _, at, dtype, shape = node
        array = np.ndarray(shape, dtype, buffer, at)
        return array if tag == _ARRAY else self.from_numpy(array)


def _unpack(payload, layout):
    if type(payload) is tuple:
        import torch
        from torch.multiprocessing.reductions import rebuild_storage_filename

        storage = rebuild_storage_filename(torch.UntypedStorage, *payload)
        payload = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
    return _Unpacker(payload).build(layout)


class _Packed:
    """A dict or list that crosses processes packed (module doc); a copy stays packed (torch's
    default_convert copies a batch), the main process gets the plain dict or list."""

    __slots__ = ()
    _plain: type

    def __copy__(self):
        return type(self)(self)

    def __reduce__(self):
        return _pack(self._plain(self))


class _PackedDict(_Packed, dict):
    __slots__ = ()
    _plain = dict


class _PackedList(_Packed, list):
    __slots__ = ()
    _plain = list


def _packed(item):
    kind = type(item)
    return _PackedDict(item) if kind is dict else _PackedList(item) if kind is list else item


def _build():
    from torch.utils.data import Dataset, IterableDataset

    class TFRecordIterableDataset(IterableDataset):
        """TFRecordDataset for DataLoader, sharded per worker and per rank (module doc)."""

        def __init__(self, files: Files, features: Features | None = None, *, as_tensors: bool = False,
                     shard: tuple[int, int] | None = None, **options: Any) -> None:
            super().__init__()
            self.files, self.features, self.as_tensors = files, features, bool(as_tensors)
            self.shard, self.options = shard, options
            self.epoch = 0  # the epoch the next iter() starts
            self._epoch_set = False  # set_epoch() drives the epochs: shuffles follow seed and epoch only
            if options.get("seed") is None:
                # From torch's generator, as RandomSampler does: torch.manual_seed makes the
                # shuffles reproducible, and every worker copy shares it.
                import torch

                self.options["seed"] = int(torch.empty((), dtype=torch.int64).random_().item())
            self._loaded = None  # a state_dict() for the next iter()
            self._current = None  # the TFRecordDataset of the newest iter()

        def set_epoch(self, epoch: int) -> None:
            """Make the next iter() start at this epoch (it wins over the automatic count)."""
            self.epoch = int(epoch)
            self._epoch_set = True
            self._loaded = None

        def dataset(self) -> TFRecordDataset:
            """A TFRecordDataset over this worker's shard, at the next epoch."""
            options = dict(self.options)
            if not self._epoch_set:
                options["seed"] = _loader_seed(options["seed"])
            ds = TFRecordDataset(self.files, self.features, shard=worker_shard(self.shard), **options)
            ds.set_epoch(self.epoch)
            return ds

        def __iter__(self):
            ds = self.dataset()
            if self._loaded is not None:
                state, self._loaded = self._loaded, None
                if state["dataset"] is not None:
                    ds.load_state_dict(state["dataset"])
            # StatefulDataLoader asks for states only once the epoch runs: track positions from
            # its start, so that any state resumes by seeking.
            ds._track_positions = True
            it = iter(ds)
            self.epoch = ds._next_epoch  # each iter() continues the count: a new shuffle
            self._current = ds
            return self._items(it)

        def __len__(self):
            """Elements that iter() yields here: one epoch (times num_epochs) of the shard this
            worker and rank read (module doc)."""
            epochs = self.options.get("num_epochs", 1)
            if epochs is None:
                raise TypeError("a TFRecordIterableDataset with num_epochs=None has no length")
            return self.dataset().num_elements() * epochs

        def _items(self, it):
            from torch.utils.data import get_worker_info

            pack = get_worker_info() is not None  # in a worker: batches cross packed (module doc)
            try:
                for item in it:
                    if self.as_tensors:
                        item = _to_tensors(item)
                    yield _packed(item) if pack else item
            finally:
                it.close()

        def state_dict(self) -> dict:
            """Where this copy's newest iteration stands (per DataLoader worker under
            torchdata's StatefulDataLoader); see TFRecordDataset.state_dict."""
            if self._loaded is not None:
                return self._loaded
            current = None if self._current is None else self._current.state_dict()
            return {"epoch": self.epoch, "dataset": current}

        def load_state_dict(self, state: dict) -> None:
            """Make the next iter() resume from a state_dict()."""
            self.epoch = int(state["epoch"])
            self._loaded = state

        def __getstate__(self):
            state = self.__dict__.copy()
            state["_current"] = None  # the running iteration stays with this copy
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
            item = self.data[i]
            return _to_tensors(item) if self.as_tensors else item

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
