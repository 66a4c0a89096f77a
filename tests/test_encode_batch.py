"""encode_examples(..., as_batch=True): records framed in one buffer without the GIL, and
the writers that copy a framed RecordBatch's frames verbatim."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import _native
from tfrecord_lite.errors import FeatureSpecError

SETTINGS = settings(max_examples=60, deadline=None)

int64s = st.integers(-2**63, 2**63 - 1)
float32s = st.floats(width=32, allow_nan=False)


@st.composite
def column_sets(draw):
    """A dict of columns of n rows, of every kind encode_examples takes."""
    n = draw(st.integers(0, 12))
    kinds = draw(st.lists(st.sampled_from(["f", "i", "b", "bl", "raw", "ragged", "str", "ob", "S", "num"]),
                          min_size=1, max_size=5))
    cols = {}
    for j, kind in enumerate(kinds):
        name = f"{kind}{j}"
        if kind == "f":
            width = draw(st.integers(0, 3))
            cols[name] = np.array(draw(st.lists(st.lists(float32s, min_size=width, max_size=width),
                                                min_size=n, max_size=n)), np.float32).reshape(n, width)
        elif kind == "i":
            cols[name] = np.array(draw(st.lists(int64s, min_size=n, max_size=n)), np.int64)
        elif kind == "b":  # one bytes value per row
            cols[name] = draw(st.lists(st.binary(max_size=9), min_size=n, max_size=n))
        elif kind == "bl":  # a list of bytes values per row
            cols[name] = draw(st.lists(st.lists(st.binary(max_size=5), max_size=3), min_size=n, max_size=n))
        elif kind == "raw":
            cols[name] = np.frombuffer(draw(st.binary(min_size=3 * n, max_size=3 * n)), np.uint8).reshape(n, 3)
        elif kind == "ragged":  # rows of different lengths and kinds: encoded per row
            cols[name] = draw(st.lists(st.one_of(st.lists(int64s, max_size=3), st.lists(float32s, min_size=1, max_size=2)),
                                       min_size=n, max_size=n))
        elif kind == "ob":  # bytes in an object array, maybe a strided view of one
            step = draw(st.integers(1, 3))
            values = np.empty(n * step, object)
            values[:] = draw(st.lists(st.binary(max_size=9), min_size=n * step, max_size=n * step))
            cols[name] = values[::step]
        elif kind == "S":  # fixed-width bytes: rows as numpy gives them (trailing NULs dropped)
            cols[name] = np.array(draw(st.lists(st.binary(min_size=1, max_size=5), min_size=n, max_size=n)), "S5")
        elif kind == "num":  # other numeric dtypes, 1-D or 2-D, maybe not contiguous
            dtype = draw(st.sampled_from([np.float64, np.float16, np.int32, np.int8, np.uint8, np.uint32, np.uint64,
                                          np.bool_]))
            width = draw(st.integers(1, 3))
            values = np.array(draw(st.lists(st.integers(0, 100), min_size=n * width, max_size=n * width))).astype(dtype)
            cols[name] = values.reshape(n, width) if width > 1 else values[::-1]
        else:
            cols[name] = draw(st.lists(st.text(max_size=4), min_size=n, max_size=n))
    raw = tuple(k for k in cols if k.startswith("raw"))
    return cols, raw


@SETTINGS
@given(case=column_sets(), deterministic=st.booleans())
def test_as_batch_equals_the_list_and_is_framed(backend, case, deterministic):
    cols, raw = case
    records = tfl.encode_examples(cols, deterministic, raw)
    batch = tfl.encode_examples(cols, deterministic, raw, as_batch=True)
    assert isinstance(batch, tfl.RecordBatch) and batch.framed
    assert list(batch) == records
    # The frames around the records are real TFRecord frames, back to back: reading the
    # buffer gives the records again, CRCs checked.
    for frames, starts, lengths in batch.segments:
        assert list(tfl.TFRecordReader(bytes(frames))) == records
        assert starts.dtype == lengths.dtype == np.int64
    other = "python" if backend.name == "cython" else "cython"
    with _native.use(other):
        theirs = tfl.encode_examples(cols, deterministic, raw, as_batch=True)
    assert [bytes(f) for f, _, _ in theirs.segments] == [bytes(f) for f, _, _ in batch.segments]


@SETTINGS
@given(case=column_sets())
def test_columns_encode_as_their_rows_do(backend, case):
    # The column path's shortcuts (numeric arrays as they are, bytes values gathered in C)
    # give each record exactly what encode_example makes of that row's values.
    cols, raw = case
    cols = {k: v for k, v in cols.items() if k not in raw}
    n = len(next(iter(cols.values()))) if cols else 0
    rows = [tfl.encode_example({k: v[i] for k, v in cols.items()}) for i in range(n)]
    assert tfl.encode_examples(cols) == rows
    assert list(tfl.encode_examples(cols, as_batch=True)) == rows


def test_unsigned_values_past_int64_are_refused(backend):
    with pytest.raises(FeatureSpecError, match="'u'.*does not fit int64"):
        tfl.encode_examples({"u": np.array([1, 2**63], np.uint64)})
    with pytest.raises(FeatureSpecError, match="'u'.*does not fit int64"):
        tfl.encode_example({"u": np.array([2**64 - 1], np.uint64)})
    assert tfl.encode_examples({"u": np.array([2**63 - 1], np.uint64)}) == [tfl.encode_example({"u": 2**63 - 1})]


@pytest.mark.parametrize("ints", [[-1, 2**63], [[1], [2**63]], (2**63, 3), [2**64], [-2**63 - 1, 5]])
def test_int_lists_past_int64_are_refused_not_rounded_to_floats(backend, ints):
    """numpy makes float64 of [-1, 2**63]: the ints were written as a float_list, rounded,
    where TensorFlow's Int64List refuses them."""
    bad = next(v for v in np.ravel(np.array(ints, dtype=object)) if not -2**63 <= v < 2**63)
    with pytest.raises(FeatureSpecError, match=f"'i'.*value {bad} does not fit int64"):
        tfl.encode_example({"i": ints})
    with pytest.raises(FeatureSpecError, match=f"'i'.*value {bad} does not fit int64"):
        tfl.encode_examples({"i": [ints]}, as_batch=True)
    # uint64 beside a negative int made numpy give float64 too: a float_list of ints that fit
    assert tfl.encode_example({"i": [np.uint64(5), -1]}) == tfl.encode_example({"i": np.array([5, -1])})
    # a list with a float in it is a float_list, large values and all
    assert tfl.encode_example({"f": [1.5, 2**63]}) == tfl.encode_example({"f": np.array([1.5, 2.0**63], np.float32)})


def test_str_values_without_utf8_name_the_feature(backend):
    """A str with a lone surrogate (os.fsdecode of a file name that is not UTF-8) raised a
    bare UnicodeEncodeError naming no feature."""
    for encode in (lambda v: tfl.encode_example({"s": v}), lambda v: tfl.encode_examples({"s": [v]})):
        for value in ("\udc80", ["ok", "\udc80"]):
            with pytest.raises(FeatureSpecError, match=r"'s': the str value '\\udc80' has no UTF-8 encoding"):
                encode(value)


@pytest.mark.parametrize("column", [3, np.float32(1), np.array(3), None, iter([1, 2]), "ab", b"ab"])
def test_a_column_without_rows_names_its_feature(backend, column):
    """A scalar (or None, an iterator) as a column raised a bare "object of type 'int' has no
    len()"; a str or bytes column was written one character per row."""
    for as_batch in (False, True):
        with pytest.raises(FeatureSpecError, match=r"'b': a column needs one value per row.*np\.full"):
            tfl.encode_examples({"a": [1, 2], "b": column}, as_batch=as_batch)


@pytest.mark.parametrize("steps", [3, None, np.array(3), "ab", b"ab"])
def test_a_feature_list_without_steps_names_its_feature(backend, steps):
    """A scalar as a feature list raised a bare "'int' object is not iterable"; a str was
    written one character per step."""
    with pytest.raises(FeatureSpecError, match=r"'s': a feature list needs one value per step.*\[value\]"):
        tfl.encode_sequence_example({}, {"s": steps})


def test_raw_names_whole_columns(backend):
    """raw="image" matched substrings ("mag" in "image" made that column raw too), and a
    misspelt raw name was ignored, its column encoded as numbers."""
    cols = {"image": np.arange(4, dtype=np.uint8).reshape(2, 2), "mag": np.arange(2)}
    expected = [tfl.encode_example({"image": bytes(cols["image"][i]), "mag": int(cols["mag"][i])}) for i in range(2)]
    assert tfl.encode_examples(cols, raw="image") == tfl.encode_examples(cols, raw=["image"]) == expected
    for as_batch in (False, True):
        with pytest.raises(FeatureSpecError, match=r"raw names 'imgae', which is not one of the columns"):
            tfl.encode_examples(cols, raw=["imgae"], as_batch=as_batch)


@pytest.mark.parametrize("column, message", [
    ([b"ab", b"c"], "not a list of bytes or str"),  # numpy padded b"c" to b"c\x00"
    (["ab", "c"], "not a list of bytes or str"),
    (np.array([[1, 2], [3, 4]], dtype=object), "not an array of Python objects"),  # a bare TypeError
    ([[1, 2], [3]], "needs rows of one shape"),  # a bare ValueError
])
def test_raw_columns_of_what_has_no_raw_data_are_refused(backend, column, message):
    with pytest.raises(FeatureSpecError, match=f"'r': a raw column (needs an array of numbers, )?{message}"):
        tfl.encode_examples({"r": column}, raw="r")


def test_as_batch_errors_and_empty(backend):
    assert len(tfl.encode_examples({}, as_batch=True)) == 0
    with pytest.raises(FeatureSpecError, match="'s'.*bytes"):
        tfl.encode_examples({"s": [b"a", [b"b", 3]]}, as_batch=True)
    with pytest.raises(FeatureSpecError, match="rows"):
        tfl.encode_examples({"a": np.zeros(3), "b": [b"x"]}, as_batch=True)


def _file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("index", [False, True])
def test_writers_copy_a_framed_batch_verbatim(backend, tmp_path, index):
    cols = {"x": np.arange(50, dtype=np.int64), "s": [b"v%d" % i for i in range(50)]}
    records = tfl.encode_examples(cols)
    batch = tfl.encode_examples(cols, as_batch=True)
    with tfl.TFRecordWriter(tmp_path / "list.tfrecord", index=index) as w:
        w.write_many(records)
        w.write_many(records[10:40:3])
    with tfl.TFRecordWriter(tmp_path / "batch.tfrecord", index=index) as w:
        w.write_many(batch)
        w.write_many(batch[10:40:3])  # strided: not contiguous, framed anew
        assert w.records_written == 50 + 10
    assert _file_bytes(tmp_path / "batch.tfrecord") == _file_bytes(tmp_path / "list.tfrecord")
    frames, starts, lengths = batch.segments[0]  # a batch made by hand, of int32 arrays
    with tfl.TFRecordWriter(tmp_path / "int32.tfrecord") as w:
        w.write_many(tfl.RecordBatch(frames, starts.astype(np.int32), lengths.astype(np.int32), framed=True))
    assert _file_bytes(tmp_path / "int32.tfrecord") == _file_bytes(tmp_path / "list.tfrecord")[:len(frames)]
    if index:
        assert _file_bytes(tmp_path / "batch.tfrecord.index") == _file_bytes(tmp_path / "list.tfrecord.index")


def test_reader_batches_are_framed_only_when_crcs_were_checked(backend, tmp_path):
    path = tmp_path / "a.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write_many([b"r%d" % i for i in range(100)])
    checked = list(tfl.TFRecordReader(path).record_batches(30))
    unchecked = list(tfl.TFRecordReader(path, check_crc=False).record_batches(30))
    assert all(b.framed for b in checked) and not any(b.framed for b in unchecked)
    assert tfl.RecordBatch.concat(checked).framed and not (checked[0] + unchecked[0]).framed
    # A batch whose frames were not checked is framed anew: damage in the source's data
    # CRCs is not copied into a new file.
    data = bytearray(_file_bytes(path))
    data[-1] ^= 1
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(bytes(data))
    with tfl.TFRecordWriter(tmp_path / "out.tfrecord") as w:
        for batch in tfl.TFRecordReader(damaged, check_crc=False).record_batches(30):
            w.write_many(batch)
    assert list(tfl.TFRecordReader(tmp_path / "out.tfrecord")) == [b"r%d" % i for i in range(100)]


def _batch_encoder(chunk):
    return tfl.RecordBatch.concat([tfl.encode_examples(block, as_batch=True) for block in chunk])


def _list_encoder(chunk):
    return [r for block in chunk for r in tfl.encode_examples(block)]


@pytest.mark.parametrize("workers", [1, 3])
def test_write_parallel_takes_framed_batches(backend, tmp_path, workers):
    blocks = [{"x": np.arange(i * 7, i * 7 + 7, dtype=np.int64), "s": [b"%d" % i] * 7} for i in range(20)]
    a = tfl.write_parallel(blocks, _batch_encoder, str(tmp_path / "a"), 3, workers, chunk_size=2,
                           batched=True, progress=False, index=True)
    b = tfl.write_parallel(blocks, _list_encoder, str(tmp_path / "b"), 3, workers, chunk_size=2,
                           batched=True, progress=False, index=True)
    assert [i.records for i in a] == [i.records for i in b] and sum(i.records for i in a) == 140
    for x, y in zip(a, b):
        assert _file_bytes(x.path) == _file_bytes(y.path)
        assert _file_bytes(x.path + ".index") == _file_bytes(y.path + ".index")


@pytest.mark.parametrize("value, message", [
    ([[1, 2], [3]], "rows have one length"),  # numpy's "inhomogeneous shape after 1 dimensions"
    ([1, [2]], "rows have one length"),
    ([[b"a"], [b"b", b"c"]], "rows have one length"),
    ([[b"a"], [b"b"]], "a nested list of bytes or str"),  # "want floats, ints, bools, bytes or str"
    ([["a", "b"]], "a nested list of bytes or str"),
])
def test_nested_lists_that_cannot_be_flattened_say_why(backend, value, message):
    with pytest.raises(FeatureSpecError, match=message) as info:
        tfl.encode_example({"x": value})
    assert "encode_sequence_example" in str(info.value)
    with pytest.raises(FeatureSpecError, match=message):
        tfl.encode_examples({"x": [value]})


@pytest.mark.parametrize("value", [1e40, -1e40, [1.5, 1e40], np.array([1e40]), np.float64(3.5e38)])
def test_floats_past_float32_encode_as_inf_without_warning(backend, value):
    """TF's FloatList stores them as inf; numpy's cast warned of overflow (the twin for a
    single float too, where the compiled core did not)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = tfl.encode_example({"x": value})
        assert tfl.encode_examples({"x": [value]}) == [record]
    expected = np.asarray(value, dtype=np.float64).reshape(-1)
    assert tfl.decode_example(record)["x"].tolist() == [v if abs(v) < 3.4e38 else np.sign(v) * np.inf
                                                        for v in expected.tolist()]


@pytest.mark.parametrize("value", [np.array([1.5, 2], dtype=object), np.array([[np.float32(1.5)], [3]], dtype=object)])
def test_numbers_in_an_object_array_encode_as_their_list(backend, value):
    """An object array of floats (a pandas object column's values) was refused, where the
    same numbers in a list, or an object array of ints, encode."""
    expected = tfl.encode_example({"x": value.reshape(-1).tolist()})
    assert tfl.encode_example({"x": value}) == expected
    assert tfl.encode_examples({"x": [value]}) == [expected]
    assert tfl.decode_example(expected)["x"].dtype == np.float32
