"""Batches crossing from DataLoader workers: each crosses as one buffer plus a layout, and the
main process gets exactly what loading in the main process gives (types, dtypes, shapes,
values) for every feature kind, bytes small and large, and raw records. Buffers of 64 KiB or
more live in segments of shared memory the worker reuses once the main process drops a batch:
never earlier, whatever the main process holds, and freed when the worker ends."""

import os
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfrecord_lite as tfl
from tfrecord_lite import _crossing
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
        assert got.dtype == want.dtype and got.shape == want.shape, where
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=where)
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
    elif isinstance(want, BytesColumn):  # the same values: a slice crosses without the rest of its buffer
        assert type(got.values) is np.ndarray and got.offsets.dtype == np.int64, where
        assert got.shape == want.shape and got.equals(want), where
    elif isinstance(want, RaggedValue):
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
    """The calls of one packed batch: one _unpack_pooled for a batch in a segment; one _unpack
    and the one numpy array holding its buffer for a batch sent through the pipe; nothing else
    from numpy or torch."""
    if shared:
        assert calls == {"tfrecord_lite._crossing._unpack_pooled": 1}
        return
    buffer = {k: 1 for k in calls if k.startswith("numpy") and k.endswith("._reconstruct")}
    assert len(buffer) == 1, calls
    assert calls == {"tfrecord_lite._crossing._unpack": 1, **buffer}


@pytest.fixture(autouse=True)
def own_pool(monkeypatch):
    """This process packs as a worker with segments of its own, let go of afterwards."""
    monkeypatch.setattr(_crossing, "_pool", None)
    yield
    if _crossing._pool is not None:
        _crossing._pool.close()


def loader(ds, workers, method=None, **options):
    import torch

    ctx = method if workers else None
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context=ctx,
                                       **options)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("as_tensors", [True, False])
@pytest.mark.parametrize("batch_size", [16, 40])  # through the pipe, in a segment
def test_worker_batches_equal_main_process_batches(tmp_path, method, as_tensors, batch_size):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=batch_size, as_tensors=as_tensors, seed=3)
    want = list(loader(ds, 0))
    got = list(loader(ds, 1, method, pin_memory=True))  # one worker reads the whole shard
    assert len(got) == len(want) == -(-74 // batch_size)
    for g, w in zip(got, want):
        assert type(w["tags"]) is SparseTensorValue and type(w["ragged"]) is RaggedValue
        assert_same(g, w)


@pytest.mark.parametrize("batch_size", [16, None])
def test_raw_records_cross_unchanged(tmp_path, batch_size):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    ds = TFRecordIterableDataset(paths, batch_size=batch_size, seed=3)
    want = list(loader(ds, 0))
    assert_same(list(loader(ds, 1, "fork")), want)
    records = [r for p in paths for r in tfl.TFRecordReader(p)]
    if batch_size is None:
        assert sorted(want) == sorted(records)
    else:
        # A batch is an object array of bytes, which DataLoader hands on as it is (a sequence
        # it would remake record by record), and crosses as one buffer.
        assert all(type(b) is np.ndarray and b.dtype == object and b.shape == (len(b),) for b in want)
        assert sorted(r for b in want for r in b.tolist()) == sorted(records)
        assert len(want) == -(-len(records) // batch_size)


@pytest.mark.parametrize("spec", [SPEC, None])
def test_mapped_files_cross_as_read_ones(tmp_path, spec):
    # Workers map the files themselves (after the fork); a batch over a mapping crosses as
    # one over a read buffer does.
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    want = list(loader(TFRecordIterableDataset(paths, spec, batch_size=16, seed=3), 0))
    got = list(loader(TFRecordIterableDataset(paths, spec, batch_size=16, seed=3, memory_map=True), 2, "fork"))
    if spec is None:
        assert sorted(r for b in got for r in b.tolist()) == sorted(r for b in want for r in b.tolist())
    else:
        assert sorted(int(i) for b in got for i in b["id"]) == sorted(int(i) for b in want for i in b["id"])
        by_id = {int(i): (b, k) for b in want for k, i in enumerate(b["id"])}
        for b in got:
            for k, i in enumerate(b["id"]):
                w, j = by_id[int(i)]
                assert b["blob"][k] == w["blob"][j] and b["name"][k] == w["name"][j]


def test_bytes_output_column_crosses(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=16, as_tensors=True, bytes_output="column", seed=3)
    want = list(loader(ds, 0))
    assert type(want[0]["blob"]) is BytesColumn
    assert_same(list(loader(ds, 1, "fork")), want)


@pytest.mark.parametrize("per_file", [20, 600])  # batches under and over 64 KiB: pipe, segment
def test_a_worker_batch_crosses_as_one_buffer(tmp_path, per_file):
    import torch

    from tfrecord_lite import torch as tlt

    paths = write_examples(tmp_path, per_file=per_file)
    ds = tlt.TFRecordIterableDataset(paths, SPEC, batch_size=per_file, as_tensors=True, seed=3)
    crossed = list(loader(ds, 2, "fork", collate_fn=crossing))
    want = list(ds)  # in the main process, as the dataset yields them (no collate_fn)
    assert len(crossed) == len(want) == 2
    big = per_file * 2048 >= _crossing._POOL_MIN
    for c in crossed:
        assert c["type"] == "_PackedDict"
        # One call rebuilds the batch; torch rebuilds no tensor or storage of its own.
        assert_one_buffer(c["calls"], shared=big)
        assert isinstance(c["item"]["id"], torch.Tensor)
    # The workers read shards (file 0, file 1); in order they give the in-process batches.
    assert_same(sorted([c["item"] for c in crossed], key=lambda b: int(b["id"][0])), want)
    assert in_a_segment(crossed[0]["item"]["id"].data_ptr()) == big


@pytest.mark.parametrize("per_file", [20, 600])
def test_a_worker_batch_of_raw_records_crosses_as_one_buffer(tmp_path, per_file):
    from tfrecord_lite import torch as tlt

    paths = write_examples(tmp_path, per_file=per_file)
    ds = tlt.TFRecordIterableDataset(paths, batch_size=per_file, seed=3)
    crossed = list(loader(ds, 2, "fork", collate_fn=crossing))
    want = [[r for r in tfl.TFRecordReader(p)] for p in paths]
    assert len(crossed) == len(want) == 2
    for c in crossed:
        assert c["type"] == "_PackedArray"
        item = c["item"]
        assert type(item) is np.ndarray and item.dtype == object
        # Values and offsets in one buffer: through the pipe, or a segment from 64 KiB.
        assert_one_buffer(c["calls"], shared=sum(map(len, item.tolist())) + 8 * (len(item) + 1) >= _crossing._POOL_MIN)
    assert sorted(c["item"].tolist() for c in crossed) == sorted(want)


def mapping_of(address: int) -> str:
    """The line of /proc/self/maps that holds address."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return line
    raise AssertionError("the address is not mapped")


SEGMENT = "memfd:tfrecord_lite-batch"  # how /proc/self/maps names a worker's segment


def in_a_segment(address: int) -> bool:
    """Whether address lies in a worker's segment (a memfd) rather than in private memory
    the pipe's bytes were read into."""
    return SEGMENT in mapping_of(address)


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
    values = [bytes([i]) * size for i in range(40)]
    values.insert(31, other)
    for leaf in (values, _object_array(values)):
        batch = {"v": leaf}
        assert_same(pickle.loads(ForkingPickler.dumps(_crossing._packed(batch))), batch)


def test_a_column_slice_crosses_with_only_its_own_bytes():
    # A dataset's batch is a slice of its parse task's buffer (several batches): it crossed
    # with the whole buffer.
    col = BytesColumn.from_list([bytes([i]) * 4096 for i in range(64)])
    part = col[40:44].reshape(2, 2)
    packer = _crossing._Packer()
    packer.node({"c": part})
    assert packer.size < 5 * 4096
    got = pickle.loads(ForkingPickler.dumps(_crossing._packed({"c": part})))["c"]
    assert got.shape == (2, 2) and got.to_list() == part.to_list()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=4), _structures, max_size=5), st.booleans(), st.booleans())
def test_packing_round_trips_any_structure(batch, as_tensors, big):
    from tfrecord_lite import torch as tlt

    if big:  # in a segment, not through the pipe
        batch = {**batch, "big": np.arange(_crossing._POOL_MIN // 8, dtype=np.int64)}
    if as_tensors:
        batch = tlt._to_tensors(batch)
    packed = _crossing._packed(batch)
    assert type(packed) is _crossing._PackedDict
    assert_same(pickle.loads(ForkingPickler.dumps(packed)), batch)


@given(st.one_of(_small_bytes, _large_bytes))
def test_packing_round_trips_raw_records(records):
    packed = _crossing._packed(records)
    assert type(packed) is _crossing._PackedList
    assert_same(pickle.loads(ForkingPickler.dumps(packed)), records)


def test_nested_arrays_are_packed_and_one_met_twice_stays_one():
    import torch

    a = np.arange(10)
    batch = {"x": a, "y": a, "z": (a, a[2:]), "w": [torch.ones(3), np.zeros((2, 2)), [a[::2]]]}
    assert_one_buffer(crossing(_crossing._packed(batch))["calls"], shared=False)
    got = pickle.loads(ForkingPickler.dumps(_crossing._packed(batch)))
    assert_same(got, batch)
    assert got["x"] is got["y"] is got["z"][0]


# -- segments: reused once the main process drops a batch, never earlier, freed at the end ----------

def big_batch(i: int) -> dict:
    return {"x": np.full(_crossing._POOL_MIN // 8, i, np.int64), "i": i}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40))
def test_a_segment_is_reused_only_once_its_batch_is_dropped(holds):
    """Batch i is held for holds[i] more batches (12: to the end), packed and unpacked in one
    process as a worker and the main process do: every batch held keeps its values while
    later ones are written, and the worker makes a new segment only when all are held."""
    if _crossing._pool is not None:  # a fresh worker for each example
        _crossing._pool.close()
        _crossing._pool = None
    held, most = {}, 0
    for i, hold in enumerate(holds):
        held = {j: b for j, b in held.items() if holds[j] == 12 or j + holds[j] >= i}
        held[i] = pickle.loads(ForkingPickler.dumps(_crossing._packed(big_batch(i))))
        for j in held:
            assert held[j]["i"] == j and (held[j]["x"] == j).all(), (i, j)
        in_segments = sum(in_a_segment(b["x"].ctypes.data) for b in held.values())
        # A batch goes elsewhere only when every segment is held.
        assert in_a_segment(held[i]["x"].ctypes.data) or in_segments == _crossing._SEGMENTS
        most = max(most, in_segments)
    segments = _crossing._pool.segments
    assert len(segments) == most  # a new segment only when all the others were held
    assert sum(int(s.words[0]) for s in segments) == sum(in_a_segment(b["x"].ctypes.data) for b in held.values())
    held.clear()
    assert not any(s.words[0] for s in segments)


def test_a_forked_child_does_not_hand_back_the_parents_batch():
    import gc

    got = pickle.loads(ForkingPickler.dumps(_crossing._packed(big_batch(1))))
    segment = _crossing._pool.segments[0]
    pid = os.fork()
    if pid == 0:  # the child drops its copy of the batch
        del got
        gc.collect()
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert segment.words[0] == 1 and (got["x"] == 1).all()
    del got
    assert segment.words[0] == 0


def segment_mappings() -> list[tuple[str, int]]:
    """(address range, resident kB) of each segment this process maps."""
    out, current = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            if SEGMENT in line:
                current = line.split()[0]
            elif current and line.startswith("Rss:"):
                out.append((current, int(line.split()[1])))
                current = None
    return out


def test_workers_reuse_segments_and_free_them_as_they_end(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path, files=1, per_file=600)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=40, as_tensors=True, seed=3)
    want = [b["id"] for b in loader(ds, 0)]
    for epoch in range(3):  # a new worker each epoch
        places = []
        for i, b in enumerate(loader(ds, 1, "fork")):
            assert_same(b["id"], want[i])
            places.append(b["id"].data_ptr())
            assert in_a_segment(places[-1])
        del b
        # 15 batches in a handful of segments, each batch dropped before the next but one.
        assert len(places) == 15 and len(set(places)) <= 5
        # The worker has ended: of its segments only header pages are left, and only this
        # epoch's are mapped.
        mapped = segment_mappings()
        assert len(mapped) <= 5 and all(kb <= 4 for _, kb in mapped), mapped


def test_batches_held_past_every_segment_cross_intact(tmp_path):
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path, files=1, per_file=600)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=40, as_tensors=True, seed=3)
    got = list(loader(ds, 1, "fork"))  # all 15 held: the first 8 in segments, the rest not
    assert_same(got, list(loader(ds, 0)))
    shared = [in_a_segment(b["id"].data_ptr()) for b in got]
    assert shared == [True] * _crossing._SEGMENTS + [False] * (15 - _crossing._SEGMENTS)


def test_segments_of_a_killed_worker_are_unmapped_as_its_batch_goes(tmp_path):
    """A worker ended without its exit handlers (torch ends a worker slow to stop with
    SIGTERM) leaves its segments to the main process, which drops them with the batch."""
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path, files=1, per_file=600)
    ds = TFRecordIterableDataset(paths, SPEC, batch_size=40, as_tensors=True, seed=3)
    it = iter(loader(ds, 1, "fork"))
    batches = [next(it) for _ in range(3)]  # the worker has made a few segments by now
    worker = it._workers[0]
    ranges = {mapping_of(b["id"].data_ptr()).split()[0] for b in batches}
    worker.terminate()  # as torch does: its handler exits at once, skipping exit handlers
    worker.join()
    assert worker.exitcode == 0 and {r for r, _ in segment_mappings()} >= ranges
    del batches
    assert not {r for r, _ in segment_mappings()} & ranges
    assert not any(m.pid == worker.pid for m in _crossing._mapped.values())
    del it


_HELD_TO_THE_END = """
import sys
import torch
from torch.utils.data import DataLoader
from tfrecord_lite.torch import TFRecordIterableDataset
from tests.test_torch_workers import SPEC, in_a_segment

ds = TFRecordIterableDataset(sys.argv[1:], SPEC, batch_size=40, as_tensors=True, seed=3)
loader = DataLoader(ds, batch_size=None, num_workers=1, persistent_workers=True, multiprocessing_context="fork")
for batch in loader:
    pass
assert in_a_segment(batch["id"].data_ptr())
print("held")
"""


def test_batches_held_until_the_interpreter_ends_are_released_cleanly(tmp_path):
    """A batch still held as the interpreter clears its modules hands its segment back
    without an "Exception ignored" on stderr."""
    import subprocess
    import sys

    paths = write_examples(tmp_path, files=1, per_file=600)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _HELD_TO_THE_END, *paths], capture_output=True, text=True,
                          cwd=root, timeout=120, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0 and done.stdout.strip() == "held", done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def lengths_of_records(batch):
    """A collate_fn (in the worker) that decodes a raw batch the way a user's own would."""
    return np.array([len(r) for r in batch.tolist()], np.int64), batch[:1]


def test_a_collate_fn_in_a_worker_sees_a_raw_batch_as_an_array(tmp_path):
    """In a worker a batch of raw records reached collate_fn as the holder it crosses in
    (no tolist(), len() or indexing): what worked without workers raised AttributeError."""
    from tfrecord_lite.torch import TFRecordIterableDataset

    paths = write_examples(tmp_path, per_file=5)
    ds = TFRecordIterableDataset(paths, batch_size=4, seed=3)
    want = list(loader(ds, 0, collate_fn=lengths_of_records))
    got = list(loader(ds, 2, "fork", collate_fn=lengths_of_records))
    assert len(want) == 3 and len(got) == 4  # each worker's 5 records: a batch of 4 and one of 1
    assert sorted(n for g in got for n in g[0].tolist()) == sorted(n for w in want for n in w[0].tolist())
    for lengths, first in got:  # a slice of the batch crosses as a plain object array too
        assert type(first) is np.ndarray and first.dtype == object and len(first[0]) == lengths[0]
