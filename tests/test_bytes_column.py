"""bytes_output="column": bytes values as one uint8 buffer plus int64 offsets (BytesColumn),
equal to the default object-array output for every spec type, on both backends."""

from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import BytesColumn, TFRecordDataset, TFRecordWriter
from tfrecord_lite.errors import FeatureSpecError

values_st = st.binary(max_size=12)


@st.composite
def spec_and_records(draw):
    """A random spec of bytes features (every spec type parse_example takes) and records
    that fit it."""
    spec, makers = {}, []
    for i in range(draw(st.integers(1, 4))):
        name = f"f{i}"
        what = draw(st.sampled_from(["fixed", "varlen", "ragged", "sequence", "sparse"]))
        if what == "fixed":
            shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))  # size 0: an empty Feature, "missing"
            default = draw(st.none() | st.lists(values_st, min_size=prod(shape), max_size=prod(shape)))
            spec[name] = tfl.FixedLenFeature(shape, bytes, default_value=default)
            makers.append((name, "fixed", prod(shape), default is not None))
        elif what in ("varlen", "ragged"):
            spec[name] = tfl.VarLenFeature(bytes) if what == "varlen" else tfl.RaggedFeature(bytes)
            makers.append((name, "list", 1, True))
        elif what == "sequence":
            k = draw(st.integers(1, 2))
            default = draw(st.none() | values_st)
            spec[name] = tfl.FixedLenSequenceFeature([k], bytes, allow_missing=True, default_value=default)
            makers.append((name, "list", k, True))
        else:
            spec[name] = tfl.SparseFeature(f"{name}_i", f"{name}_v", bytes, 6, already_sorted=draw(st.booleans()))
            makers.append((name, "sparse", 1, True))
    records = []
    for _ in range(draw(st.integers(0, 6))):
        mapping = {}
        for name, what, size, optional in makers:
            if optional and draw(st.booleans()):
                continue
            if what == "fixed":
                mapping[name] = draw(st.lists(values_st, min_size=size, max_size=size))
            elif what == "list":
                mapping[name] = draw(st.lists(values_st, max_size=3).map(lambda v, k=size: v * k))
            else:
                n = draw(st.integers(0, 3))
                mapping[f"{name}_i"] = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), np.int64)
                mapping[f"{name}_v"] = draw(st.lists(values_st, min_size=n, max_size=n))
        records.append(tfl.encode_example(mapping))
    return spec, records


def _plain(value, column):
    """Outputs as lists, checking that bytes values are BytesColumns in column output and
    object arrays otherwise."""
    if isinstance(value, (BytesColumn, np.ndarray)):
        assert isinstance(value, BytesColumn) == (column and value.dtype == object)
        return ("values", value.tolist(), value.shape)
    if isinstance(value, tfl.SparseTensorValue):
        return ("sparse", value.indices.tolist(), _plain(value.values, column), value.dense_shape.tolist())
    if isinstance(value, tfl.RaggedValue):
        return ("ragged", _plain(value.values, column), value.row_splits.tolist())
    return value


def _same(got, expected):
    """got (column output) holds what expected (object output) holds."""
    assert _plain(got, True) == _plain(expected, False)


@settings(max_examples=150)
@given(case=spec_and_records())
def test_column_output_equals_object_output(backend, case):
    spec, records = case
    assert backend.name == tfl.implementation
    expected = tfl.parse_example(records, spec)
    got = tfl.parse_example(records, spec, bytes_output="column")
    assert got.keys() == expected.keys()
    for name in spec:
        _same(got[name], expected[name])
        if isinstance(spec[name], tfl.FixedLenFeature):
            assert isinstance(got[name], BytesColumn)
    for record in records:
        one = tfl.parse_single_example(record, spec, bytes_output="column")
        ref = tfl.parse_single_example(record, spec)
        for name in spec:
            if isinstance(ref[name], bytes):
                assert one[name] == ref[name]
            else:
                _same(one[name], ref[name])


@settings(max_examples=60)
@given(steps=st.lists(st.none() | st.lists(st.lists(values_st, min_size=2, max_size=2), max_size=3), max_size=5),
       context=st.lists(values_st, min_size=5, max_size=5))
def test_sequence_column_output_equals_object_output(backend, steps, context):
    records = [tfl.encode_sequence_example({"c": [context[i]]}, {} if s is None else {"s": s, "v": s})
               for i, s in enumerate(steps)]
    ctx_spec = {"c": tfl.FixedLenFeature([], bytes)}
    seq_spec = {"s": tfl.FixedLenSequenceFeature([2], bytes, allow_missing=True),
                "v": tfl.VarLenFeature(bytes), "r": tfl.RaggedFeature(bytes, value_key="v")}
    expected = tfl.parse_sequence_example(records, ctx_spec, seq_spec)
    got = tfl.parse_sequence_example(records, ctx_spec, seq_spec, bytes_output="column")
    _same(got[0]["c"], expected[0]["c"])
    for name in seq_spec:
        _same(got[1][name], expected[1][name])
    assert {k: v.tolist() for k, v in got[2].items()} == {k: v.tolist() for k, v in expected[2].items()}
    if records:
        one = tfl.parse_single_sequence_example(records[0], ctx_spec, seq_spec, bytes_output="column")
        assert one[0]["c"] == context[0]


def test_core_gives_one_buffer_and_offsets(backend):
    records = [tfl.encode_example({"b": [b"ab", b"", b"cde"]}), tfl.encode_example({}),
               tfl.encode_example({"b": [b"x" * 70000]})]
    _, columns = backend.example.decode_examples(records, ["b"], None, True)
    values, offsets = columns[0][5]
    assert values.dtype == np.uint8 and offsets.dtype == np.int64
    assert offsets.tolist() == [0, 2, 2, 5, 70005]
    assert values.tobytes() == b"abcde" + b"x" * 70000


def test_bytes_column_behaves_like_an_object_array():
    col = BytesColumn.from_list([b"a", b"bc", b"", b"def", b"g", b"hi"]).reshape(3, 2)
    arr = col.to_numpy()
    assert col.shape == (3, 2) and len(col) == 3 and col.ndim == 2 and col.size == 6 and col.nbytes == 9
    assert col[1].to_list() == [b"", b"def"] and col[1][1] == b"def" and col[-1, 0] == b"g"
    assert col[1:].to_list() == arr[1:].tolist() and col[::2].to_list() == arr[::2].tolist()
    assert col[np.array([2, 0])].to_list() == arr[[2, 0]].tolist()
    assert col[np.array([True, False, True])].to_list() == arr[[True, False, True]].tolist()
    assert [c.to_list() for c in col] == arr.tolist() and col.tolist() == arr.tolist()
    assert np.asarray(col).tolist() == arr.tolist() and np.asarray(col).dtype == object
    assert col.lengths().tolist() == [[1, 2], [0, 3], [1, 2]]
    assert col[1:].equals(arr[1:]) and col[1:] == BytesColumn.from_list([b"", b"def", b"g", b"hi"], (2, 2))
    assert not col.equals(arr[:2]) and col != BytesColumn.from_list([b"a"] * 6, (3, 2))
    assert col.reshape(-1)[3] == b"def" and BytesColumn.from_list([b"q"], ()).to_list() == b"q"
    with pytest.raises(IndexError):
        col[3]
    with pytest.raises(ValueError):
        BytesColumn(np.zeros(3, np.uint8), np.array([0, 1], np.int64), (2,))


@settings(max_examples=80)
@given(values=st.lists(st.sampled_from([0, 1, 5, 1023, 1024, 3000]).map(lambda n: b"v" * n) | values_st, max_size=20),
       picks=st.lists(st.integers(-20, 19), max_size=30))
def test_take_gives_the_values_asked_for_in_any_mix_of_lengths(monkeypatch, values, picks):
    from tfrecord_lite import bytes_column

    monkeypatch.setattr(bytes_column, "_RUN_BYTES", 7)  # several runs of short values
    picks = [p % len(values) for p in picks] if values else []
    col = BytesColumn.from_list(values)
    assert col.take(np.array(picks, np.int64)).to_list() == [values[p] for p in picks]
    assert col[::-3].to_list() == values[::-3]


def test_taking_large_values_needs_no_index_per_byte():
    import tracemalloc

    col = BytesColumn.from_list([bytes([i]) * (64 << 10) for i in range(64)])  # 4 MiB
    tracemalloc.start()
    try:
        picked = col[::2]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert picked.to_list() == col.to_list()[::2]
    assert peak < 2 * picked.nbytes  # an int64 source position per byte took 8 times it


def test_a_pickled_slice_holds_only_its_own_bytes():
    import copy
    import pickle

    col = BytesColumn.from_list([b"x" * 100_000, b"ab", b"", b"cde", b"y" * 100_000]).reshape(-1)
    part = col[1:4]
    data = pickle.dumps(part)
    assert len(data) < 1000  # not the 200 KB of the column it was sliced from
    again = pickle.loads(data)
    assert again == part and again.to_list() == [b"ab", b"", b"cde"] and again.offsets[0] == 0
    grid = pickle.loads(pickle.dumps(col.reshape(5, 1)[3:]))
    assert grid.shape == (2, 1) and grid.to_list() == [[b"cde"], [b"y" * 100_000]]
    assert copy.deepcopy(part) == part and copy.copy(col) == col


def test_a_record_batch_converts_to_numpy_whole(backend):
    # An Example whose last value is 0 ends in a NUL byte, which an "S" array drops.
    records = [tfl.encode_example({"n": [0]}), b"a\x00\x00", b"", b"\x00"]
    frames, starts, lengths, *_ = backend.framing.scan_block(backend.framing.encode_frames(records))
    batch = tfl.RecordBatch(frames, starts, lengths)
    for array in (np.asarray(batch), np.array(batch), np.asarray(batch[1:])):
        assert array.dtype == object and array.tolist() == records[len(records) - len(array):]
    assert tfl.parse_example(np.asarray(batch)[:1], {"n": tfl.FixedLenFeature([], np.int64)})["n"].tolist() == [0]


def test_a_column_refuses_offsets_outside_its_values():
    # Indexing slices the values by the offsets, and numpy clips a slice past the end:
    # BytesColumn(b"abc", [0, 5])[0] was b"abc", as if the value were 3 bytes long.
    values = np.frombuffer(b"abcdef", np.uint8)
    for offsets, match in [([0, 7], "outside the 6 bytes"), ([-1, 2], "outside"), ([7], "outside"),
                           ([0, 4, 2, 6], r"offset 2 \(2\) is below offset 1 \(4\)")]:
        with pytest.raises(tfl.InvalidArgumentError, match=match):
            BytesColumn(values, np.array(offsets, np.int64))
    with pytest.raises(tfl.InvalidArgumentError, match="negative dimension"):
        BytesColumn(values, np.array([0], np.int64), (0, -1))
    assert BytesColumn(values, np.array([2, 2, 6], np.int64)).to_list() == [b"", b"cdef"]
    assert BytesColumn(values, np.array([6], np.int64)).to_list() == []


def test_a_boolean_key_is_a_mask_as_in_numpy():
    col = BytesColumn.from_list([b"a", b"bc", b"d"])
    arr = col.to_numpy()
    for key in (True, False, np.True_):
        assert col[key].shape == arr[key].shape and col[key].to_list() == arr[key].tolist()
    assert col[1] == b"bc" and col[np.int64(1)] == b"bc"


@pytest.mark.parametrize("size", [0, -2, lambda chunk: 0])
def test_rebatch_refuses_a_batch_size_below_one(size):
    from tfrecord_lite.batch import rebatch

    # It yielded empty batches forever (and held every one a caller kept).
    with pytest.raises(tfl.InvalidArgumentError, match="positive integer"):
        next(rebatch([[b"a", b"b"]], size))
    assert list(rebatch([[b"a", b"b"], [b"c"]], lambda chunk: 2)) == [[b"a", b"b"], [b"c"]]


def test_from_list_takes_bytes_likes_and_refuses_numbers():
    got = BytesColumn.from_list([b"a", bytearray(b"bc"), memoryview(b"d"), np.bytes_(b"e\x00"), "h\u00e9",
                                 np.frombuffer(b"xyz", np.uint8)])
    assert got.to_list() == [b"a", b"bc", b"d", b"e\x00", "h\u00e9".encode(), b"xyz"]
    for odd in (3, np.uint8(5), np.float32(1), None, 1.5):  # bytes(3) is three zero bytes
        with pytest.raises(tfl.ArgumentTypeError, match=f"value 1 is {type(odd).__name__}"):
            BytesColumn.from_list([b"a", odd])


def test_a_record_outside_its_block_is_an_error_however_it_is_read(backend):
    # Indexing sliced the block, and a slice past its end is clipped: b[1] was b"ef".
    for starts, lengths in [([0, 4], [2, 5]), ([0, -2], [2, 2])]:
        batch = tfl.RecordBatch(b"abcdef", np.array(starts, np.int64), np.array(lengths, np.int64))
        assert batch[0] == b"ab"
        for read in (lambda: batch[1], batch.to_numpy, lambda: list(batch)):
            with pytest.raises(tfl.InvalidArgumentError, match="outside its"):
                read()


def test_a_record_batch_checks_its_starts_and_lengths(backend):
    # Lists failed later with "a bytes-like object is required", a float array in the core,
    # and a missing length was an IndexError from numpy.
    batch = tfl.RecordBatch(b"abcdef", [0, 4], [2, 1])
    assert list(batch) == batch.to_numpy().tolist() == [b"ab", b"e"] and batch.nbytes == 3
    assert list(batch[1:]) == [b"e"] and len(tfl.RecordBatch(b"", [], [])) == 0
    with pytest.raises(tfl.InvalidArgumentError, match="2 starts and 1 lengths"):
        tfl.RecordBatch(b"abcdef", np.array([0, 4]), np.array([2]))
    with pytest.raises(tfl.ArgumentTypeError, match="lengths must be 1-D integers, not float64"):
        tfl.RecordBatch(b"abcdef", [0, 4], [2.0, 1.0])
    with pytest.raises(tfl.ArgumentTypeError, match="starts must be 1-D"):
        tfl.RecordBatch(segments=[(b"abcdef", np.zeros((1, 1), np.int64), [1])])


def test_errors_say_what_was_given_and_what_to_do():
    values = np.frombuffer(b"abcdef", np.uint8)
    assert BytesColumn(values, np.array([0, 2, 6], np.int32)).to_list() == [b"ab", b"cdef"]
    assert BytesColumn(values, [0, 2, 6]).offsets.dtype == np.int64
    with pytest.raises(tfl.InvalidArgumentError, match="not float64 with shape"):
        BytesColumn(values, np.array([0.0, 2.0]))
    with pytest.raises(tfl.InvalidArgumentError, match="np.frombuffer"):
        BytesColumn(b"abcdef", [0, 6])
    zero_d = BytesColumn.from_list([b"q"], ())
    for call in (len, iter):
        with pytest.raises(tfl.ArgumentTypeError, match=r"col\[\(\)\] is its value"):
            call(zero_d) if call is len else list(zero_d)
    with pytest.raises(IndexError, match="index 5 is out of range for a RecordBatch of 2 records"):
        tfl.RecordBatch(b"abcdef", [0, 2], [2, 2])[5]


def test_copy_false_is_refused_as_numpy_refuses_it_for_a_list():
    col = BytesColumn.from_list([b"a", b"bc"])
    batch = tfl.RecordBatch(b"abc", [0, 1], [1, 2])
    for items in (col, batch):
        if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
            with pytest.raises(ValueError, match=r"copy=False"):
                np.array(items, copy=False)
        else:  # numpy 1's copy=False means "copy if needed" (and is not passed on)
            assert np.array(items, copy=False).tolist() == [b"a", b"bc"]
        assert np.array(items, copy=True).tolist() == np.asarray(items).tolist() == [b"a", b"bc"]
        assert np.asarray(items, dtype="S2").tolist() == [b"a", b"bc"]


@pytest.mark.parametrize("mapped", [False, True])
def test_a_pickled_record_batch_holds_only_its_records(backend, tmp_path, mapped):
    import copy
    import pickle

    records = [bytes([i % 251]) * 5000 for i in range(400)]
    path = str(tmp_path / "r.tfrecord")
    with TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    batch = next(tfl.TFRecordReader(path, memory_map=mapped).record_batches(400))
    part = batch[3:9:2]
    data = pickle.dumps(part)
    assert len(data) < 4 * 5000  # not the read block (1 MiB) or the mapped file (2 MB)
    again = pickle.loads(data)
    assert again == records[3:9:2] and again.framed == part.framed
    assert [again.locate(i) for i in range(3)] == [(path, 3 * 5016, 3), (path, 5 * 5016, 5), (path, 7 * 5016, 7)]
    # Records of unknown origin beside known ones, and a framed batch written back verbatim.
    mixed = pickle.loads(pickle.dumps(part + tfl.RecordBatch(b"xyz", [0], [3])))
    assert mixed == records[3:9:2] + [b"xyz"] and mixed.locate(3) is None and mixed.locate(1)[2] == 5
    shallow = copy.copy(part)
    assert shallow == part and shallow.segments[0][0] is part.segments[0][0]
    out = str(tmp_path / "out.tfrecord")
    with TFRecordWriter(out) as w:
        w.write_many(again)
    assert list(tfl.TFRecordReader(out)) == records[3:9:2]


def test_bytes_output_is_checked(backend):
    with pytest.raises(FeatureSpecError, match="bytes_output"):
        tfl.parse_example([], {"b": tfl.FixedLenFeature([], bytes)}, bytes_output="list")


def test_dataset_passes_bytes_output_through(backend, tmp_path):
    path = str(tmp_path / "b.tfrecord")
    values = [bytes([i]) * i for i in range(10)]
    with TFRecordWriter(path) as w:
        for v in values:
            w.write(tfl.encode_example({"b": v, "n": len(v)}))
    spec = {"b": tfl.FixedLenFeature([], bytes), "n": tfl.FixedLenFeature([], np.int64)}
    batches = list(TFRecordDataset(path, spec, batch_size=4, bytes_output="column"))
    assert all(isinstance(b["b"], BytesColumn) for b in batches)
    assert [v for b in batches for v in b["b"]] == values
    items = list(TFRecordDataset(path, spec, bytes_output="column"))
    assert [item["b"] for item in items] == values


# -- the core's helpers for values back to back (BytesColumn, DataLoader batches) ----------------

@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(0, 9))
def test_values_copy_back_to_back_and_split_again(backend, values, at):
    from tfrecord_lite import _native

    lengths = _native.spans.value_lengths(values)
    assert lengths.dtype == np.int64 and lengths.tolist() == [len(v) for v in values]
    out = np.full(at + sum(lengths) + 3, 255, np.uint8)
    assert _native.spans.copy_values(values, out, at) == at + sum(lengths)
    assert out[:at].tolist() == [255] * at and out[len(out) - 3:].tolist() == [255] * 3
    assert out[at:len(out) - 3].tobytes() == b"".join(values)
    offsets = at + np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    got = _native.spans.split_values(out, offsets)
    assert got.dtype == object and got.shape == (len(values),)
    assert got.tolist() == values and all(type(v) is bytes for v in got)
    with _native.use(backend.other):
        assert _native.spans.split_values(out, offsets).tolist() == values


@given(st.lists(st.sampled_from([b"", b"a", b"red", b"der", b"x" * 16, b"x" * 17]) | st.binary(max_size=20),
                max_size=80))
def test_split_values_of_repeated_short_values_are_exact(backend, values):
    # The compiled core makes one object for equal short values; each must still be exactly
    # its own value, whatever collides in the table that finds them.
    from tfrecord_lite import _native

    offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64)
    got = _native.spans.split_values(b"".join(values), offsets)
    assert got.tolist() == values and all(type(v) is bytes for v in got)


def test_equal_short_values_are_one_object():
    # Categories and labels: thousands of equal values cost one object, on every path that
    # makes bytes objects in bulk (decoding, values crossing from a worker, raw records).
    from tfrecord_lite import _native

    # Every length class the sharing table hashes and compares apart: 1, 2-3, 4-7, 8-16.
    kinds = [b"a", b"cat", b"dog", b"green", b"magenta", b"12345678", b"y" * 16]
    values = kinds * 300 + [b"y" * 17] * 2
    shared = len(kinds) * 300
    with _native.use("cython"):
        decoded = tfl.parse_example([tfl.encode_example({"s": v}) for v in values],
                                    {"s": tfl.FixedLenFeature([], bytes)})["s"]
        offsets = np.concatenate([[0], np.cumsum([len(v) for v in values[:shared]])]).astype(np.int64)
        split = _native.spans.split_values(b"".join(values[:shared]), offsets)
        frames, starts, lengths, *_ = _native.framing.scan_block(_native.framing.encode_frames(values))
        records = tfl.RecordBatch(frames, starts, lengths, framed=True).to_numpy()
    for out in (decoded, records, split):
        assert out[:shared].tolist() == values[:shared]
        assert len({id(v) for v in out[:shared]}) == len(kinds)
    for out in (decoded, records):  # long values are copied each time: no table to look them up in
        assert out[shared] == out[shared + 1] and out[shared] is not out[shared + 1]


@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(1, 3), st.sampled_from(["list", "tuple", "array"]))
def test_bytes_list_is_a_checked_list_of_its_own(backend, values, step, form):
    # The encoders' references to a bytes column's values, which they read without the GIL:
    # a new list of the very objects, whatever holds them.
    from tfrecord_lite import _native

    held = np.empty(len(values) * step, object)
    held[::step] = values
    source = {"list": list(values), "tuple": tuple(values), "array": held[::step]}[form]
    got = _native.spans.bytes_list(source)
    assert type(got) is list and got is not source and got == values
    assert all(a is b for a, b in zip(got, values))
    if form == "array":
        del held, source  # the list keeps its values alive on its own
        assert got == values
    with _native.use(backend.other):
        assert _native.spans.bytes_list(values) == values


@pytest.mark.parametrize("odd", [bytearray(b"x"), memoryview(b"x"), "x", 7, None, np.bytes_(b"x")])
def test_bytes_list_refuses_anything_but_exact_bytes(backend, odd):
    from tfrecord_lite import _native

    values = [b"ab", odd, b"c"]
    assert _native.spans.bytes_list(values) is None
    array = np.empty(3, object)
    array[:] = values
    assert _native.spans.bytes_list(array) is None
    assert _native.spans.bytes_list(np.array([[b"a"], [b"b"]], object)) is None  # rows of arrays


@pytest.mark.parametrize("odd", [bytearray(b"x"), memoryview(b"x"), "x", 7, None])
def test_only_exact_bytes_are_copied(backend, odd):
    from tfrecord_lite import _native

    values = [b"ab", odd, b"c"]
    assert _native.spans.value_lengths(values) is None
    with pytest.raises(tfl.ArgumentTypeError, match="value 1 is"):
        _native.spans.copy_values(values, bytearray(16))


def test_copies_and_splits_stay_inside_their_buffers(backend):
    from tfrecord_lite import _native

    with pytest.raises(tfl.InvalidArgumentError, match="do not fit"):
        _native.spans.copy_values([b"abc", b"de"], bytearray(6), 2)
    with pytest.raises(tfl.InvalidArgumentError, match="do not fit"):
        _native.spans.copy_values([b"a"], bytearray(6), -1)
    with pytest.raises(BufferError):
        _native.spans.copy_values([b"a"], b"read-only")
    a = np.array
    for offsets, match in [([0, 3, 7], "outside"), ([-1, 2], "outside"), ([0, 4, 2], "before"), ([], "at least one")]:
        with pytest.raises(tfl.InvalidArgumentError, match=match):
            _native.spans.split_values(b"abcdef", a(offsets, np.int64))
    assert _native.spans.split_values(b"abcdef", a([2, 2, 6], np.int64)).tolist() == [b"", b"cdef"]
