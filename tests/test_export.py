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


def _mixed(records):
    """A parse function whose second batch lacks a feature the first one has."""
    out = {"n": np.array([len(r) for r in records])}
    if len(records) == 4:
        out["extra"] = np.ones(len(records))
    return out


@pytest.mark.parametrize("parse, match", [
    (_mixed, "feature 'extra' has rows of shape \\(\\) in one batch and no array in another"),
    (lambda r: {"n": np.zeros(len(r)), "m": np.zeros(len(r) + 1)},
     "feature 'm' parses to an array of shape \\(5,\\) in a batch where 'n' has 4 rows"),
    (lambda r: {"n": np.array(len(r))}, "feature 'n' parses to an array of shape \\(\\) in a batch where each record"),
    (lambda r: {"n": np.zeros((len(r), 2 if len(r) == 4 else 3))},
     "feature 'n' has rows of shape \\(2,\\) in one batch and rows of shape \\(3,\\) in another"),
])
def test_parse_outputs_that_do_not_make_one_row_per_record_are_refused(backend, path, tmp_path, parse, match):
    """A feature missing from some batches, or with more rows than the batch has records,
    was exported misaligned without a word: to_numpy gave 'extra' 8 rows beside 10 of 'n',
    to_npy filled the missing rows with zeros. A 0-d value failed with a bare TypeError
    ('len() of unsized object') or ValueError, and rows changing shape with numpy's
    concatenate error."""
    for _, export in _exports(tmp_path):
        with pytest.raises(tfl.FeatureSpecError, match=match) as info:
            export(path, parse=parse, batch_size=4)
        assert "parse step" in info.value.hint or "every batch" in info.value.hint
    assert not os.path.exists(tmp_path / "npy" / "n.npy")
    assert backend.name == tfl.implementation


def test_to_npy_refuses_a_dtype_that_would_be_truncated(backend, path, tmp_path):
    """A parse function giving int64 in the first batch and floats in a later one had the
    floats cast into the int64 file: 2.7 was written as 2."""
    def parse(records):
        return {"v": np.zeros(len(records), np.int64) if len(records) == 4 else np.full(len(records), 2.7)}

    with pytest.raises(tfl.FeatureSpecError, match="feature 'v' parses to float64 in one batch and int64"):
        tfl.to_npy(path, parse=parse, out_dir=tmp_path / "npy", batch_size=4, progress=False)
    widened = tfl.to_npy(path, parse=lambda r: {"v": np.ones(len(r), np.int64 if len(r) == 4 else np.int32)},
                         out_dir=tmp_path / "npy", batch_size=4, progress=False)  # a safe cast still goes
    assert widened["v"].dtype == np.int64 and widened["v"].tolist() == [1] * 10
    assert backend.name == tfl.implementation


def test_to_npy_reserves_the_disk_space_of_its_files_before_filling_them(backend, tmp_path, monkeypatch):
    """The .npy files were sparse, filled through memory maps: on a disk that ran out of room
    the first page that could not be written back killed the process with SIGBUS (and left
    its temporary files behind). Their space is now reserved when they are created, and a
    full disk is an OSError naming the .npy file, with nothing left over."""
    path = str(tmp_path / "big.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write_many(tfl.encode_example({"x": np.full(1024, i, np.float32)}) for i in range(256))
    spec = {"x": tfl.FixedLenFeature([1024], np.float32)}
    reserved, fallocate = [], os.posix_fallocate

    def spy(fd, offset, length):  # records what is reserved, before any row is written
        reserved.append((offset, length, os.fstat(fd).st_size, os.pread(fd, 4096 * 16, 4096)))
        fallocate(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", spy)
    out = tfl.to_npy(path, spec, tmp_path / "npy", batch_size=16, progress=False)
    size = os.path.getsize(tmp_path / "npy" / "x.npy")
    assert [r[:3] for r in reserved] == [(0, size, size)] and not any(reserved[0][3])
    assert out["x"][:, 0].tolist() == list(range(256))
    before = (tmp_path / "npy" / "x.npy").read_bytes()

    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match="No space left on device") as info:
        tfl.to_npy(path, spec, tmp_path / "npy", batch_size=16, progress=False)
    assert info.value.filename == os.path.join(tmp_path / "npy", "x.npy")
    assert os.listdir(tmp_path / "npy") == ["x.npy"] and (tmp_path / "npy" / "x.npy").read_bytes() == before
    assert backend.name == tfl.implementation


def test_to_npy_takes_an_iterator_of_paths_and_matches_a_pattern_once(backend, path, tmp_path, monkeypatch):
    """to_npy read its files twice, resolving them each time: an iterator or generator of
    paths was used up by the counting pass, and the conversion failed with 'no TFRecord
    files found for <generator object ...>' where to_numpy took it; a file that a pattern
    matched in the second pass only failed it with 'the files gained records'."""
    from tfrecord_lite import export

    out = tfl.to_npy((p for p in [path, path]), SPEC, tmp_path / "npy", batch_size=4, progress=False)
    assert out["id"].tolist() == list(range(10)) * 2
    assert tfl.to_npy(iter([path]), SPEC, tmp_path / "npy", progress=False)["id"].tolist() == list(range(10))

    made = []

    class Dataset(tfl.TFRecordDataset):  # a file appears between the two passes
        def __init__(self, files, *args, **kwargs):
            super().__init__(files, *args, **kwargs)
            if not made:
                with tfl.TFRecordWriter(os.path.join(os.path.dirname(path), "b.tfrecord")) as w:
                    w.write_many(tfl.encode_example({"x": [0.0] * 3, "id": -1}) for _ in range(3))
                made.append(w.path)

    monkeypatch.setattr(export, "TFRecordDataset", Dataset)
    pattern = os.path.join(os.path.dirname(path), "*.tfrecord")
    assert tfl.to_npy(pattern, SPEC, tmp_path / "npy", progress=False)["id"].tolist() == list(range(10))
    assert backend.name == tfl.implementation


def test_errors_of_outputs_that_make_no_arrays_say_what_to_change(backend, path, tmp_path):
    """A sequence example's parse step (a tuple) failed as 'expected a dict of arrays from the
    parse step, got tuple', bytes_output='column' as 'need fixed-length features
    (FixedLenFeature)' for a FixedLenFeature, and output='arrow' as 'got RecordBatch' (after
    to_npy had read every file to count the records), none saying what to change."""
    def sequence(records):
        return tfl.parse_sequence_example(records, {"id": SPEC["id"]}, {})

    bytes_spec = {"s": tfl.FixedLenFeature([], bytes, default_value=b"")}
    for name, export in _exports(tmp_path):
        with pytest.raises(tfl.FeatureSpecError, match="got tuple") as info:
            export(path, parse=sequence)
        assert "(context, feature_lists, lengths) into one dict" in info.value.hint
        with pytest.raises(tfl.FeatureSpecError, match="'s' parses to BytesColumn") as info:
            export(path, bytes_spec, bytes_output="column")
        assert "leave bytes_output='column' out" in info.value.hint
        with pytest.raises(tfl.InvalidArgumentError, match=f"{name} makes NumPy arrays, not output='arrow'"):
            export(path, SPEC, output="arrow")
    assert tfl.to_numpy(path, bytes_spec)["s"].tolist() == [b""] * 10
    assert backend.name == tfl.implementation


_PEAK_SCRIPT = """
import sys

import numpy as np
import tfrecord_lite as tfl

def status(field):
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith(field))

base = status('VmRSS')
out = tfl.to_numpy(sys.argv[1], {'x': tfl.RawTensorFeature((32, 256), np.float32)}, batch_size=64)
peak = status('VmHWM')
assert out['x'].shape == (4000, 32, 256) and float(out['x'][-1, 0, 0]) == 3750.0
print(peak - base)
"""


def test_to_numpy_holds_about_one_copy_of_the_data(backend, tmp_path):
    """to_numpy kept every batch until np.concatenate had copied them all: 125 MiB of output
    peaked at 266 MiB, twice the data. Each batch is now let go once copied (176 MiB)."""
    import subprocess
    import sys

    path = str(tmp_path / "a.tfrecord")
    with tfl.TFRecordWriter(path) as w:  # 4,000 rows of 32 KiB
        for i in range(0, 4000, 250):
            w.write_many(tfl.encode_examples({"x": np.full((250, 32, 256), i, np.float32)}, raw=("x",)))
    env = dict(os.environ, TFRECORD_LITE_PURE_PYTHON="1" if backend.name == "python" else "0")
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, path], env=env, capture_output=True, text=True,
                         check=True)
    assert int(out.stdout) < 215, f"to_numpy of 125 MiB peaked at {out.stdout.strip()} MiB"
