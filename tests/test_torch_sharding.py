"""PyTorch adapter: sharding by rank and worker (worker_shard, rank=), and len() of a DataLoader with workers."""

import pytest

import tfrecord_lite as tfl
from ._records import record, write_files
from .test_torch import as_list


@pytest.mark.parametrize("counts, workers", [([5, 5], 2), ([10], 3), ([7, 2, 6], 2)])
def test_len_of_a_loader_with_workers_counts_each_workers_batches(tmp_path, counts, workers):
    """Each worker batches its own records, so each has a short last batch: len(loader) said
    ceil(records / batch_size), fewer than came (and torch warned of more batches than len)."""
    import warnings

    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, counts)
    cases = [(dict(batch_size=4), {}), (dict(batch_size=4, drop_remainder=True), {}),
             (dict(batch_size=3, num_epochs=2), {}), ({}, dict(batch_size=4)),
             ({}, dict(batch_size=4, drop_last=True)), (dict(batch_size=2), dict(batch_size=3, collate_fn=as_list))]
    for options, loader in cases:
        ds = TFRecordIterableDataset(paths, **options)
        dl = torch.utils.data.DataLoader(ds, num_workers=workers, **{"batch_size": None, **loader})
        with warnings.catch_warnings():
            warnings.filterwarnings("error", "Length of IterableDataset")  # torch's: more came than len
            assert len(dl) == len(list(dl)), (options, loader)
        assert len(ds) == len(list(ds))  # the dataset's own len: what it yields here


def test_worker_shard_in_a_spawned_worker_takes_its_ranks_shard(monkeypatch):
    """worker_shard() in a user's own IterableDataset: a worker started by spawn has no
    process group, and took rank 0 of 1, so every rank's workers read the same shards. It
    takes torchrun's RANK and WORLD_SIZE now, or the rank the dataset noted when made."""
    import torch
    import torch.distributed as dist

    from tests._torch_shards import ShardReporter

    monkeypatch.setattr(dist, "is_initialized", lambda: True)  # rank 1 of 2 in this process
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    want = ["1/4", "3/4"]  # worker w of rank 1 of 2: (1 + 2 * w, 4)

    def shards(ds, method):
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=method)
        return sorted(loader)

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert shards(ShardReporter(), "spawn") == want
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert shards(ShardReporter(rank=(1, 2)), "spawn") == want
    assert shards(ShardReporter(), "fork") == want  # a forked worker sees the process group
    monkeypatch.setenv("RANK", "1")  # without a process group here, RANK leaves forked workers alone
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    assert shards(ShardReporter(), "fork") == ["0/2", "1/2"]


def test_rank_given_replaces_the_process_groups(tmp_path, monkeypatch):
    """With tensor or pipeline parallelism the ranks of one model replica must read the same
    data, but the dataset always split it by the global rank, also on top of a shard= given
    for the data-parallel rank: rank= now replaces torch.distributed's."""
    import torch
    import torch.distributed as dist
    from tfrecord_lite import TFRecordDataset
    from tfrecord_lite.torch import TFRecordIterableDataset

    counts = [5, 6, 7]
    paths = write_files(tmp_path, counts)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)  # 2 replicas of 2 model-parallel ranks
    by_replica = {}
    for rank in range(4):
        monkeypatch.setattr(dist, "get_rank", lambda r=rank: r)
        ds = TFRecordIterableDataset(paths, rank=(rank // 2, 2))
        for workers in (0, 2):
            got = sorted(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
            assert got == sorted(TFRecordDataset(paths, shard=(rank // 2, 2))) == sorted(ds.dataset())
            assert by_replica.setdefault(rank // 2, got) == got  # the replica's ranks read alike
        assert len(ds) == len(got)
    assert sorted(by_replica[0] + by_replica[1]) == sorted(record(f, j) for f, n in enumerate(counts) for j in range(n))
    assert sorted(TFRecordIterableDataset(paths, rank=(0, 1))) == sorted(TFRecordDataset(paths))  # no rank split
    with pytest.raises(tfl.InvalidArgumentError, match="0 <= rank < world size"):
        TFRecordIterableDataset(paths, rank=(2, 2))


@pytest.mark.parametrize("args, error, message", [
    (((5, 2),), tfl.InvalidArgumentError, r"shard must be \(index, count\) with 0 <= index < count, not \(5, 2\)"),
    (((0.5, 2),), tfl.ArgumentTypeError, r"shard must be two integers \(index, count\), not \(0.5, 2\)"),
    ((None, (3, 2)), tfl.InvalidArgumentError, r"rank must be \(rank, world size\) with 0 <= rank < world size"),
    ((None, ("a", 2)), tfl.ArgumentTypeError, r"rank must be two integers \(rank, world size\)"),
])
def test_worker_shard_checks_what_it_is_given(args, error, message):
    """A bad shard was composed as it was ((5, 2) gave shard 5 of 2 to read nothing, or
    half-floats), and a bad rank was called a bad shard."""
    from tfrecord_lite.torch import TFRecordIterableDataset, worker_shard

    with pytest.raises(error, match=message):
        worker_shard(*args)
    if args[0] is None:  # the dataset's rank= says the same
        with pytest.raises(error, match=message):
            TFRecordIterableDataset(["x.tfrecord"], rank=args[1])
