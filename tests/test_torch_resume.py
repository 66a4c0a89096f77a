"""PyTorch adapter: resuming from states (set_epoch, StatefulDataLoader's workers)."""

import pytest

import tfrecord_lite as tfl
from ._records import write_files


@pytest.mark.parametrize("stop", [5, None])  # mid-epoch, after the epoch's last record
def test_set_epoch_of_a_loaded_states_epoch_keeps_it(tmp_path, stop):
    """set_epoch() dropped a state just loaded: a loop that calls it as each epoch starts, the
    one it resumes included, read that epoch again from its start (as TFRecordDataset does,
    it now keeps a state of the epoch it is set to). A set_epoch() after an ended pass made
    the state say "ended", so a resume from it gave nothing for the epoch set."""
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])
    opts = dict(shuffle_buffer=8, shuffle_files=True, seed=5)

    def fresh(epoch):
        ds = TFRecordIterableDataset(paths, **opts)
        ds.set_epoch(epoch)
        return list(ds)

    ds = TFRecordIterableDataset(paths, **opts)
    it = iter(ds)
    head = [next(it) for _ in range(stop or 37)]
    state = ds.state_dict()
    rest = list(it)
    assert head + rest == fresh(0)
    resumed = TFRecordIterableDataset(paths, **opts)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)
    assert list(resumed) == rest
    resumed.set_epoch(1)
    assert list(resumed) == fresh(1)
    # Another epoch than the state's: that epoch, whole.
    other = TFRecordIterableDataset(paths, **opts)
    other.load_state_dict(state)
    other.set_epoch(2)
    assert list(other) == fresh(2)
    # A pass that has ended, then set_epoch: its state is that epoch's start.
    list(other)
    other.set_epoch(4)
    later = TFRecordIterableDataset(paths, **opts)
    later.load_state_dict(other.state_dict())
    assert list(later) == fresh(4)


def test_resuming_with_other_workers_says_so(tmp_path):
    """A StatefulDataLoader state loaded with another num_workers was refused for a "different
    shard ([0, 2] then, None now)", a shard the user never gave; it now says what differs."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])

    def loader(workers):
        ds = TFRecordIterableDataset(paths, batch_size=2, seed=1)
        return StatefulDataLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context="fork")

    dl = loader(2)
    it = iter(dl)
    head = [next(it) for _ in range(3)]
    state = dl.state_dict()
    del it
    resumed = loader(1)
    resumed.load_state_dict(state)
    with pytest.raises(tfl.InvalidArgumentError) as info:
        list(resumed)
    assert info.value.detail == ("the state was saved by DataLoader worker 0 of 2 on rank 0 of 1 and is loaded by "
                                 "DataLoader worker 0 of 1 on rank 0 of 1")
    assert "num_workers" in info.value.hint
    resumed = loader(2)  # as saved: the rest
    resumed.load_state_dict(state)
    assert len(head) + len(list(resumed)) == len(list(loader(2)))


@pytest.mark.parametrize("workers", [0, 2])
def test_set_epoch_before_a_loaded_state_of_an_ended_pass_wins(tmp_path, workers):
    """StatefulDataLoader loads a state as the next pass starts, after the loop's set_epoch;
    where the saved pass had ended it starts a new pass at once. That pass took the state's
    next epoch instead of the one set: set_epoch(7) gave epoch 4 after a pass of epoch 3."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_files(tmp_path, [9, 14, 3, 11])

    def loader():
        ds = TFRecordIterableDataset(paths, shuffle_buffer=8, shuffle_files=True, seed=5, batch_size=2)
        extra = dict(multiprocessing_context="fork") if workers else {}
        return ds, StatefulDataLoader(ds, batch_size=None, num_workers=workers, **extra)

    def passes(*epochs):
        ds, dl = loader()
        got = []
        for epoch in epochs:
            ds.set_epoch(epoch)
            got.append([b.tolist() for b in dl])
        return got

    ds, dl = loader()
    ds.set_epoch(3)
    first = [b.tolist() for b in dl]
    state = dl.state_dict()  # the pass has ended
    ds, dl = loader()
    dl.load_state_dict(state)
    ds.set_epoch(7)
    resumed = [b.tolist() for b in dl]
    assert [first, resumed, [b.tolist() for b in dl]] == passes(3, 7, 8)
    ds, dl = loader()  # without set_epoch: the pass after the saved one
    dl.load_state_dict(state)
    assert [b.tolist() for b in dl] == passes(4)[0]
