"""Grain: TFRecordFile and IndexedDataset as random-access data sources, with real grain."""

import pickle

import numpy as np

import tfrecord_lite as tfl

from .test_torch import example_ids, write_examples

SPEC = {"id": tfl.FixedLenFeature([], np.int64)}


def test_sources_satisfy_the_protocol(tmp_path):
    import grain.python  # a test dependency: missing grain fails rather than skips
    from grain.sources import RandomAccessDataSource

    paths = write_examples(tmp_path, [3, 4])
    for source in (tfl.IndexedDataset(paths, SPEC), tfl.TFRecordFile(paths[1])):
        assert isinstance(source, RandomAccessDataSource)
        assert isinstance(source, grain.python.RandomAccessDataSource)
        copy = pickle.loads(pickle.dumps(source))
        assert repr(copy) == repr(source) and str(len(source)) in repr(source)
        items = source._getitems([2, 0, 2])
        assert [_plain(i) for i in items] == [_plain(source[i]) for i in (2, 0, 2)]


def test_map_dataset_and_loader_with_two_workers(tmp_path):
    import grain
    from absl import flags

    if not flags.FLAGS.is_parsed():  # grain's worker processes read absl flags (outside absl.app)
        flags.FLAGS.mark_as_parsed()
    counts = [11, 6, 15]
    paths = write_examples(tmp_path, counts)
    source = tfl.IndexedDataset(paths, SPEC)
    ds = grain.MapDataset.source(source).shuffle(seed=3)
    ids = [int(item["id"]) for item in ds]
    assert sorted(ids) == example_ids(counts) and ids != example_ids(counts)
    sampler = grain.samplers.IndexSampler(num_records=len(source), shuffle=True, seed=7, num_epochs=1,
                                          shard_options=grain.sharding.NoSharding())
    loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=2,
                              operations=[grain.transforms.Batch(batch_size=4)])
    got = [int(i) for batch in loader for i in batch["id"]]
    assert sorted(got) == example_ids(counts)
    assert got != example_ids(counts)  # shuffled


def _plain(item):
    return {k: v.tolist() for k, v in item.items()} if isinstance(item, dict) else item
