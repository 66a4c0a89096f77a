"""The pipeline with features= (tfrecord_lite.parse_example) and the to_numpy/to_npy sinks,
with the real Example codec and with a stand-in that returns parse_example's documented
output (dict of name -> ndarray, leading batch dimension)."""

import os

import numpy as np
import pytest
from ._records import record, write_files

import tfrecord_lite
from tfrecord_lite import TFRecordDataset, TFRecordWriter, to_npy, to_numpy

def _example(i):
    return tfrecord_lite.encode_example({"x": [float(i), i + 0.5], "y": i})


@pytest.fixture
def example_files(tmp_path):
    paths = []
    for f in range(3):
        path = str(tmp_path / f"ex{f}.tfrecord")
        with TFRecordWriter(path) as w:
            for j in range(7):
                w.write(_example(f * 7 + j))
        paths.append(path)
    return paths


def _spec():
    from tfrecord_lite.features import FixedLenFeature

    return {"x": FixedLenFeature([2], np.float32), "y": FixedLenFeature([], np.int64)}


def test_features_batches(backend, example_files):
    batches = list(TFRecordDataset(example_files, _spec(), batch_size=5, num_threads=2, cycle_length=1))
    ys = np.concatenate([b["y"] for b in batches])
    assert ys.tolist() == list(range(21)) and batches[0]["x"].shape == (5, 2)


def test_features_unbatched(backend, example_files):
    items = list(TFRecordDataset(example_files, _spec()))
    assert [int(i["y"]) for i in items] == list(range(21)) and items[3]["x"].shape == (2,)


def test_to_numpy_with_codec(backend, example_files, tmp_path):
    arrays = to_numpy(example_files, _spec())
    assert arrays["y"].tolist() == list(range(21))
    mm = to_npy(example_files, _spec(), tmp_path / "out", batch_size=4)
    assert np.array_equal(mm["x"], arrays["x"])


# -- sinks with a stand-in codec --------------------------------------------------------


def stand_in_parse_example(records, features):
    """parse_example's documented output shape for FixedLenFeature specs."""
    return {
        "length": np.array([len(r) for r in records], np.int64),
        "pair": np.array([[r[0], r[-1]] for r in records], np.uint8),
    }


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(tfrecord_lite, "parse_example", stand_in_parse_example, raising=False)


def test_features_call_parse_example_per_batch(stand_in, tmp_path):
    paths = write_files(tmp_path, [4, 6])
    batches = list(TFRecordDataset(paths, {"any": "spec"}, batch_size=4))
    assert [len(b["length"]) for b in batches] == [4, 4, 2]
    items = list(TFRecordDataset(paths, {"any": "spec"}))
    assert len(items) == 10 and items[0]["pair"].shape == (2,) and int(items[0]["length"]) == 4


def test_to_numpy_and_to_npy(stand_in, backend, tmp_path):
    paths = write_files(tmp_path, [30, 0, 45], size=5)
    lengths = [len(record(f, j, 5)) for f, n in enumerate([30, 0, 45]) for j in range(n)]
    arrays = to_numpy(paths, {"any": "spec"}, batch_size=8)
    assert arrays["length"].tolist() == lengths and arrays["pair"].shape == (75, 2)
    out = tmp_path / "npy"
    mm = to_npy(paths, {"any": "spec"}, out, batch_size=8, progress=False)
    assert isinstance(mm["pair"], np.memmap) and np.array_equal(mm["pair"], arrays["pair"])
    assert np.load(out / "length.npy").tolist() == lengths
    assert backend.name == tfrecord_lite.implementation


_RSS_SCRIPT = """
import os, sys
import os

import numpy as np
import tfrecord_lite as tfl

def status(field):
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith(field))

d = sys.argv[1]
n, shape = 4000, (32, 256)  # 32 KiB per row: 128 MiB of output
with tfl.TFRecordWriter(d + '/a.tfrecord') as w:
    for i in range(0, n, 250):
        x = np.full((250,) + shape, i, np.float32)
        w.write_many(tfl.encode_examples({'x': x, 'y': np.arange(i, i + 250)}, raw=('x',)))
del x
with open('/proc/self/clear_refs', 'w') as f:  # restart the peak (VmHWM) from here
    f.write('5')
base = status('VmRSS')
out = tfl.to_npy(d + '/a.tfrecord', {'x': tfl.RawTensorFeature(shape, np.float32),
                 'y': tfl.FixedLenFeature([], np.int64)}, d + '/npy', batch_size=64, progress=False)
peak = status('VmHWM')
assert (out['y'] == np.arange(n)).all() and float(out['x'][-1, 0, 0]) == 3750.0
print(peak - base)
"""


def test_to_npy_memory_stays_at_about_a_batch(backend, tmp_path):
    # 128 MiB of output in 2 MiB batches: the written pages must not pile up in the process.
    import subprocess
    import sys

    env = dict(os.environ, TFRECORD_LITE_PURE_PYTHON="1" if backend.name == "python" else "0")
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(tmp_path)], env=env,
                         capture_output=True, text=True, check=True)
    assert int(out.stdout) < 48, f"to_npy grew the resident set by {out.stdout.strip()} MiB"


def test_to_npy_rejects_bytes_features_clearly(backend, example_files, tmp_path):
    spec = {"y": _spec()["y"], "name": tfrecord_lite.FixedLenFeature([], bytes, default_value=b"")}
    with pytest.raises(tfrecord_lite.FeatureSpecError, match="'name'.*RawTensorFeature"):
        to_npy(example_files, spec, tmp_path / "out", progress=False)
