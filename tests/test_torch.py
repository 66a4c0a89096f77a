"""PyTorch and JAX adapters."""

import subprocess
import sys

import numpy as np
import pytest
from ._records import record, write_files


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


def test_jax_device_put(tmp_path):
    import jax  # a test dependency: missing jax fails this test rather than skipping it

    from tfrecord_lite import TFRecordDataset

    paths = write_files(tmp_path, [10])
    ds = TFRecordDataset(paths, batch_size=4,
                         parse=lambda recs: {"len": np.array([len(r) for r in recs], np.int32)})
    out = [jax.device_put(b) for b in ds]
    assert [int(b["len"].sum()) for b in out] == [16, 16, 8]
