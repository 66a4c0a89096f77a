"""PyTorch adapters; torch is imported on first use of a class here, never by
``import tfrecord_lite``.

``TFRecordIterableDataset`` streams through ``TFRecordDataset`` and shards itself: across
DataLoader workers (``torch.utils.data.get_worker_info()``) and across processes of
``torch.distributed`` (rank x world size, when initialized), on top of any ``shard=`` given.
Every record reaches exactly one (process, worker) pair. ``TFRecordMapDataset`` is map-style
over indexed files (``IndexedDataset``), for samplers. ``as_tensors=True`` turns NumPy arrays
into tensors with ``torch.from_numpy`` (zero copy); raw records stay ``bytes``.

For a new shuffle each epoch, call ``set_epoch(epoch)`` before iterating (DataLoader workers
get a fresh copy of the dataset every epoch unless they are persistent).

JAX: batches are plain NumPy, so they go to a device as they are::

    for batch in TFRecordDataset(files, features, batch_size=256):
        batch = jax.device_put(batch)
"""

from __future__ import annotations

from .dataset import TFRecordDataset
from .index import IndexedDataset

__all__ = ["TFRecordIterableDataset", "TFRecordMapDataset", "worker_shard"]

_classes: dict = {}


def worker_shard(shard=None):
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


def _to_tensors(value):
    import numpy as np
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value) if value.dtype != object else value
    if isinstance(value, dict):
        return {k: _to_tensors(v) for k, v in value.items()}
    return value


def _build():
    from torch.utils.data import Dataset, IterableDataset

    class TFRecordIterableDataset(IterableDataset):
        """TFRecordDataset for DataLoader, sharded per worker and per rank (module doc)."""

        def __init__(self, files, features=None, *, as_tensors=False, shard=None, **options):
            super().__init__()
            self.files, self.features, self.as_tensors = files, features, bool(as_tensors)
            self.shard, self.options = shard, options
            self.epoch = 0
            if options.get("seed") is None and (options.get("shuffle_buffer") or options.get("shuffle_files")):
                # One seed for every worker copy, so they shuffle alike.
                import random

                self.options["seed"] = random.SystemRandom().randrange(2**63)

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def dataset(self) -> TFRecordDataset:
            """The TFRecordDataset this worker reads."""
            ds = TFRecordDataset(self.files, self.features, shard=worker_shard(self.shard), **self.options)
            ds.set_epoch(self.epoch)
            return ds

        def __iter__(self):
            it = iter(self.dataset())
            try:
                for item in it:
                    yield _to_tensors(item) if self.as_tensors else item
            finally:
                it.close()

    class TFRecordMapDataset(Dataset):
        """Map-style dataset over indexed files: ``ds[i]`` is one record or parsed example."""

        def __init__(self, files, features=None, *, as_tensors=False, **options):
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
