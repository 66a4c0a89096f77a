"""to_numpy / to_npy: the options and parse outputs that make no arrays are refused with an
error that says so, never exported wrong or waited on forever."""

import os

import numpy as np
import pytest

import tfrecord_lite as tfl

SPEC = {"x": tfl.FixedLenFeature([3], np.float32), "id": tfl.FixedLenFeature([], np.int64)}


@pytest.fixture
def path(tmp_path):
    path = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write_many(tfl.encode_example({"x": [float(i)] * 3, "id": i}) for i in range(10))
    return path


def _exports(tmp_path):
    return (("to_numpy", lambda *a, **k: tfl.to_numpy(*a, **k)),
            ("to_npy", lambda *a, **k: tfl.to_npy(*a, out_dir=tmp_path / "npy", progress=False, **k)))


def test_unbatched_or_endless_options_are_refused(backend, path, tmp_path):
    """batch_size=None gave one record's values per batch: to_numpy joined the rows of x into
    one flat array of 30 floats (shape (30,), not (10, 3)) and failed on a scalar feature
    with 'not a dense array ... need FixedLenFeature' although it was one. num_epochs=None
    never ended (to_npy's count, to_numpy's reads)."""
    for name, export in _exports(tmp_path):
        with pytest.raises(tfl.InvalidArgumentError, match=f"{name} needs batch_size") as info:
            export(path, {"x": SPEC["x"]}, batch_size=None)
        assert "positive batch_size" in info.value.hint
        with pytest.raises(tfl.InvalidArgumentError, match=f"{name} with num_epochs=None would read the files forever"):
            export(path, SPEC, num_epochs=None)
        assert export(path, SPEC, batch_size=4, num_epochs=2)["id"].tolist() == list(range(10)) * 2
    assert backend.name == tfl.implementation
