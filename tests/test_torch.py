"""PyTorch and JAX adapters: sharding, pickling under every start method, epochs, len,
resumable state."""

import os
import pickle
import subprocess
import traceback
import sys

import numpy as np
import pytest
from ._records import fresh_buffers, record, records_of, write_files

import tfrecord_lite as tfl

SPEC = {"id": tfl.FixedLenFeature([], np.int64), "name": tfl.FixedLenFeature([], bytes),
        "tags": tfl.VarLenFeature(np.int64)}


def write_examples(directory, counts):
    """Indexed files of Examples; example j of file f has id 1000 * f + j."""
    paths = []
    for f, n in enumerate(counts):
        path = os.path.join(str(directory), f"ex-{f:02d}.tfrecord")
        ids = [1000 * f + j for j in range(n)]
        with tfl.TFRecordWriter(path, index=True) as w:
            w.write_many(tfl.encode_example({"id": i, "name": f"n{i}", "tags": list(range(i % 3))}) for i in ids)
        paths.append(path)
    return paths


def as_list(items):
    """A collate_fn that keeps the items (a top-level function: spawned workers import it)."""
    return items


def example_ids(counts):
    return sorted(1000 * f + j for f, n in enumerate(counts) for j in range(n))


def test_import_does_not_import_torch():
    code = "import tfrecord_lite, sys; assert 'torch' not in sys.modules and 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("counts", [[40, 3, 17, 9, 0, 25], [101]])
def test_dataloader_workers_no_duplicates_no_losses(backend, tmp_path, counts):
    import torch  # a test dependency: missing torch fails rather than skips
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, counts)
    ds = TFRecordIterableDataset(paths, shuffle_buffer=4, shuffle_files=True)
    loader = torch.utils.data.DataLoader(ds, num_workers=2, batch_size=None)
    got = list(loader)
    want = [record(f, j) for f, n in enumerate(counts) for j in range(n)]
    assert len(got) == len(want) and sorted(got) == sorted(want)
    assert backend.name in ("cython", "python")


def test_rank_and_worker_shards_compose(tmp_path, monkeypatch):
    import torch.distributed as dist

    from tfrecord_lite import TFRecordDataset
    from tfrecord_lite.torch import worker_shard

    paths = write_files(tmp_path, [5, 6, 7])
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    seen = []
    for rank in range(2):
        monkeypatch.setattr(dist, "get_rank", lambda r=rank: r)
        monkeypatch.setattr(dist, "get_world_size", lambda: 2)
        shard = worker_shard()
        assert shard == (rank, 2)
        seen += list(TFRecordDataset(paths, shard=shard))
    assert sorted(seen) == sorted(record(f, j) for f, n in enumerate([5, 6, 7]) for j in range(n))


@pytest.mark.parametrize("counts, shard", [([5, 6, 7, 8], (1, 2)), ([3, 4, 5, 6, 7, 8], None), ([9, 4], (0, 3)),
                                            ([2] * 12, (2, 3))])
def test_workers_read_exactly_their_ranks_shard(tmp_path, monkeypatch, counts, shard):
    """Whatever the number of workers, a rank's workers read exactly the records of the
    rank's shard (what len() counts in the main process), and the ranks those of shard=, also
    where one level takes whole files and the next has more parts than there are files."""
    import types

    import torch.distributed as dist
    import torch.utils.data
    from tfrecord_lite import TFRecordDataset
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, counts)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    whole = sorted(TFRecordDataset(paths, shard=shard))
    by_rank = []
    for rank in range(2):
        monkeypatch.setattr(dist, "get_rank", lambda r=rank: r)
        monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: None)
        ds = TFRecordIterableDataset(paths, shard=shard)
        main = sorted(ds.dataset())
        assert len(ds) == len(main)
        by_rank += main
        for workers in (2, 3, 5):
            got = []
            for worker in range(workers):
                info = types.SimpleNamespace(id=worker, num_workers=workers, seed=7 + worker)
                monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda i=info: i)
                got += list(ds.dataset())
            assert sorted(got) == main, (rank, workers)
    assert sorted(by_rank) == whole


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawned_workers_shard_by_their_loaders_rank(tmp_path, monkeypatch, method):
    """torch.distributed is not initialized in a worker started by spawn or forkserver: its
    workers read every rank's records, so each rank's loader gave the whole data set."""
    import torch
    import torch.distributed as dist
    from tfrecord_lite import TFRecordDataset
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [5, 6])
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    got = []
    for rank in range(2):
        monkeypatch.setattr(dist, "get_rank", lambda r=rank: r)
        ds = TFRecordIterableDataset(paths)
        mine = list(torch.utils.data.DataLoader(ds, num_workers=2, batch_size=None, multiprocessing_context=method))
        assert sorted(mine) == sorted(ds.dataset())
        got += mine
    assert sorted(got) == sorted(TFRecordDataset(paths))
    # A copy pickled by a rank and loaded where there is no process group reads everything.
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    assert sorted(pickle.loads(pickle.dumps(ds))) == sorted(TFRecordDataset(paths))


def test_shard_with_dataloader_workers_is_the_shard(tmp_path):
    import torch
    from tfrecord_lite import TFRecordDataset
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [5, 6, 7, 8])
    want = sorted(TFRecordDataset(paths, shard=(1, 2)))
    for workers in (0, 2, 3):
        ds = TFRecordIterableDataset(paths, shard=(1, 2))
        assert sorted(torch.utils.data.DataLoader(ds, num_workers=workers, batch_size=None)) == want


def test_tensors_zero_copy_and_map_style(tmp_path):
    import torch  # a test dependency: missing torch fails rather than skips
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    paths = write_files(tmp_path, [6, 4])

    def parse(records):
        return {"len": np.array([len(r) for r in records], np.int64)}

    batches = list(TFRecordIterableDataset(paths, parse=parse, batch_size=4, as_tensors=True))
    assert all(isinstance(b["len"], torch.Tensor) for b in batches)
    assert sum(int(b["len"].sum()) for b in batches) == 40
    arr = np.arange(3)
    from tfrecord_lite.torch import _to_tensors

    t = _to_tensors({"a": arr})["a"]
    t[0] = 9
    assert arr[0] == 9  # shares memory
    ds = TFRecordMapDataset(paths, parse=parse, as_tensors=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=3, shuffle=True, num_workers=2)
    total = torch.cat([b["len"] for b in loader])
    assert len(total) == 10 and int(total.sum()) == 40
    code = "import tfrecord_lite.jax, sys; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)  # jax waits for the first call


@pytest.mark.parametrize("batch_size", [None, 2])
def test_as_tensors_converts_every_numeric_array(backend, tmp_path, batch_size):
    # Unbatched examples' FixedLenFeature([]) values stayed NumPy scalars, the parts of sparse
    # and ragged values stayed arrays, and a big-endian RawTensorFeature raised torch's
    # ValueError ("byte order different from the native byte order").
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    path = str(tmp_path / "t.tfrecord")
    with tfl.TFRecordWriter(path, index=True) as w:
        w.write_many(tfl.encode_example({"id": i, "v": list(range(i)), "r": np.arange(i, i + 3, dtype=">f4").tobytes(),
                                         "b": b"ab"}) for i in range(3))
    spec = {"id": tfl.FixedLenFeature([], np.int64), "v": tfl.VarLenFeature(np.int64),
            "g": tfl.RaggedFeature(np.int64, value_key="v"), "r": tfl.RawTensorFeature([3], np.dtype(">f4")),
            "b": tfl.FixedLenFeature([], bytes)}

    def check(got, want):
        if isinstance(want, np.generic) and not isinstance(want, np.bytes_):
            want = np.asarray(want)
        if isinstance(want, np.ndarray) and not want.dtype.hasobject:
            assert type(got) is torch.Tensor and got.shape == want.shape and got.tolist() == want.tolist()
            assert got.numpy().dtype == want.dtype.newbyteorder("=")
        elif isinstance(want, np.ndarray):  # bytes stay as they are
            assert got is want or (type(got) is np.ndarray and got.tolist() == want.tolist())
        elif isinstance(want, dict):
            assert list(got) == list(want) and all(check(got[k], want[k]) is None for k in want)
        elif isinstance(want, tfl.RaggedValue):
            check(got.values, want.values), check(got.row_splits, want.row_splits)
        elif isinstance(want, (tuple, list)):
            assert type(got) is type(want) and len(got) == len(want)
            assert all(check(g, w) is None for g, w in zip(got, want))
        else:
            assert type(got) is type(want) and got == want

    want = list(tfl.TFRecordDataset(path, spec, batch_size=batch_size))
    check(list(TFRecordIterableDataset(path, spec, batch_size=batch_size, as_tensors=True)), want)
    if batch_size is None:
        check([TFRecordMapDataset(path, spec, as_tensors=True)[i] for i in range(3)], want)


def test_pin_memory_pins_the_tensors_of_ragged_values(backend, tmp_path, monkeypatch):
    """DataLoader(pin_memory=True) left an as_tensors batch's RaggedValue unpinned (torch pins
    what it knows and calls pin_memory() on other objects). torch without a GPU cannot pin:
    Tensor.pin_memory is replaced by a copy that records the call."""
    import torch
    from torch.utils.data._utils.pin_memory import pin_memory
    from tfrecord_lite.torch import TFRecordIterableDataset

    path = str(tmp_path / "r.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write_many(tfl.encode_example({"v": list(range(i))}) for i in range(4))
    spec = {"g": tfl.RaggedFeature(np.int64, value_key="v")}
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a, **k: pinned.append(self.clone()) or pinned[-1])
    batch = next(iter(TFRecordIterableDataset(path, spec, batch_size=3, as_tensors=True)))
    got = pin_memory(batch)["g"]
    assert type(got) is tfl.RaggedValue and len(pinned) == 2
    assert all(any(t is p for p in pinned) for t in (got.row_splits, got.values))
    assert got.to_list() == batch["g"].to_list()


def test_as_tensors_copies_read_only_arrays(backend, tmp_path):
    """A parse function's np.frombuffer(record) became a tensor over the record's bytes: torch
    warned ("The given NumPy array is not writable"), and an in-place op wrote into the record."""
    import warnings

    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    paths = write_files(tmp_path, [5])

    seen = []  # the records parse saw, and their bytes then

    def parse(records):
        seen.extend((r, bytearray(r)) for r in records)
        return [np.frombuffer(r, np.uint8) for r in records]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        items = [t for batch in TFRecordIterableDataset(paths, parse=parse, batch_size=2, as_tensors=True)
                 for t in batch] + TFRecordMapDataset(paths, parse=parse, as_tensors=True).__getitems__([0, 1])
    assert len(items) == 7 and all(type(t) is torch.Tensor for t in items)
    want = [record(0, j) for j in range(5)] + [record(0, 0), record(0, 1)]
    for t, rec in zip(items, want):
        assert bytes(t.numpy()) == rec
        t.add_(1)  # its own memory, not the record's
    assert len(seen) == 7 and all(bytes(r) == then for r, then in seen)


def test_map_dataset_reads_and_parses_a_loader_batch_at_once(backend, tmp_path):
    """A DataLoader batch of TFRecordMapDataset items was read and parsed one item at a time."""
    import torch
    from tfrecord_lite.torch import TFRecordMapDataset

    paths = write_examples(tmp_path, [7, 5])
    calls = []

    def parse(records):
        calls.append(len(records))
        return tfl.parse_example(records, {k: SPEC[k] for k in ("id", "name")})  # splits by record

    for as_tensors in (False, True):
        ds = TFRecordMapDataset(paths, parse=parse, as_tensors=as_tensors)
        calls.clear()
        batches = list(torch.utils.data.DataLoader(ds, batch_size=5, collate_fn=as_list))
        assert calls == [5, 5, 2]
        got = [item for b in batches for item in b]
        assert [str(item) for item in got] == [str(ds[i]) for i in range(12)]
        assert {type(item["id"]) for item in got} == {torch.Tensor if as_tensors else np.int64}
    with pytest.raises(IndexError, match="out of range"):
        ds.__getitems__([3, 12])


@pytest.mark.parametrize("batch_size", [None, 4])
def test_as_tensors_converts_the_arrays_of_tuples_and_lists(tmp_path, batch_size):
    """A parse function's (features, label) tuple or list kept NumPy arrays under as_tensors."""
    import collections

    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    paths = write_files(tmp_path, [6, 4])
    pair = collections.namedtuple("pair", "x y")

    def parse(records):
        lengths = np.array([len(r) for r in records], np.int64)
        return lengths, [lengths * 2.0, {"n": lengths}, [b"raw"] * len(records)], pair(lengths, np.float32(1))

    for ds in (TFRecordIterableDataset(paths, parse=parse, batch_size=batch_size, as_tensors=True),
               TFRecordMapDataset(paths, parse=parse, as_tensors=True)):
        item = ds[0] if isinstance(ds, TFRecordMapDataset) else next(iter(ds))
        lengths, (doubled, named, raw), both = item
        assert all(type(t) is torch.Tensor for t in (lengths, doubled, named["n"], both.x, both.y))
        assert type(both) is pair and raw[0] == b"raw" and doubled.tolist() == (lengths * 2).tolist()


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_every_start_method_reads_each_record_once(tmp_path, method):
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    counts = [7, 5, 9]
    paths = write_examples(tmp_path, counts)
    common = dict(num_workers=2, multiprocessing_context=method)
    # Map-style with a spec: the parse step travels to the workers.
    mapped = TFRecordMapDataset(paths, SPEC, as_tensors=True)
    got = []
    for items in torch.utils.data.DataLoader(mapped, batch_size=4, shuffle=True, collate_fn=as_list, **common):
        for item in items:
            assert isinstance(item["id"], torch.Tensor)
            got.append(int(item["id"]))
            assert item["name"] == f"n{got[-1]}".encode()
            assert item["tags"].values.tolist() == list(range(got[-1] % 3))
    assert sorted(got) == example_ids(counts)
    # Iterable with a spec, batched inside the dataset, shuffled.
    stream = TFRecordIterableDataset(paths, SPEC, batch_size=3, shuffle_buffer=4, shuffle_files=True,
                                     as_tensors=True)
    got = []
    for batch in torch.utils.data.DataLoader(stream, batch_size=None, **common):
        ids = batch["id"].tolist()
        got += ids
        tags = batch["tags"]
        assert np.bincount(tags.indices[:, 0], minlength=len(ids)).tolist() == [i % 3 for i in ids]
    assert sorted(got) == example_ids(counts)


def test_datasets_pickle(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    paths = write_examples(tmp_path, [4, 6])
    objects = [  # (object, whether it is random access)
        (tfl.TFRecordDataset(paths, SPEC, batch_size=3, shuffle_buffer=2, seed=1), False),
        (tfl.IndexedDataset(paths, SPEC), True),
        (tfl.TFRecordFile(paths[1]), True),
        (TFRecordIterableDataset(paths, SPEC, seed=3, shuffle_files=True), False),
        (TFRecordMapDataset(paths, SPEC), True),
    ]
    for obj, random_access in objects:
        copy = pickle.loads(pickle.dumps(obj))
        assert type(copy) is type(obj)
        if random_access:
            assert len(copy) == len(obj)
            for i in range(len(obj)):
                assert _plain(copy[i]) == _plain(obj[i])
        else:
            assert _plain(list(copy)) == _plain(list(obj))
    # A dataset pickled mid-iteration carries its position: the copy goes on from there.
    ds = objects[0][0]
    it = iter(ds)
    next(it)
    copy = pickle.loads(pickle.dumps(ds))
    assert _plain(list(copy)) == _plain(list(it))
    it.close()


def _plain(value):
    """Values comparable with ==: arrays and sparse triples become lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "_asdict"):
        return _plain(tuple(value))
    return value


def _epoch_orders(paths, epochs, seed, **loader):
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    ds = TFRecordIterableDataset(paths, shuffle_buffer=8, shuffle_files=True, seed=seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork",
                                     generator=torch.Generator().manual_seed(0), **loader)
    return [list(dl) for _ in range(epochs)]


@pytest.mark.parametrize("persistent", [True, False])
def test_workers_reshuffle_each_epoch(tmp_path, persistent):
    counts = [9, 14, 3, 11]
    paths = write_files(tmp_path, counts)
    everything = sorted(record(f, j) for f, n in enumerate(counts) for j in range(n))
    orders = _epoch_orders(paths, 3, seed=5, persistent_workers=persistent)
    assert all(sorted(order) == everything for order in orders)
    assert len({tuple(order) for order in orders}) == 3
    # Reproducible for a seed (and the loader's generator, which seeds its workers).
    assert _epoch_orders(paths, 3, seed=5, persistent_workers=persistent) == orders
    assert _epoch_orders(paths, 1, seed=6, persistent_workers=persistent)[0] != orders[0]


def test_set_epoch_wins_and_the_count_goes_on(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [20, 20])
    ds = TFRecordIterableDataset(paths, shuffle_buffer=10, shuffle_files=True, seed=2)
    first, second = list(ds), list(ds)
    assert first != second and sorted(first) == sorted(second)
    ds.set_epoch(0)
    assert list(ds) == first
    assert list(ds) == second
    ds.set_epoch(1)
    assert list(ds) == second


def test_each_epoch_reuses_the_read_buffers_of_the_last(tmp_path, monkeypatch):
    """Each iter() reads through a new TFRecordDataset, which takes over the read buffers of
    the last epoch's (a DataLoader's persistent workers too, each its own)."""
    from tfrecord_lite.torch import TFRecordIterableDataset

    made = fresh_buffers(monkeypatch)
    paths = write_files(tmp_path, [200, 200], size=20_000)
    ds = TFRecordIterableDataset(paths, batch_size=40)
    for epoch in range(3):
        assert records_of(ds) == 400
        if epoch == 0:
            first = len(made)
    assert first >= 2 and len(made) - first <= 4, (first, len(made))  # else 2 x first more


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_mid_epoch(tmp_path, workers):
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader

    from tfrecord_lite.torch import TFRecordIterableDataset

    counts = [30, 25, 41, 12]
    paths = write_examples(tmp_path, counts)

    def loader():
        ds = TFRecordIterableDataset(paths, SPEC, batch_size=4, shuffle_files=True, seed=9, cycle_length=2)
        extra = dict(multiprocessing_context="fork") if workers else {}
        # The generator seeds the workers; with it, the runs shuffle alike.
        return StatefulDataLoader(ds, batch_size=None, num_workers=workers,
                                  generator=torch.Generator().manual_seed(1), **extra)

    def ids(batches):
        return [i for b in batches for i in b["id"].tolist()]

    full = ids(loader())
    assert sorted(full) == example_ids(counts)
    dl = loader()
    it = iter(dl)
    head = [next(it) for _ in range(7)]
    state = dl.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert ids(head) + ids(rest) == full  # exactly the remaining elements, in order
    cursors = list(_find(state, "cursor"))
    assert cursors and all(c is not None for c in cursors)  # file positions: resume seeks
    # The pass after a resumed one is the next epoch, as without resuming.
    dl = loader()
    assert ids(dl) == full
    assert ids(resumed) == ids(dl)


def _find(tree, key):
    """Every value stored under key in nested dicts and lists."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                yield v
            else:
                yield from _find(v, key)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _find(v, key)


def test_len_counts_once_and_keeps_the_count_in_sidecars(tmp_path):
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    counts = [10, 0, 7, 26]
    paths = write_files(tmp_path, counts[:3])
    paths += write_files(tmp_path, counts[3:], compression="gzip", name="gz-{:02d}.tfrecord")
    assert not any(os.path.exists(p + ".index") for p in paths)
    ds = TFRecordIterableDataset(paths)
    assert len(ds) == len(list(ds)) == 43
    # Uncompressed files got a sidecar (compressed ones cannot be indexed).
    assert [os.path.exists(p + ".index") for p in paths] == [True, True, True, False]
    assert tfl.index.read_index(paths[2] + ".index")[0].tolist() == [16 * j + 4 * j for j in range(7)]
    for options in (dict(batch_size=4), dict(batch_size=4, drop_remainder=True), dict(num_epochs=3),
                    dict(shard=(1, 3), batch_size=2), dict(shard=(2, 7))):  # by file / by record
        ds = TFRecordIterableDataset(paths, **options)
        assert len(ds) == len(list(ds)), options
    # A stale sidecar is not trusted: the file is counted again.
    with tfl.TFRecordWriter(paths[0]) as w:
        w.write_many([b"a", b"b"])
    assert len(TFRecordIterableDataset(paths[:1])) == 2
    with pytest.raises(TypeError, match="num_epochs=None"):
        len(TFRecordIterableDataset(paths, num_epochs=None))
    # With DataLoader: a map-style dataset's len, and the loader's for the iterable one.
    assert len(TFRecordMapDataset(paths[:3])) == 2 + 0 + 7  # the recount rewrote the sidecar
    loader = torch.utils.data.DataLoader(TFRecordIterableDataset(paths), batch_size=5)
    assert len(loader) == len(list(loader)) == 7  # 35 records, 5 a batch


def damage_record(path, j):
    """Flip the first data byte of record j; returns the record's offset."""
    offset = int(tfl.index.scan_index(path)[0][j])
    data = bytearray(open(path, "rb").read())
    data[offset + 12] ^= 1
    open(path, "wb").write(bytes(data))
    return offset


def error_of(loader):
    with pytest.raises(tfl.TFRecordError) as info:
        for _ in loader:
            pass
    return info.value


def fields(exc):
    return type(exc), exc.detail, exc.path, exc.offset, exc.index, exc.hint, exc.batch_index


@pytest.mark.parametrize("notes", [True, False])  # False: Python 3.10, whose tracebacks show no notes
@pytest.mark.parametrize("features", [None, SPEC])
def test_worker_errors_keep_their_location(backend, tmp_path, monkeypatch, notes, features):
    """torch re-raises a worker's error as type(exc)(traceback text); the main process still
    sees where it happened, as it does without workers."""
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    monkeypatch.setattr(tfl.errors, "_NOTES", notes)
    paths = write_examples(tmp_path, [6, 9])
    damage_record(paths[1], 4)  # (file + record) % 2 == 1: worker 1's
    ds = TFRecordIterableDataset(paths, features, batch_size=3)
    want = error_of(torch.utils.data.DataLoader(ds, batch_size=None))
    assert isinstance(want, tfl.DataLossError) and want.index == 4 and want.path == paths[1]
    got = error_of(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    assert "worker process 1" in str(got) and str(want) in str(got)
    assert fields(got) == fields(want)


def test_map_style_worker_errors_keep_their_location(backend, tmp_path):
    import torch
    from tfrecord_lite.torch import TFRecordMapDataset

    path = write_examples(tmp_path, [8])[0]  # indexed
    ds = TFRecordMapDataset(path, SPEC)
    offset = damage_record(path, 5)  # after indexing: the read finds it
    want = error_of(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=as_list))
    got = error_of(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=as_list, num_workers=1))
    assert (want.path, want.offset, want.index) == (path, offset, 5)
    assert fields(got) == fields(want)


def test_only_a_traceback_ending_with_the_fields_gives_them():
    exc = tfl.CorruptRecordError("bad", path="a, record 1: b", offset=3, index=1, hint="do x")
    exc._carry()
    exc._carry()  # once only
    text = "".join(traceback.format_exception(exc))
    assert text.count(tfl.errors._FIELDS) == 1
    assert fields(tfl.CorruptRecordError(text)) == fields(exc)
    # The fields of an error that the one raised last chains are not that one's.
    try:
        try:
            raise exc
        except tfl.CorruptRecordError:
            raise tfl.TruncatedRecordError("later")  # noqa: B904
    except tfl.TruncatedRecordError as later:
        chained = "".join(traceback.format_exception(later))
    assert text in chained and fields(tfl.TruncatedRecordError(chained))[2:] == (None,) * 5
    for broken in (tfl.errors._FIELDS + "{", tfl.errors._FIELDS + '{"path": 1}'):
        assert tfl.CorruptRecordError(broken).path is None
    moved = tfl.EncodeError("failed", item=7, shard=2, path="p")
    moved._carry()
    assert fields(tfl.EncodeError("".join(traceback.format_exception(moved)))) == fields(moved)
    assert tfl.EncodeError("".join(traceback.format_exception(moved))).item == 7


@pytest.mark.parametrize("loader_batch", [None, 2])
def test_resuming_a_worker_that_ran_out_gives_nothing_more(tmp_path, loader_batch):
    """A state taken once one worker had run out (its shard done) but not the others: resumed,
    that worker started its next epoch, a whole shard again, where torchdata asks it for one
    more item and expects none; the resumed loader gave its records twice."""
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader

    from tfrecord_lite.torch import TFRecordIterableDataset

    counts = [13, 7, 0, 9]  # worker 0 reads files 0 and 2: 13 records, worker 1 16
    paths = write_examples(tmp_path, counts)

    def loader():
        ds = TFRecordIterableDataset(paths, SPEC, batch_size=None if loader_batch else 3, seed=5)
        return StatefulDataLoader(ds, batch_size=loader_batch, num_workers=2, multiprocessing_context="fork",
                                  collate_fn=as_list if loader_batch else None)

    def ids(batches):
        return [int(i) for b in batches for i in (b["id"].tolist() if isinstance(b, dict) else [e["id"] for e in b])]

    full = list(loader())
    assert sorted(ids(full)) == example_ids(counts)
    for k in range(len(full) - 3, len(full) + 1):  # from before worker 0 runs out to the last batch
        dl = loader()
        it = iter(dl)
        head = [next(it) for _ in range(k)]
        state = dl.state_dict()
        del it
        resumed = loader()
        resumed.load_state_dict(state)
        assert ids(head) + ids(resumed) == ids(full), k
        assert sorted(ids(resumed)) == example_ids(counts)  # the next epoch: all of it


def _worker_merge(streams):
    """What a DataLoader yields from its workers' streams: one item of each in turn, a worker
    that has run out left out."""
    out, iters = [], [iter(s) for s in streams]
    while iters:
        for it in list(iters):
            try:
                out.append(next(it))
            except StopIteration:
                iters.remove(it)
    return out


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("persistent", [True, False])
def test_set_epoch_reaches_every_worker(tmp_path, method, persistent):
    """The workers' copies counted epochs themselves: persistent workers ignored a set_epoch()
    made once they ran, so set_epoch(0), (1), (0) gave a third epoch unlike the first."""
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])
    opts = dict(shuffle_buffer=8, shuffle_files=True, seed=5, batch_size=2)

    def expected(epoch):  # each worker's shard read without workers, merged as DataLoader does
        streams = []
        for worker in range(2):
            ds = TFRecordIterableDataset(paths, shard=(worker, 2), **opts)
            ds.set_epoch(epoch)
            streams.append([b.tolist() for b in torch.utils.data.DataLoader(ds, batch_size=None)])
        return _worker_merge(streams)

    ds = TFRecordIterableDataset(paths, **opts)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent,
                                     multiprocessing_context=method)
    assert len({tuple(map(tuple, expected(e))) for e in range(3)}) == 3
    for epoch in [0, 2, 0, 1] if method == "spawn" else [0, 1, 0, 3, 3, 2]:
        ds.set_epoch(epoch)
        assert [b.tolist() for b in dl] == expected(epoch), epoch
    if persistent:  # without set_epoch, the count goes on from the last one
        assert [b.tolist() for b in dl] == expected(epoch + 1)


def _shard_passes(paths, epoch, workers, **opts):
    """What a DataLoader with this many workers yields at this epoch: each worker's shard read
    without workers, merged as DataLoader does."""
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    streams = []
    for worker in range(workers):
        ds = TFRecordIterableDataset(paths, shard=(worker, workers) if workers > 1 else None, **opts)
        ds.set_epoch(epoch)
        streams.append([b.tolist() for b in torch.utils.data.DataLoader(ds, batch_size=None)])
    return _worker_merge(streams)


@pytest.mark.parametrize("method,workers,persistent", [("fork", 0, False), ("fork", 2, False), ("fork", 2, True),
                                                       ("spawn", 2, False), ("spawn", 2, True)])
def test_a_dataloader_pass_advances_the_epoch_as_a_direct_pass_does(tmp_path, method, workers, persistent):
    """Workers that are not persistent started each pass at the main process's epoch, which
    their passes never advanced: set_epoch(1) once, then two passes, gave epoch 1 twice."""
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])
    opts = dict(shuffle_buffer=8, shuffle_files=True, seed=5, batch_size=2)
    expected = {e: _shard_passes(paths, e, max(workers, 1), **opts) for e in range(4)}
    assert len({str(v) for v in expected.values()}) == 4
    ds = TFRecordIterableDataset(paths, **opts)
    extra = dict(multiprocessing_context=method, persistent_workers=persistent) if workers else {}
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, **extra)

    def one_pass():
        return [b.tolist() for b in dl]

    assert [one_pass(), one_pass()] == [expected[0], expected[1]]  # no set_epoch: 0, 1, ...
    assert ds.epoch == 2
    ds.set_epoch(1)  # once: the count goes on from it
    assert [one_pass(), one_pass()] == [expected[1], expected[2]]
    for epoch in [3, 0]:  # each epoch, as for DistributedSampler: exactly that epoch
        ds.set_epoch(epoch)
        assert one_pass() == expected[epoch]
    # A direct pass takes the next epoch of the same count, and the loader's next pass the one after.
    assert [b.tolist() for b in ds] == _shard_passes(paths, 1, 1, **opts)
    assert one_pass() == expected[2]


def test_loaders_seeded_alike_still_advance_the_epoch(tmp_path):
    """A new DataLoader each epoch, its generator seeded alike: its workers share the seed of
    the last pass's, yet each pass takes the next epoch."""
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])
    opts = dict(shuffle_buffer=8, shuffle_files=True, seed=5, batch_size=2)
    ds = TFRecordIterableDataset(paths, **opts)
    for epoch in range(3):
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork",
                                         generator=torch.Generator().manual_seed(0))
        assert [b.tolist() for b in dl] == _shard_passes(paths, epoch, 2, **opts), epoch


def _rank_passes(ds, barrier, results, rank):
    """A process the dataset was handed to (as torch.multiprocessing.spawn hands one to each
    rank): passes with and without set_epoch, in step with the other ranks."""
    import torch

    def one_pass():
        barrier.wait()
        return [b.tolist() for b in torch.utils.data.DataLoader(ds, batch_size=None)]

    passes = [one_pass(), one_pass()]
    ds.set_epoch(3)
    passes.append(one_pass())
    results.put((rank, passes))


def test_processes_given_the_dataset_count_their_own_epochs(tmp_path):
    """Spawned processes that were handed the dataset (not DataLoader workers) counted in one
    shared count: ranks took epochs 0 and 1 between them, and set_epoch(3) in each gave one
    of them epoch 4."""
    import multiprocessing

    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])
    opts = dict(shuffle_buffer=8, shuffle_files=True, seed=5, batch_size=2)
    ds = TFRecordIterableDataset(paths, **opts)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    ranks = [context.Process(target=_rank_passes, args=(ds, barrier, results, r)) for r in range(2)]
    for p in ranks:
        p.start()
    got = dict(results.get(timeout=120) for _ in ranks)
    for p in ranks:
        p.join()
    want = [_shard_passes(paths, e, 1, **opts) for e in (0, 1, 3)]
    assert got == {0: want, 1: want}
    assert ds.epoch == 0  # the ranks' passes are theirs


def test_a_dataset_leaves_the_start_method_unset(tmp_path):
    code = ("import multiprocessing, sys; from tfrecord_lite.torch import TFRecordIterableDataset; "
            "TFRecordIterableDataset(sys.argv[1]); multiprocessing.set_start_method('spawn')")
    subprocess.run([sys.executable, "-c", code, write_files(tmp_path, [3])[0]], check=True)


def test_bad_options_fail_where_the_dataset_is_made(tmp_path):
    """They failed only as each DataLoader worker started (a TypeError for a misspelt option,
    raised again from the worker's traceback text), and as_tensors was ignored with arrow."""
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [3])
    with pytest.raises(TypeError, match="batchsize"):
        TFRecordIterableDataset(paths, batchsize=2)
    with pytest.raises(tfl.InvalidArgumentError, match="shuffle_buffer"):
        TFRecordIterableDataset(paths, shuffle_buffer=-1)
    with pytest.raises(tfl.TFRecordError, match="no TFRecord files found"):
        TFRecordIterableDataset(str(tmp_path / "*.nothing"))
    with pytest.raises(tfl.InvalidArgumentError, match="as_tensors"):
        TFRecordIterableDataset(paths, SPEC, batch_size=2, output="arrow", as_tensors=True)
    assert TFRecordIterableDataset(str(tmp_path)).files == paths  # a directory listed once


def test_an_epoch_count_left_locked_fails_clearly(tmp_path, monkeypatch):
    """A worker killed while it held the shared epoch count's lock left every later pass
    waiting for ever; now the wait ends with an error that says what happened."""
    import torch
    from tfrecord_lite import torch as tfl_torch

    paths = write_files(tmp_path, [3])
    ds = tfl_torch.TFRecordIterableDataset(paths)
    monkeypatch.setattr(tfl_torch, "_LOCK_WAIT", 0.2)
    loader = torch.utils.data.DataLoader(ds, num_workers=1, batch_size=None)
    assert sorted(loader) == [record(0, j) for j in range(3)]
    ds._epochs.lock.acquire()  # held, as by a process gone without releasing it
    try:
        for attempt in (lambda: list(ds), lambda: list(loader), lambda: ds.set_epoch(3)):
            with pytest.raises(tfl.TFRecordError, match="stayed locked for 0.2 s: a DataLoader worker was killed"):
                attempt()
    finally:
        ds._epochs.lock.release()
    assert sorted(ds) == [record(0, j) for j in range(3)]


def test_set_epoch_takes_epochs_from_zero(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    ds = TFRecordIterableDataset(write_files(tmp_path, [3]), shuffle_buffer=2)
    with pytest.raises(tfl.InvalidArgumentError, match="epoch must be >= 0"):
        ds.set_epoch(-1)
    with pytest.raises(tfl.InvalidArgumentError, match="< 2\\*\\*63"):
        ds.set_epoch(2**63)
    ds.set_epoch(2**63 - 1)
    assert ds.epoch == 2**63 - 1
    ds.epoch = 4  # an attribute once: setting it is set_epoch()
    other = TFRecordIterableDataset(ds.files, shuffle_buffer=2, seed=ds.options["seed"])
    other.set_epoch(4)
    assert ds.epoch == 4 and list(ds) == list(other)


def test_copies_outside_workers_have_their_own_epochs(tmp_path):
    """A pickled or copied dataset is independent: its set_epoch() is not the original's."""
    import copy

    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [20, 20])
    ds = TFRecordIterableDataset(paths, shuffle_buffer=10, shuffle_files=True, seed=2)
    ds.set_epoch(3)
    want = list(ds)
    for other in (pickle.loads(pickle.dumps(ds)), copy.deepcopy(ds)):
        ds.set_epoch(3)
        other.set_epoch(5)
        assert list(ds) == want
        other.set_epoch(3)
        assert list(other) == want


def test_as_tensors_takes_arrays_with_negative_strides(tmp_path):
    """A parse function's flipped array (an augmentation's x[:, ::-1]) made torch.from_numpy
    raise ValueError ("At least one stride in the given numpy array is negative")."""
    import torch
    from tfrecord_lite.torch import TFRecordIterableDataset, TFRecordMapDataset

    paths = write_files(tmp_path, [5])

    def parse(records):
        grid = np.arange(len(records) * 3, dtype=np.int64).reshape(len(records), 3)
        return {"flipped": grid[:, ::-1], "reversed": grid[::-1, 0], "when": np.zeros(len(records), "datetime64[s]")}

    for ds in (TFRecordIterableDataset(paths, parse=parse, batch_size=2, as_tensors=True),
               TFRecordMapDataset(paths, parse=parse, as_tensors=True)):
        if isinstance(ds, TFRecordMapDataset):  # one record parsed as a batch of one, then split
            item, want = ds[1], {k: v[0] for k, v in parse([b""]).items()}
        else:
            item, want = next(iter(ds)), parse([b""] * 2)
        assert type(item["flipped"]) is torch.Tensor and item["flipped"].tolist() == want["flipped"].tolist()
        assert type(item["reversed"]) is torch.Tensor and item["reversed"].tolist() == want["reversed"].tolist()
        # What torch has no dtype for stays an array, as bytes do.
        assert isinstance(item["when"], (np.ndarray, np.datetime64)) and item["when"].dtype == want["when"].dtype
