"""Batches crossing from DataLoader workers: each crosses as one buffer plus a layout, and the
main process gets exactly what loading in the main process gives (types, dtypes, shapes,
values) for every feature kind, bytes small and large, and raw records."""

import os
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfrecord_lite as tfl
from tfrecord_lite.bytes_column import BytesColumn
from tfrecord_lite.example import RaggedValue, SparseTensorValue

SPEC = {
    "id": tfl.FixedLenFeature([], np.int64),
    "vec": tfl.FixedLenFeature([3], np.float32),
    "name": tfl.FixedLenFeature([], bytes),
    "blob": tfl.FixedLenFeature([], bytes),  # 2 KiB values: they travel in the buffer
    "tags": tfl.VarLenFeature(np.int64),
    "words": tfl.VarLenFeature(bytes),
    "ragged": tfl.RaggedFeature(np.float32),
    "sparse": tfl.SparseFeature("sparse_index", "sparse_value", np.float32, 10),
}


def write_examples(directory, files=2, per_file=37):
    paths = []
    for f in range(files):
        path = os.path.join(str(directory), f"ex-{f}.tfrecord")
        with tfl.TFRecordWriter(path) as w:
            for j in range(per_file):
                i = 1000 * f + j
                w.write(tfl.encode_example({
                    "id": i, "vec": [i, i / 2, -i], "name": f"n{i}", "blob": bytes([i % 251]) * 2048,
                    "tags": list(range(i % 4)), "words": [b"w%d" % k for k in range(i % 3)],
                    "ragged": [float(k) for k in range(i % 5)],
                    "sparse_index": [i % 10], "sparse_value": [float(i)],
                }))
        paths.append(path)
    return paths


def assert_same(got, want, where="batch"):
    """Equal values, types, dtypes and shapes, all the way down."""
    import torch

    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), where
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        if want.dtype == object:
            assert [type(v) for v in got.flat] == [type(v) for v in want.flat], where
            assert got.tolist() == want.tolist(), where
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(want, (RaggedValue, BytesColumn)):
        for slot in type(want).__slots__:
            assert_same(getattr(got, slot), getattr(want, slot), f"{where}.{slot}")
    else:
        assert got == want, where


def crossing(item):
    """A collate_fn (runs in the worker): pickles the item the way the worker's result queue
    does and counts the calls of each function the unpickling makes (a numpy array or a
    torch storage each costs one), beside the item itself."""
    import collections
    import io

    data = ForkingPickler.dumps(item)
    calls = collections.Counter()

    class Recorder(pickle.Unpickler):
        def find_class(self, module, name):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found

            def counted(*args, **kwargs):
                calls[f"{module}.{name}"] += 1
                return found(*args, **kwargs)
            return counted

    Recorder(io.BytesIO(data)).load()
    return {"type": type(item).__name__, "calls": dict(calls), "item": item}


def assert_one_buffer(calls, shared):
    """The calls of one packed batch: one _unpack, and for a batch sent through the pipe the
    one numpy array holding its buffer; nothing else from numpy or torch."""
    buffer = {} if shared else {k: 1 for k in calls if k.startswith("numpy") and k.endswith("._reconstruct")}
    assert len(buffer) == (0 if shared else 1), calls
    assert calls == {"tfrecord_lite.torch._unpack": 1, **buffer}


def loader(ds, workers, method=None, **options):
    import torch

    ctx = method if workers else None
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context=ctx,
                                       **options)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("as_tensors", [True, False])
def test_worker_batches_equal_main_process_batches(tmp_path, method, as_tensors):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=16, as_tensors=as_tensors, seed=3)
    want = list(loader(ds, 0))
    got = list(loader(ds, 1, method, pin_memory=True))  # one worker reads the whole shard
    assert len(got) == len(want) == 5
    for g, w in zip(got, want):
        assert type(w["tags"]) is SparseTensorValue and type(w["ragged"]) is RaggedValue
        assert_same(g, w)


@pytest.mark.parametrize("batch_size", [16, None])
def test_raw_records_cross_unchanged(tmp_path, batch_size):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    ds = TFRecordIterableDataset(paths, batch_size=batch_size, seed=3)
    assert_same(list(loader(ds, 1, "fork")), list(loader(ds, 0)))


def test_bytes_output_column_crosses(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=16, as_tensors=True, bytes_output="column", seed=3)
    want = list(loader(ds, 0))
    assert type(want[0]["blob"]) is BytesColumn
    assert_same(list(loader(ds, 1, "fork")), want)


@pytest.mark.parametrize("per_file", [37, 600])  # batches under and over 1 MiB: pipe, shared memory
def test_a_worker_batch_crosses_as_one_buffer(tmp_path, per_file):
    import torch

    from tfrecord_lite import torch as tlt

    paths = write_examples(tmp_path, per_file=per_file)
    ds = tlt.TFRecordIterableDataset(paths, SPEC, batch_size=per_file, as_tensors=True, seed=3)
    crossed = list(loader(ds, 2, "fork", collate_fn=crossing))
    want = list(ds)  # in the main process, as the dataset yields them (no collate_fn)
    assert len(crossed) == len(want) == 2
    big = per_file * 2048 >= tlt._SHM_MIN
    for c in crossed:
        assert c["type"] == "_PackedDict"
        # One call rebuilds the batch; torch rebuilds no tensor or storage of its own.
        assert_one_buffer(c["calls"], shared=big)
        assert isinstance(c["item"]["id"], torch.Tensor)
    # The workers read shards (file 0, file 1); in order they give the in-process batches.
    assert_same(sorted([c["item"] for c in crossed], key=lambda b: int(b["id"][0])), want)
    assert ds_buffer_is_shared(crossed[0]["item"]) == big


def ds_buffer_is_shared(batch) -> bool:
    """Whether the batch's tensors view memory the OS shares between processes (a
    /dev/shm mapping) rather than private memory the pipe's bytes were read into."""
    start = batch["id"].data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= start < hi:
                return "/dev/shm" in line or "torch_" in line
    raise AssertionError("the tensor's memory is not mapped")


def test_in_process_items_are_not_packed(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    ds = TFRecordIterableDataset(write_examples(tmp_path), SPEC, batch_size=16, seed=3)
    assert all(type(b) is dict for b in ds)


# -- the packing itself, on any structure ---------------------------------------------------------

_dtypes = st.sampled_from(["<i8", "<i4", "<f4", "<f8", "|u1", "|b1", "<u2"])
_arrays = st.builds(lambda dt, shape, data: data.draw(hnp.arrays(dt, shape)), _dtypes,
                    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5), st.data())
_small_bytes = st.lists(st.binary(max_size=12), min_size=0, max_size=6)
_large_bytes = st.lists(st.binary(min_size=1100, max_size=1300), min_size=2, max_size=3)


def _object_array(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


_leaves = st.one_of(
    _arrays,
    _arrays.map(lambda a: a.T),  # not contiguous
    _small_bytes.map(_object_array),
    _large_bytes.map(_object_array),
    _large_bytes,
    _small_bytes,
    st.integers(),
    st.text(max_size=5),
    st.builds(lambda v: BytesColumn.from_list(v), _large_bytes),
)
_structures = st.recursive(_leaves, lambda inner: st.one_of(
    st.dictionaries(st.text(max_size=4), inner, max_size=4),
    st.lists(inner, max_size=3).map(tuple),
    st.lists(inner, max_size=3),
    st.builds(lambda a, b: RaggedValue(a, b), inner, inner),
    st.builds(lambda a, b, c: SparseTensorValue(a, b, c), inner, inner, inner),
), max_leaves=8)


@pytest.mark.parametrize("other", [7, "x", None])
@pytest.mark.parametrize("size", [4, 1100])
def test_only_bytes_values_go_into_the_buffer(other, size):
    """A list or object array with anything but bytes in it, anywhere, crosses as it is."""
    from tfrecord_lite import torch as tlt

    values = [bytes([i]) * size for i in range(40)]
    values.insert(31, other)
    for leaf in (values, _object_array(values)):
        batch = {"v": leaf}
        assert_same(pickle.loads(ForkingPickler.dumps(tlt._packed(batch))), batch)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=4), _structures, max_size=5), st.booleans())
def test_packing_round_trips_any_structure(batch, as_tensors):
    from tfrecord_lite import torch as tlt

    if as_tensors:
        batch = tlt._to_tensors(batch)
    packed = tlt._packed(batch)
    assert type(packed) is tlt._PackedDict
    assert_same(pickle.loads(ForkingPickler.dumps(packed)), batch)


@given(st.one_of(_small_bytes, _large_bytes))
def test_packing_round_trips_raw_records(records):
    from tfrecord_lite import torch as tlt

    packed = tlt._packed(records)
    assert type(packed) is tlt._PackedList
    assert_same(pickle.loads(ForkingPickler.dumps(packed)), records)


def test_nested_arrays_are_packed_and_one_met_twice_stays_one():
    import torch

    from tfrecord_lite import torch as tlt

    a = np.arange(10)
    batch = {"x": a, "y": a, "z": (a, a[2:]), "w": [torch.ones(3), np.zeros((2, 2)), [a[::2]]]}
    assert_one_buffer(crossing(tlt._packed(batch))["calls"], shared=False)
    got = pickle.loads(ForkingPickler.dumps(tlt._packed(batch)))
    assert_same(got, batch)
    assert got["x"] is got["y"] is got["z"][0]
