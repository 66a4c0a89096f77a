"""Feature specs: dtype spellings, validation, TF code, and spec handling in parsing."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.errors import FeatureSpecError


@pytest.mark.parametrize("dtype, name", [
    (np.float32, "float32"), ("float32", "float32"), (np.int64, "int64"), ("int64", "int64"),
    (bytes, "string"), ("string", "string"), (np.dtype("float32"), "float32"),
])
def test_dtype_spellings(dtype, name):
    assert tfl.VarLenFeature(dtype).dtype == name


@pytest.mark.parametrize("make", [
    lambda: tfl.VarLenFeature(np.float64),
    lambda: tfl.FixedLenFeature([-1], np.int64),
    lambda: tfl.FixedLenFeature([2], np.int64, default_value=[1, 2, 3]),
    lambda: tfl.RaggedFeature(np.int64, partitions=("x",)),
    lambda: tfl.SparseFeature(["a", "b"], "v", np.float32, 4),
    lambda: tfl.RawTensorFeature((2,), object),
])
def test_bad_specs_raise_feature_spec_error(make):
    with pytest.raises(FeatureSpecError):
        make()


def test_defaults_are_shaped():
    spec = tfl.FixedLenFeature([2, 2], np.int64, default_value=7)
    assert spec.default_value.tolist() == [[7, 7], [7, 7]]
    assert tfl.FixedLenFeature([], bytes, default_value="x").default_value.tolist() == b"x"


def test_tf_code():
    schema = tfl.Schema(a=tfl.FixedLenFeature([3], np.float32), b=tfl.VarLenFeature(bytes))
    assert schema.to_tf_code() == ("features = {\n    'a': tf.io.FixedLenFeature([3], tf.float32),\n"
                                   "    'b': tf.io.VarLenFeature(tf.string),\n}")


def test_unsupported_spec_placement(backend):
    rec = tfl.encode_example({"a": [1, 2]})
    with pytest.raises(FeatureSpecError, match="allow_missing"):
        tfl.parse_example([rec], {"a": tfl.FixedLenSequenceFeature([], np.int64)})
    with pytest.raises(FeatureSpecError, match="not supported"):
        tfl.parse_sequence_example([tfl.encode_sequence_example({}, {})], {}, {"a": tfl.FixedLenFeature([], np.int64)})


def test_sparse_feature_multi_dim_and_mismatch(backend):
    recs = [tfl.encode_example({"r": [1, 0], "c": [2, 1], "v": [5.0, 6.0]}), tfl.encode_example({"r": [0], "c": [0, 1], "v": [1.0]})]
    spec = {"s": tfl.SparseFeature(["r", "c"], "v", np.float32, [2, 3])}
    out = tfl.parse_example(recs[:1], spec)["s"]
    assert out.indices.tolist() == [[0, 0, 1], [0, 1, 2]] and out.values.tolist() == [6.0, 5.0]
    assert out.dense_shape.tolist() == [1, 2, 3]
    with pytest.raises(FeatureSpecError, match="index feature 'c'") as info:
        tfl.parse_example(recs, spec)
    assert info.value.index == 1


def test_a_key_read_by_two_specs(backend):
    """The core returns only the values of a key that one FixedLenFeature alone reads; a key
    that a SparseFeature reads too keeps its per-row kinds and counts."""
    recs = [tfl.encode_example({"i": [2], "v": [1.5]}), tfl.encode_example({"i": [0], "v": [2.5]})]
    spec = {"i": tfl.FixedLenFeature([1], np.int64), "v": tfl.FixedLenFeature([], np.float32),
            "s": tfl.SparseFeature("i", "v", np.float32, 4)}
    out = tfl.parse_example(recs, spec)
    assert out["i"].tolist() == [[2], [0]] and out["v"].tolist() == [1.5, 2.5]
    assert out["s"].indices.tolist() == [[0, 2], [1, 0]] and out["s"].values.tolist() == [1.5, 2.5]


def test_ragged_and_item_sequence(backend):
    recs = [tfl.encode_example({"a": [1, 2, 3, 4]}), tfl.encode_example({}), tfl.encode_example({"a": [5, 6]})]
    out = tfl.parse_example(recs, {"r": tfl.RaggedFeature(np.int64, value_key="a", row_splits_dtype="int64"),
                                   "a": tfl.FixedLenSequenceFeature([2], np.int64, allow_missing=True)})
    assert out["r"].to_list() == [[1, 2, 3, 4], [], [5, 6]] and out["r"].row_splits.dtype == np.int64
    assert out["a"].tolist() == [[[1, 2], [3, 4]], [[0, 0], [0, 0]], [[5, 6], [0, 0]]]


def test_empty_batch(backend):
    out = tfl.parse_example([], {"a": tfl.FixedLenFeature([2], np.float32), "v": tfl.VarLenFeature(bytes)})
    assert out["a"].shape == (0, 2) and out["v"].dense_shape.tolist() == [0, 0]


@pytest.mark.parametrize("spec", [tfl.FixedLenFeature, tfl.RawTensorFeature,
                                  lambda shape, dtype: tfl.FixedLenSequenceFeature(shape, dtype, allow_missing=True),
                                  lambda shape, dtype: tfl.SparseFeature("i", "v", dtype, shape)])
@pytest.mark.parametrize("shape", [[2.5], "32", "3", [np.float64(2)], 2.0, None])
def test_shapes_of_no_ints_are_refused(spec, shape):
    """int() made [2.5] the shape [2] and the string "32" the shape [3, 2]."""
    with pytest.raises(FeatureSpecError, match="shape must be a sequence of ints"):
        spec(shape, np.int64)


def test_unknown_dimensions_say_which_spec_takes_them():
    for shape in ([None], [-1], [2, None]):
        with pytest.raises(FeatureSpecError, match="unknown size needs VarLenFeature"):
            tfl.FixedLenFeature(shape, np.float32)


@pytest.mark.parametrize("make", [
    lambda: tfl.SparseFeature(None, "v", np.float32, 3),
    lambda: tfl.SparseFeature(3, "v", np.float32, 3),
    lambda: tfl.SparseFeature("i", None, np.float32, 3),  # refused only when parsing
    lambda: tfl.SparseFeature(["i", 2], "v", np.float32, [3, 3]),
    lambda: tfl.SparseFeature(b"i", "v", np.float32, 3),  # became the index key 105
    lambda: tfl.RaggedFeature(np.float32, value_key=3),
    lambda: tfl.RaggedFeature(np.float32, row_splits_dtype="xyz"),
    lambda: tfl.RawTensorFeature([2], np.float32, default_value=[1, 2, 3]),
    lambda: tfl.RawTensorFeature([2], np.float32, default_value="abc"),
    lambda: tfl.RawTensorFeature([2], np.uint8, default_value=300),  # OverflowError
    lambda: tfl.RawTensorFeature([2], np.uint8, default_value=-1),
    lambda: tfl.RawTensorFeature([2], np.int32, default_value=1.5),  # silently 1
    lambda: tfl.RawTensorFeature([2], np.int64, default_value=float("nan")),
])
def test_bad_spec_arguments_raise_feature_spec_error(make):
    """These raised TypeError or ValueError from deep inside numpy or tuple()."""
    with pytest.raises(FeatureSpecError):
        make()


@pytest.mark.parametrize("spec", [None, np.int64, tfl.FixedLenFeature, "int64"])
def test_values_that_are_no_spec_are_named(backend, spec):
    """These were refused as 'NoneType is not supported in parse_example'."""
    with pytest.raises(FeatureSpecError, match="is not a feature spec. Use tfrecord_lite's FixedLenFeature"):
        tfl.parse_example([tfl.encode_example({"x": 1})], {"x": spec})


def test_specs_with_default_arrays_compare_and_hash():
    """== compared the default arrays elementwise: ValueError for a default of several
    values (comparing an inferred schema with an expected one, say), and no hash."""
    a = tfl.FixedLenFeature([2], np.float32, default_value=[1, 2])
    assert a == tfl.FixedLenFeature([2], np.float32, default_value=[1.0, 2.0])
    assert {"x": a} == {"x": tfl.FixedLenFeature([2], np.float32, default_value=[1, 2])}
    assert a != tfl.FixedLenFeature([2], np.float32) and a != tfl.FixedLenFeature([2], np.float32, default_value=[1, 3])
    assert a != tfl.FixedLenSequenceFeature([2], np.float32)
    nan = tfl.FixedLenFeature([], np.float32, default_value=float("nan"))
    assert nan == tfl.FixedLenFeature([], np.float32, default_value=float("nan"))
    assert tfl.FixedLenFeature([], np.float32, default_value=0.0) != tfl.FixedLenFeature([], np.float32, default_value=-0.0)
    assert tfl.FixedLenFeature([], bytes, default_value="x") == tfl.FixedLenFeature([], bytes, default_value=b"x")
    assert tfl.RawTensorFeature([2], np.int32, default_value=1) == tfl.RawTensorFeature([2], np.int32, default_value=[1, 1])
    assert tfl.FixedLenSequenceFeature([], np.int64, allow_missing=True, default_value=3) == \
        tfl.FixedLenSequenceFeature([], np.int64, allow_missing=True, default_value=3)
    assert len({a, tfl.FixedLenFeature([2], np.float32, default_value=[1, 2]), nan}) == 2


@pytest.mark.parametrize("dtype", [np.float32, ">f4", np.bool_, "datetime64[s]", "S3", "V4", "m8[ns]",
                                   np.dtype([("a", "<i4"), ("b", ">f8")])])
def test_to_code_of_raw_dtypes_runs(dtype):
    """to_code printed np.<dtype name>, which numpy lacks for some: np.datetime64[s],
    np.bytes24, np.void32 (a NameError or AttributeError when run)."""
    spec = tfl.RawTensorFeature([2], dtype)
    code = tfl.Schema(x=spec).to_code()
    if dtype is np.bool_:  # np.bool is a deprecated alias in numpy 1.23, missing in 1.24-1.26
        assert "np.bool_" in code, code
    scope = {}
    exec(code, scope)
    assert scope["features"] == {"x": spec}


# RaggedFeature partitions: the records of tf.io.RaggedFeature's docstring, results as TF gives them.
PARTITIONED = [tfl.encode_example({"v": [3, 1, 4, 1, 5, 9], "s1": [0, 2, 3, 3, 6], "s2": [0, 2, 3, 4],
                                   "ids": [0, 0, 2, 3, 3, 3]}),
               tfl.encode_example({"v": [2, 7, 1, 8, 2, 8, 1], "s1": [0, 3, 4, 5, 7], "s2": [0, 1, 1, 4],
                                   "ids": [1] * 7})]
Ragged = tfl.RaggedFeature


@pytest.mark.parametrize("partitions, expected", [
    ([Ragged.RowSplits("s1")], [[[3, 1], [4], [], [1, 5, 9]], [[2, 7, 1], [8], [2], [8, 1]]]),
    ([Ragged.RowSplits("s2"), Ragged.RowSplits("s1")],
     [[[[3, 1], [4]], [[]], [[1, 5, 9]]], [[[2, 7, 1]], [], [[8], [2], [8, 1]]]]),
    ([Ragged.RowSplits("s1"), Ragged.UniformRowLength(1)],
     [[[[3], [1]], [[4]], [], [[1], [5], [9]]], [[[2], [7], [1]], [[8]], [[2]], [[8], [1]]]]),
    ([Ragged.RowStarts("s1")], [[[3, 1], [4], [], [1, 5, 9], []], [[2, 7, 1], [8], [2], [8, 1], []]]),
    ([Ragged.ValueRowIds("ids")], [[[3, 1], [], [4], [1, 5, 9]], [[], [2, 7, 1, 8, 2, 8, 1]]]),
    ([Ragged.UniformRowLength(3)], None),  # 7 values in the second record
])
def test_ragged_partitions(backend, partitions, expected):
    """Partitions were refused as not supported; they split each record's values into rows
    by other features of the record, as tf.io.parse_example does."""
    spec = {"r": tfl.RaggedFeature(np.int64, value_key="v", partitions=partitions)}
    if expected is None:
        with pytest.raises(FeatureSpecError, match=r"feature 'r': UniformRowLength\(3\): 7 values") as info:
            tfl.parse_example(PARTITIONED, spec)
        assert info.value.index == 1
        assert tfl.parse_example(PARTITIONED[:1], spec)["r"].to_list() == [[[3, 1, 4], [1, 5, 9]]]
        return
    got = tfl.parse_example(PARTITIONED, spec)["r"]
    assert got.to_list() == expected and got.row_splits.dtype == np.int32
    assert tfl.parse_single_example(PARTITIONED[1], spec)["r"].to_list() == expected[1]


@pytest.mark.parametrize("kind, partition, message", [
    ("RowSplits", [0, 2, 5], "the rows take 5 values"),
    ("RowSplits", [0, 5, 4], "larger than the row's values"),
    ("RowSplits", [1, 4], "row splits start at 1, not 0"),
    ("RowSplits", [0, 3, 1, 4], "negative"),
    ("RowSplits", [], "the rows take 0 values"),
    ("RowLengths", [1, 1], "the rows take 2 values .or inner rows., but there are 4"),
    ("RowLimits", [2, 1, 4], "negative"),
    ("RowStarts", [1, 2], "row starts start at 1, not 0"),
    ("ValueRowIds", [0, 2, 1, 1], "not in ascending order"),
    ("ValueRowIds", [-1, 0, 0, 0], "must lie in 0..2147483647"),
    ("ValueRowIds", [0, 0], "2 row ids for 4 values"),
    ("ValueRowIds", [0, 0, 0, 2**40], "must lie in"),
    ("ValueRowIds", [0, 0, 5, -2**63], "must lie in"),  # 5 to -2**63 wrapped around to a step up
])
def test_ragged_partitions_that_do_not_fit_name_feature_and_record(backend, kind, partition, message):
    good = tfl.encode_example({"v": [1], "p": {"RowSplits": [0, 1], "RowStarts": [0], "ValueRowIds": [0]}.get(kind, [1])})
    bad = tfl.encode_example({"v": [1, 2, 3, 4], "p": np.array(partition, np.int64)})
    spec = {"r": tfl.RaggedFeature(np.int64, value_key="v", partitions=[getattr(Ragged, kind)("p")])}
    assert tfl.parse_example([good], spec)["r"].to_list() == [[[1]]]
    with pytest.raises(FeatureSpecError, match=f"feature 'r': {kind}..p..: .*{message}") as info:
        tfl.parse_example([good, good, bad], spec)
    assert info.value.index == 2


def test_ragged_partitions_in_sequence_examples(backend):
    """A sequence RaggedFeature's partitions are feature lists with the values' steps; a
    context one reads context features."""
    records = [tfl.encode_sequence_example({"v": [1, 2, 3], "n": [2, 1]},
                                           {"v": [[1, 2, 3], [4]], "n": [[1, 2], [0, 1]]}),
               tfl.encode_sequence_example({"v": [], "n": []}, {}),
               tfl.encode_sequence_example({"v": [5], "n": [1]}, {"v": [[5, 6]], "n": [[2]]})]
    spec = {"r": tfl.RaggedFeature(np.int64, value_key="v", partitions=[Ragged.RowLengths("n")],
                                   row_splits_dtype="int64")}
    context, lists, lengths = tfl.parse_sequence_example(records, spec, spec)
    assert context["r"].to_list() == [[[1, 2], [3]], [], [[5]]]
    assert lists["r"].to_list() == [[[[1], [2, 3]], [[], [4]]], [], [[[5, 6]]]] and lengths == {}
    assert lists["r"].row_splits.dtype == lists["r"].values.values.row_splits.dtype == np.int64
    context, lists = tfl.parse_single_sequence_example(records[0], spec, spec)
    assert context["r"].to_list() == [[1, 2], [3]] and lists["r"].to_list() == [[[1], [2, 3]], [[], [4]]]
    odd = tfl.encode_sequence_example({}, {"v": [[1], [2]], "n": [[1]]})
    with pytest.raises(FeatureSpecError, match="'r': the partition's feature list 'n' has 1 steps but the "
                                               "values' list 'v' has 2") as info:
        tfl.parse_sequence_example(records + [odd], None, spec)
    assert info.value.index == 3


# 2**31 - 1 made 2**31 rows of row splits (16 GiB) from one short record before.
@pytest.mark.parametrize("last_id", [2**31 - 1, 2**24, 2 + 2**16])
def test_value_row_ids_make_a_bounded_number_of_empty_rows(backend, last_id):
    spec = {"r": tfl.RaggedFeature(np.int64, value_key="v", partitions=[Ragged.ValueRowIds("p")])}
    gaps = tfl.encode_example({"v": [1, 2, 3], "p": [0, 0, 3]})
    assert tfl.parse_example([gaps], spec)["r"].to_list() == [[[1, 2], [], [], [3]]]  # as TensorFlow
    widest = tfl.encode_example({"v": [7, 8], "p": [0, 1 + 2**16]})  # 2**16 empty rows: the most there may be
    assert tfl.parse_example([widest], spec)["r"].values.row_splits.shape == (2 + 2**16 + 1,)
    hostile = tfl.encode_example({"v": [7, 8], "p": [0, last_id]})
    tracemalloc.start()
    try:
        with pytest.raises(FeatureSpecError, match=f"feature 'r': ValueRowIds..p..: row id {last_id} would make "
                                                   f"{last_id + 1} rows of 2 values. .*at most 65536 rows more") as info:
            tfl.parse_example([gaps, hostile], spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.index == 1 and peak < 2**20
    steps = [tfl.encode_sequence_example({}, {"v": [[1], [2, 3]], "p": [[0], [0, 2]]}),
             tfl.encode_sequence_example({}, {"v": [[1], [2, 3]], "p": [[0], [0, last_id]]})]
    assert tfl.parse_sequence_example(steps[:1], None, spec)[1]["r"].to_list() == [[[[1]], [[2], [], [3]]]]
    with pytest.raises(FeatureSpecError, match=f"would make {last_id + 1} rows of 2 values") as info:
        tfl.parse_sequence_example(steps, None, spec)  # a step's rows: bounded as a record's are
    assert info.value.index == 1


@pytest.mark.parametrize("bytes_output", ["object", "column"])
def test_ragged_partitions_of_bytes(backend, bytes_output):
    """UniformRowLength innermost reshapes the values, bytes ones too (as TF's dense inner
    dimension)."""
    record = tfl.encode_example({"v": [b"a", b"b", b"c", b"d"], "n": [1, 1]})
    spec = {"r": tfl.RaggedFeature(bytes, value_key="v", partitions=[Ragged.RowLengths("n"), Ragged.UniformRowLength(2)])}
    got = tfl.parse_example([record], spec, bytes_output=bytes_output)["r"]
    assert got.to_list() == [[[[b"a", b"b"]], [[b"c", b"d"]]]] and got.values.values.shape == (2, 2)


def test_ragged_partition_specs():
    """validate=True was refused; TF's spellings of partitions are taken, others refused."""
    spec = tfl.RaggedFeature(np.float32, "v", [Ragged.ValueRowIds("i"), Ragged.UniformRowLength(np.int64(2))],
                             validate=True)
    assert spec.partitions == (Ragged.ValueRowIds("i"), Ragged.UniformRowLength(2)) and spec.partition_keys == ["i"]
    assert spec == tfl.RaggedFeature(np.float32, "v", (Ragged.ValueRowIds("i"), Ragged.UniformRowLength(2)), validate=1)
    assert spec.to_tf() == ("tf.io.RaggedFeature(tf.float32, value_key='v', partitions=[tf.io.RaggedFeature."
                            "ValueRowIds('i'), tf.io.RaggedFeature.UniformRowLength(2)], row_splits_dtype=tf.int32)")
    scope = {}
    exec(tfl.Schema(x=spec).to_code(), scope)
    assert scope["features"] == {"x": spec}
    for bad in (lambda: [Ragged.UniformRowLength(0)], lambda: [Ragged.RowSplits(3)], lambda: ["s"],
                lambda: Ragged.RowSplits("s"), lambda: [("s",)], lambda: [Ragged.UniformRowLength("2")]):
        with pytest.raises(FeatureSpecError):
            tfl.RaggedFeature(np.int64, partitions=bad())


@pytest.mark.parametrize("index_key, size, printed", [
    ("i", [5], "'i', 'v', tf.float32, 5,"), (["i"], 5, "['i'], 'v', tf.float32, [5],"),
    (("i", "j"), (5, 3), "['i', 'j'], 'v', tf.float32, [5, 3],"),
])
def test_sparse_to_tf_pairs_one_index_name_with_an_int_size(index_key, size, printed):
    """TensorFlow refuses a list size beside one index name and an int beside a list."""
    assert f"tf.io.SparseFeature({printed} already_sorted=False)" == tfl.SparseFeature(index_key, "v", np.float32,
                                                                                        size).to_tf()


_KINDS = ["RowSplits", "RowLengths", "RowStarts", "RowLimits", "ValueRowIds", "UniformRowLength"]
_IDS = st.lists(st.one_of(st.integers(-2, 6), st.sampled_from([-2**63, 2**63 - 1, 2**31, -2**31])), max_size=5)


@given(partitions=st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(1, 3)), min_size=1, max_size=3),
       records=st.lists(st.tuples(st.integers(0, 6), st.lists(_IDS, min_size=3, max_size=3)), min_size=1, max_size=3))
def test_any_partition_values_give_rows_or_a_feature_spec_error(backend, partitions, records):
    """Partition features of any values (past int64's ends too) parse to rows that hold
    every value once, in order, or raise FeatureSpecError naming a record."""
    spec = {"r": tfl.RaggedFeature(np.int64, "v", [getattr(Ragged, kind)(arg if kind == "UniformRowLength" else f"p{k}")
                                                   for k, (kind, arg) in enumerate(partitions)])}
    encoded = [tfl.encode_example({"v": np.arange(n, dtype=np.int64)} |
                                  {f"p{k}": np.array(ids, np.int64) for k, ids in enumerate(parts)})
               for n, parts in records]
    try:
        got = tfl.parse_example(encoded, spec)["r"]
    except FeatureSpecError as exc:
        assert 0 <= exc.index < len(records)
        return
    def flat(row):
        return [v for part in row for v in flat(part)] if isinstance(row, list) else [row]
    assert [flat(row) for row in got.to_list()] == [list(range(n)) for n, _ in records]


def test_tf_code_of_a_raw_tensor_feature_before_others_compiles():
    """RawTensorFeature.to_tf() ended in a comment, which took the comma after it: a spec
    with another feature after it printed TensorFlow code that was a SyntaxError."""
    schema = tfl.Schema(img=tfl.RawTensorFeature([2, 3], ">f4"), y=tfl.FixedLenFeature([], np.int64))
    code = schema.to_tf_code()
    compile(code, "features.py", "exec")
    assert "    'img': tf.io.FixedLenFeature([], tf.string),  # then tf.io.decode_raw (data >f4) and reshape to [2, 3]" \
        in code.splitlines()


@pytest.mark.parametrize("spec, message", [
    ({"r": tfl.RaggedFeature(np.float32, value_key="i"), "i": tfl.FixedLenFeature([2], np.int64)},
     "feature 'i' reads 'i' as int64, but feature 'r' reads it as float32"),
    ({"s": tfl.SparseFeature("i", "v", np.float32, 4), "i": tfl.VarLenFeature(np.float32)},
     "feature 'i' reads 'i' as float32, but feature 's' reads it as int64"),
    ({"r": tfl.RaggedFeature(np.int64, "v", [Ragged.RowLengths("n")]), "n": tfl.VarLenFeature(bytes)},
     "feature 'n' reads 'n' as string, but feature 'r' reads it as int64"),
])
def test_a_key_read_as_two_dtypes_is_refused_with_the_spec(backend, spec, message):
    """Only the records holding the key failed, blaming the key for one spec's dtype
    ("feature 'i': data type int64 but the spec expects float32" beside an int64 spec 'i');
    records without it, or no records, parsed."""
    with pytest.raises(FeatureSpecError, match=message):
        tfl.parse_example([], spec)
    with pytest.raises(FeatureSpecError, match=message):
        tfl.parse_sequence_example([], spec)
