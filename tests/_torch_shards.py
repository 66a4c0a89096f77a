"""An IterableDataset of a user's own that shards itself with worker_shard() (a module of its
own: spawned DataLoader workers import it, and it imports torch)."""

import torch

from tfrecord_lite.torch import worker_shard


class ShardReporter(torch.utils.data.IterableDataset):
    """Yields the shard worker_shard() gives the worker that iterates it."""

    def __init__(self, rank=None):
        self.rank = rank

    def __iter__(self):
        yield "%d/%d" % (worker_shard() if self.rank is None else worker_shard(rank=self.rank))
