"""TFRecordDataset's shuffling: TensorFlow's shuffle-buffer guarantee, and the seeds it takes."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset

from ._records import write_files
from .test_dataset import COUNTS, expected, files  # noqa: F401 (files: a fixture)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=4), buffer=st.sampled_from([1, 2, 7, 50, 5000]),
       batch=st.sampled_from([None, 1, 4]), seed=st.integers(0, 2**32), epochs=st.sampled_from([1, 3]),
       parsed=st.booleans(), step=st.sampled_from([4096, 5]))
def test_shuffle_buffer_guarantee(backend, tmp_path_factory, monkeypatch, counts, buffer, batch, seed, epochs,
                                  parsed, step):
    # TensorFlow's shuffle buffer: the record at position k of an epoch comes from the first
    # k + buffer_size records of the unshuffled order, and each record comes exactly once.
    # step: records the buffer takes in at a time (small: many steps per epoch).
    from tfrecord_lite import _gather

    monkeypatch.setattr(_gather, "_SHUFFLE_STEP", step)
    paths = write_files(tmp_path_factory.mktemp("shuf"), counts,
                        make=lambda f, j: tfl.encode_example({"id": 1000 * f + j}))
    spec = {"id": tfl.FixedLenFeature([], np.int64)} if parsed else None
    opts = dict(cycle_length=2, batch_size=batch, num_epochs=epochs, shuffle_files=True, seed=seed)

    def flat(ds):
        out = []
        for item in ds:
            if batch is None:
                out.append(int(item["id"]) if parsed else item)
            else:
                out += item["id"].tolist() if parsed else list(item)
        return out

    plain = flat(TFRecordDataset(paths, spec, **opts))
    mixed = flat(TFRecordDataset(paths, spec, shuffle_buffer=buffer, **opts))
    n = sum(counts)
    assert len(plain) == len(mixed) == n * epochs
    for e in range(epochs):
        order, got = plain[e * n:(e + 1) * n], mixed[e * n:(e + 1) * n]
        assert sorted(got) == sorted(order) and len(set(got)) == n
        where = {x: i for i, x in enumerate(order)}
        assert all(where[x] < k + buffer for k, x in enumerate(got)), (e, got, order)


def test_a_negative_seed_shuffles(backend, files):
    # seed=hash(name) is often negative: numpy's SeedSequence raised a bare ValueError
    # ("expected non-negative integer") at the first next(). Any integer seeds now, a negative
    # one apart from its absolute value.
    def run(seed, **kw):
        return list(TFRecordDataset(files, shuffle_buffer=8, shuffle_files=True, seed=seed, **kw))

    a = run(-7)
    assert a == run(-7) and sorted(a) == sorted(expected(COUNTS)) and a != expected(COUNTS)
    assert a != run(7)
    two = run(-7, num_epochs=2)
    assert two[:len(a)] == a and two[len(a):] != a
    ds = TFRecordDataset(files, shuffle_buffer=8, seed=-(2**63))
    it = iter(ds)
    head = [next(it) for _ in range(5)]
    state = ds.state_dict()
    fresh = TFRecordDataset(files, shuffle_buffer=8)
    fresh.load_state_dict(state)
    assert head + list(fresh) == list(TFRecordDataset(files, shuffle_buffer=8, seed=-(2**63)))
