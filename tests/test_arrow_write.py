"""tfrecord_lite.arrow's writing side (write_arrow, in _arrow_write): Arrow -> Examples
byte-identical to encode_examples, Arrow -> TFRecord -> Arrow round trips, the column types
taken and refused, nulls, tensors, and the data it takes (Tables, batches, Hugging Face
Datasets, pyarrow datasets)."""

from math import prod

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordReader, TFRecordWriter
from tfrecord_lite.arrow import read_table, write_arrow
from tfrecord_lite.errors import FeatureSpecError

from .test_arrow import blobs, floats, ints

# -- writing -------------------------------------------------------------------------------

@st.composite
def tables(draw, nulls=True):
    """A table of every column type write_arrow takes, with the values encode_examples gets
    for the same data (None where a row is null)."""
    n = draw(st.integers(0, 6))
    cols, plain = {}, {}
    nullable = (lambda s: st.none() | s) if nulls else (lambda s: s)

    def column(name, strategy, type_, as_plain):
        values = draw(st.lists(strategy, min_size=n, max_size=n))
        cols[name] = pa.array(values, type_)
        plain[name] = [None if v is None else as_plain(v) for v in values]

    column("i", ints, pa.int64(), lambda v: np.int64(v))
    column("ni", nullable(st.integers(-2**31, 2**31 - 1)), pa.int32(), lambda v: np.int64(v))
    column("u8", st.integers(0, 255), pa.uint8(), lambda v: np.int64(v))
    column("f", floats, pa.float32(), lambda v: np.float32(v))
    column("d", st.floats(-1e30, 1e30), pa.float64(), lambda v: np.float32(v))
    column("flag", st.booleans(), pa.bool_(), lambda v: np.int64(v))
    column("nflag", nullable(st.booleans()), pa.bool_(), lambda v: np.int64(v))
    column("b", nullable(blobs), pa.binary(), lambda v: v)
    column("s", nullable(st.text(max_size=5)), pa.large_string(), lambda v: v.encode())
    column("fx", st.lists(floats, min_size=2, max_size=2), pa.list_(pa.float32(), 2),
           lambda v: np.array(v, np.float32))
    column("fb", st.lists(blobs, min_size=2, max_size=2), pa.list_(pa.binary(), 2), lambda v: v)
    column("nfx", nullable(st.lists(floats, min_size=2, max_size=2)), pa.list_(pa.float32(), 2),
           lambda v: np.array(v, np.float32))
    column("li", nullable(st.lists(ints, max_size=3)), pa.large_list(pa.int64()), lambda v: np.array(v, np.int64))
    column("lb", nullable(st.lists(blobs, max_size=3)), pa.list_(pa.binary()), lambda v: v)
    column("lf", nullable(st.lists(st.lists(floats, min_size=2, max_size=2), max_size=2)),
           pa.list_(pa.list_(pa.float32(), 2)), lambda v: np.array(v, np.float32).reshape(-1))
    names = draw(st.permutations(list(cols)))
    return pa.table({k: cols[k] for k in names}), {k: plain[k] for k in names}, n


@settings(max_examples=60)
@given(case=tables(nulls=False), deterministic=st.booleans(), chunk=st.integers(1, 4))
def test_write_arrow_is_byte_identical_to_encode_examples(backend, tmp_path_factory, case, deterministic, chunk):
    table, plain, n = case
    path = str(tmp_path_factory.mktemp("w") / "t.tfrecord")
    assert write_arrow(table.to_batches(max_chunksize=chunk) if n else table, path,
                       deterministic=deterministic) == n
    columns = {k: np.array(v) if k in ("i", "ni", "u8", "f", "d", "flag", "nflag") else v for k, v in plain.items()}
    columns["lb"] = [v or np.empty(0, object) for v in columns["lb"]]  # typed: an empty bytes_list
    expected = tfl.encode_examples(columns, deterministic) if n else []
    assert list(TFRecordReader(path)) == expected
    assert backend.name == tfl.implementation


@settings(max_examples=60)
@given(case=tables())
def test_arrow_tfrecord_arrow_round_trip(backend, tmp_path_factory, case):
    table, plain, n = case
    path = str(tmp_path_factory.mktemp("r") / "t.tfrecord")
    write_arrow(table, path)
    spec = {"i": tfl.FixedLenFeature([], np.int64), "u8": tfl.FixedLenFeature([], np.int64),
            "f": tfl.FixedLenFeature([], np.float32), "d": tfl.FixedLenFeature([], np.float32),
            "flag": tfl.FixedLenFeature([], np.int64), "nflag": tfl.VarLenFeature(np.int64),
            "b": tfl.VarLenFeature(bytes),
            "ni": tfl.VarLenFeature(np.int64), "nfx": tfl.VarLenFeature(np.float32),
            "s": tfl.RaggedFeature(bytes), "fx": tfl.FixedLenFeature([2], np.float32),
            "fb": tfl.FixedLenFeature([2], bytes), "li": tfl.VarLenFeature(np.int64),
            "lb": tfl.VarLenFeature(bytes),
            "lf": tfl.FixedLenSequenceFeature([2], np.float32, allow_missing=True)}
    back = read_table(path, {k: spec[k] for k in table.column_names})
    expected = {}
    for name, values in plain.items():
        if name in ("b", "s"):
            expected[name] = [None if v is None else [v] for v in values]
        elif name in ("ni", "nflag"):
            expected[name] = [None if v is None else [int(v)] for v in values]
        elif name == "lf":
            expected[name] = [None if v is None else v.reshape(-1, 2).tolist() for v in values]
        else:
            expected[name] = [v if v is None or isinstance(v, (list, bytes)) else v.tolist() for v in values]
    assert back.to_pydict() == expected
    # Arrow -> TFRecord -> Arrow -> TFRecord gives the same file
    again = str(tmp_path_factory.mktemp("r") / "again.tfrecord")
    write_arrow(back, again)
    assert back.equals(read_table(again, {k: spec[k] for k in table.column_names}))
    assert backend.name == tfl.implementation


def test_write_arrow_shards_and_dictionary_columns(backend, tmp_path):
    table = pa.table({"k": pa.array(["a", "b", "a", None]).dictionary_encode(), "v": [1, 2, 3, 4]})
    (tmp_path / "out").mkdir()
    assert write_arrow(table, str(tmp_path / "out" / "data"), num_shards=2) == 4
    shards = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in shards] == ["data-00000-of-00002.tfrecord", "data-00001-of-00002.tfrecord"]
    back = read_table([str(p) for p in shards], {"k": tfl.VarLenFeature(bytes), "v": tfl.FixedLenFeature([], np.int64)})
    assert sorted(zip(back.column("v").to_pylist(), back.column("k").to_pylist())) == [
        (1, [b"a"]), (2, [b"b"]), (3, [b"a"]), (4, None)]
    # A null may be a dictionary entry (null_encoding="encode"), which the indices do not
    # count as null: such rows were written with a placeholder ("", 0) instead of no feature.
    import pyarrow.compute as pc

    path = str(tmp_path / "encoded.tfrecord")
    for values in (["a", None, "b"], [1, None, 2]):
        write_arrow(pa.table({"k": pc.dictionary_encode(pa.array(values), null_encoding="encode")}), path)
        assert list(TFRecordReader(path)) == [tfl.encode_example({} if v is None else {"k": [v]}) for v in values]
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("column, type_name, hint", [
    (pa.array([{"a": 1}]), "struct", "table.flatten()"),
    (pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())), "map", "cast it"),
    (pa.array([0], pa.timestamp("s")), "timestamp", "'bad' as int64 (units since the epoch) or string"),
    (pa.array([[0]], pa.list_(pa.date32())), "date32", "'bad' as int32 (days since the epoch) or string"),
    (pa.array([1], pa.decimal128(3, 1)), "decimal", "'bad' as float64 or string"),
    (pa.array([[[1]]]), "list<item: list", "flatten each row"),
    (pa.array([[[1]]], pa.list_view(pa.list_(pa.int64()))), "list_view<item: list", "flatten each row"),
])
def test_write_arrow_rejects_what_an_example_cannot_hold(tmp_path, column, type_name, hint):
    """The hint was one for every type ('cast it to numbers, strings or binary'): it names
    what to do with the type at hand (a timestamp as int64, a struct flattened...)."""
    path = tmp_path / "x.tfrecord"
    with pytest.raises(FeatureSpecError, match=f"column 'bad'.*{type_name}") as info:
        write_arrow(pa.table({"ok": [1], "bad": column}), str(path))
    assert hint in info.value.hint and not path.exists()
    with pytest.raises(FeatureSpecError, match="column 'l'.*null value"):
        write_arrow(pa.table({"l": pa.array([[1, None]])}), str(path))
    assert not path.exists()


VIEWS = {  # a column of each other Arrow spelling of strings, binary and lists: the plain one
    "string_view": (["x", None, "", "yz"], pa.string_view(), pa.string()),
    "binary_view": ([b"a", b"", None, b"bc"], pa.binary_view(), pa.binary()),
    "fixed_size_binary": ([b"ab", None, b"cd", b"ef"], pa.binary(2), pa.binary()),
    "list_view": ([[1, 2], [], None, [3]], pa.list_view(pa.int64()), pa.list_(pa.int64())),
    "large_list_view<string_view>": ([["p"], None, ["q", "r"], []], pa.large_list_view(pa.string_view()),
                                     pa.list_(pa.string())),
    "list<fixed_size_binary>": ([[b"xy"], [], [b"zz", b"ww"], None], pa.list_(pa.binary(2)), pa.list_(pa.binary())),
    "fixed_size_list<string_view>": ([["a", "b"], None, ["c", "d"], ["", "e"]], pa.list_(pa.string_view(), 2),
                                     pa.list_(pa.string(), 2)),
}


@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_write_arrow_takes_views_and_fixed_size_binary_as_their_plain_types(backend, tmp_path, kind):
    """Views (Arrow's newer layouts, which polars and DuckDB may export) and fixed-size
    binary hold the same values as strings, binary and lists: the same records."""
    values, view, plain = VIEWS[kind]
    sliced = pa.table({"c": pa.array(values, view), "i": np.arange(4)}).slice(1)  # offsets that do not start at 0
    write_arrow(sliced, tmp_path / "view.tfrecord")
    write_arrow(pa.table({"c": pa.array(values[1:], plain), "i": np.arange(1, 4)}), tmp_path / "plain.tfrecord")
    assert list(TFRecordReader(tmp_path / "view.tfrecord")) == list(TFRecordReader(tmp_path / "plain.tfrecord"))


def test_write_arrow_writes_a_column_without_values_as_features_of_no_kind(backend, tmp_path):
    """A column of type null (Ray types a block's all-None column so, pandas an all-None
    object column): no record gets it, as no record gets a null row's feature. A list<null>
    column (only empty lists and nulls: Ray types a block's empty lists so) was left out of
    every record too, so its [] rows read back as null: an empty list is now a Feature of no
    kind, as encode_example writes [], which reads back as [] and parses as any type."""
    table = pa.table({"n": pa.array([None, None, None], pa.null()), "i": [1, 2, 3],
                      "ln": pa.array([[], None, []], pa.list_(pa.null())),
                      "fz": pa.array([[], None, []], pa.list_(pa.null(), 0))})
    write_arrow(table, tmp_path / "t.tfrecord")
    assert list(TFRecordReader(tmp_path / "t.tfrecord")) == [
        tfl.encode_example({"i": 1, "ln": [], "fz": []}), tfl.encode_example({"i": 2}),
        tfl.encode_example({"i": 3, "ln": [], "fz": []})]
    spec = {"ln": tfl.VarLenFeature("int64"), "fz": tfl.VarLenFeature(bytes)}
    assert read_table(tmp_path / "t.tfrecord", spec).to_pydict() == {"ln": [[], None, []], "fz": [[], None, []]}
    assert write_arrow(pa.table({"n": pa.array([None], pa.null())}), tmp_path / "n.tfrecord") == 1
    assert list(TFRecordReader(tmp_path / "n.tfrecord")) == [tfl.encode_example({})]
    with pytest.raises(FeatureSpecError, match="'ln': a list holds a null value"):
        write_arrow(pa.table({"ln": pa.array([[], [None]], pa.list_(pa.null()))}), tmp_path / "bad.tfrecord")
    assert not (tmp_path / "bad.tfrecord").exists()


def test_write_arrow_leaves_out_an_unnamed_pandas_index(backend, tmp_path):
    """Table.from_pandas of a filtered or sorted frame adds its unnamed index as a column
    __index_level_0__, which was written as a feature of every record. Row labels are not
    data (pandas' to_dict("records") and Ray drop them): they are left out now. A named
    index is a column like any other, and is written."""
    import pandas as pd
    df = pd.DataFrame({"a": [1, 2, 3, 4], "b": ["w", "x", "y", "z"]})
    table = pa.Table.from_pandas(df[df.a != 2].sort_values("b", ascending=False))
    assert "__index_level_0__" in table.schema.names
    write_arrow(table, tmp_path / "f.tfrecord")
    assert list(TFRecordReader(tmp_path / "f.tfrecord")) == tfl.encode_examples(
        {"a": np.array([4, 3, 1]), "b": [b"z", b"y", b"w"]})
    named = pa.Table.from_pandas(df.set_index(pd.Index([3, 1, 0, 2], name="id")))
    write_arrow(named.to_batches(max_chunksize=3), tmp_path / "n.tfrecord")
    assert read_table(tmp_path / "n.tfrecord").to_pydict() == {
        "a": [1, 2, 3, 4], "b": [b"w", b"x", b"y", b"z"], "id": [3, 1, 0, 2]}
    # a column of that name in a table not from pandas is data
    write_arrow(pa.table({"__index_level_0__": [5]}), tmp_path / "p.tfrecord")
    assert read_table(tmp_path / "p.tfrecord").to_pydict() == {"__index_level_0__": [5]}


def test_a_raw_tensor_column_is_written_back_as_its_raw_bytes(backend, tmp_path):
    """A RawTensorFeature read through Arrow (a fixed_size_list of its dtype) was written
    back by write_arrow as numbers: uint8 and bool as int64_list, float16 as float_list, so
    the copy no longer parsed with the spec it was read with. Its field carries the spec's
    dtype (byte order included) now, and write_arrow writes the raw bytes read, also in the
    records where another column is null; values of another dtype are written as numbers."""
    from tfrecord_lite.arrow import RAW_DTYPE

    spec = {"t": tfl.RawTensorFeature([2, 3], ">f2"), "u": tfl.RawTensorFeature([4], np.uint8),
            "b": tfl.RawTensorFeature([2], bool), "i": tfl.VarLenFeature("int64")}
    records = [tfl.encode_example({"t": (np.arange(6, dtype=">f2") * i).tobytes(), "u": bytes([1, 2, 3, i]),
                                   "b": np.array([True, i % 2 == 0]).tobytes(), **({"i": [i]} if i % 2 else {})})
               for i in range(5)]
    with TFRecordWriter(tmp_path / "a.tfrecord") as w:
        w.write_many(records)
    table = read_table(tmp_path / "a.tfrecord", spec)
    assert table.schema.field("u").metadata == {RAW_DTYPE: b"|u1"}
    write_arrow(table, tmp_path / "b.tfrecord")
    assert list(TFRecordReader(tmp_path / "b.tfrecord")) == records
    assert read_table(tmp_path / "b.tfrecord", spec).equals(table)
    floats = table.set_column(1, table.schema.field("u").with_type(pa.list_(pa.float32(), 4)),
                              table.column("u").cast(pa.list_(pa.float32(), 4)))
    write_arrow(floats.select(["u"]), tmp_path / "c.tfrecord")
    assert list(TFRecordReader(tmp_path / "c.tfrecord"))[4] == tfl.encode_example({"u": np.float32([1, 2, 3, 4])})


def test_write_arrow_refuses_a_column_whose_kind_changes_between_batches(backend, tmp_path):
    """Batches whose column was int64 in one and string in the next were written as they
    came: records of int64_list, then bytes_list, which no one spec parses. The write is now
    refused, naming the column and the rows, and nothing is left; types of one kind (int8 and
    int64, bool; float16 and double) and columns of no values go together."""
    path = tmp_path / "x.tfrecord"
    with pytest.raises(FeatureSpecError, match="column 'a' is int64 values at row 0 but bytes values at row 2") as info:
        write_arrow([pa.record_batch({"a": [1, 2]}), pa.record_batch({"a": ["s"]})], path)
    assert info.value.path == str(path) and "cast" in info.value.hint and not path.exists()
    with pytest.raises(FeatureSpecError, match="'f' is float values at row 0 but int64"):
        write_arrow([pa.record_batch({"f": [1.5]}), pa.record_batch({"f": pa.array([], pa.string())}),
                     pa.record_batch({"f": [[1]]})], path)
    batches = [pa.record_batch({"a": pa.array([1], pa.int8()), "f": pa.array([1.5], pa.float16()), "n": pa.nulls(1)}),
               pa.record_batch({"a": [[True]], "f": [2.5], "n": pa.array([[]], pa.list_(pa.null()))}),
               pa.record_batch({"a": [3], "f": [[3.5]], "n": [b"x"]})]
    assert write_arrow(batches, path) == 3
    assert read_table(path, {"a": tfl.VarLenFeature("int64"), "n": tfl.VarLenFeature(bytes)}).to_pydict() == {
        "a": [[1], [1], [3]], "n": [None, [], [b"x"]]}


def test_write_arrow_rejects_a_null_fixed_size_item_inside_a_list(backend, tmp_path):
    # A null item whose values are valid (made with a mask, as compute kernels do): it was
    # written as those values, [[1, 2], None] as the four floats 1, 2, 3, 4.
    items = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.float32()), 2, mask=pa.array([False, True]))
    words = pa.FixedSizeListArray.from_arrays(pa.array([b"a", b"b", b"c", b"d"]), 2, mask=pa.array([True, False]))
    path = tmp_path / "x.tfrecord"
    for column in (pa.LargeListArray.from_arrays(pa.array([0, 2]), items), pa.FixedSizeListArray.from_arrays(items, 2),
                   pa.FixedSizeListArray.from_arrays(words, 2)):
        with pytest.raises(FeatureSpecError, match="column 'c'.*null value"):
            write_arrow(pa.table({"c": column}), str(path))
        assert not path.exists()
    # a null row of such a column is still a record without the feature
    assert write_arrow(pa.table({"c": items}), str(path)) == 2
    first, second = tfl.decode_examples(list(TFRecordReader(str(path))))
    assert first["c"].tolist() == [1, 2] and second == {}
    assert backend.name == tfl.implementation


def test_write_arrow_takes_a_null_list_row_whatever_its_slot_holds(backend, tmp_path):
    # A null row's slot held a null value ([1], null over the values 1, None, 2): refused as
    # "a list holds a null value", though the row is written without the feature anyway.
    path = str(tmp_path / "x.tfrecord")
    items = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, None, 4, 5, 6], pa.float32()), 2)
    for column, want in (
        (pa.ListArray.from_arrays(pa.array([0, 1, 3, 3]), pa.array([1, None, 2]), mask=pa.array([False, True, False])),
         [[1], None, []]),
        (pa.LargeListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int64()), items, mask=pa.array([False, True, False])),
         [[1, 2], None, [5, 6]]),
        (pa.array([[b"a"], None, [b"b", b"c"]], pa.list_(pa.binary())).slice(1), [None, [b"b", b"c"]]),
    ):
        assert write_arrow(pa.table({"c": column}), path) == len(want)
        got = [e.get("c") for e in tfl.decode_examples(list(TFRecordReader(path)))]
        assert [None if v is None else list(v) for v in got] == want
    with pytest.raises(FeatureSpecError, match="column 'c'.*null value"):  # in a row that is not null
        write_arrow(pa.table({"c": pa.ListArray.from_arrays(pa.array([0, 2]), pa.array([1, None]))}), path)
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("data, what", [
    (None, "not NoneType"), ({"a": [1]}, "iterable of str .a dict"),
    ([pa.record_batch({"a": [1]}), {"a": [2]}], "iterable of dict .a list"),
])
def test_write_arrow_refuses_what_is_not_arrow_data(backend, tmp_path, data, what):
    # a dict or a pandas DataFrame was iterated (their keys) into AttributeError: 'str'
    # object has no attribute 'schema'; None was a bare TypeError, and so was a polars
    # LazyFrame (iterated by __getitem__)
    path = tmp_path / "x.tfrecord"
    with pytest.raises(tfl.ArgumentTypeError, match=f"Table, a RecordBatch.*{what}") as info:
        write_arrow(data, str(path))
    assert "from_pandas" in info.value.hint and not path.exists()
    with pytest.raises(tfl.ArgumentTypeError, match="iterable of str .a DataFrame"):
        write_arrow(pa.table({"a": [1]}).to_pandas(), str(path))

    class Lazy:  # polars' LazyFrame: __getitem__ but no __iter__, which iter() walked into
        def __getitem__(self, i):  # "TypeError: LazyFrame is not subscriptable"
            raise TypeError(f"{type(self).__name__} is not subscriptable")

    with pytest.raises(tfl.ArgumentTypeError, match="not Lazy") as info:
        write_arrow(Lazy(), str(path))
    assert ".collect()" in info.value.hint and not path.exists()
    # Tables in an iterable are taken, as a RecordBatchReader is
    assert write_arrow([pa.table({"a": [1, 2]}), pa.record_batch({"a": [3]})], str(path)) == 3
    assert write_arrow(pa.table({"a": [1, 2]}).to_reader(), str(path)) == 2
    assert backend.name == tfl.implementation


def test_write_arrow_streams_what_has_to_batches(backend, tmp_path):
    """A pyarrow dataset or scanner (Parquet files, say) and a Hugging Face Dataset's .data
    were refused ('not FileSystemDataset'; 'an iterable of ChunkedArray (a InMemoryTable)')
    with a hint that fit neither: their to_batches() is written, a batch at a time."""
    import datasets
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    table = pa.table({"id": [1, 2, 3], "s": ["a", None, "c"]})
    pq.write_table(table, str(tmp_path / "t.parquet"), row_group_size=2)
    want = tfl.encode_examples({"id": np.array([1, 2, 3])})
    want[0], want[2] = (tfl.encode_example({"id": i, "s": [s]}) for i, s in ((1, "a"), (3, "c")))
    path = str(tmp_path / "x.tfrecord")
    dataset = pads.dataset(str(tmp_path / "t.parquet"))
    for data in (dataset, dataset.scanner(columns=["id", "s"]), datasets.Dataset(table).data):
        assert write_arrow(data, path) == 3
        assert list(TFRecordReader(path)) == want, type(data).__name__
    assert backend.name == tfl.implementation


def test_write_arrow_writes_a_hugging_face_datasets_rows_not_its_table(backend, tmp_path):
    """A Hugging Face Dataset was refused ('an iterable of dict'), with a hint to pass its
    .data, which is the table under the indices select, filter and shuffle leave: every
    stored row was written, in stored order. The Dataset (or IterableDataset) itself is
    taken now, its rows as it holds them."""
    import datasets

    ds = datasets.Dataset.from_dict({"a": list(range(10)), "t": [str(i) for i in range(10)]})
    kept = ds.filter(lambda r: r["a"] % 3 == 0).shuffle(seed=3)
    assert sorted(kept["a"]) == [0, 3, 6, 9] and kept.data.num_rows == 10
    path = tmp_path / "x.tfrecord"
    assert write_arrow(kept, path) == 4
    assert read_table(path).to_pydict() == {"a": list(kept["a"]), "t": [str(a).encode() for a in kept["a"]]}
    streamed = ds.to_iterable_dataset(num_shards=2).filter(lambda r: r["a"] > 6)
    assert write_arrow(streamed, path) == 3 and read_table(path).column("a").to_pylist() == [7, 8, 9]
    with pytest.raises(tfl.ArgumentTypeError, match="iterable of str .a DatasetDict"):
        write_arrow(datasets.DatasetDict({"train": ds}), path)


def test_write_arrow_takes_fixed_shape_tensor_columns(backend, tmp_path):
    """Arrow's fixed_shape_tensor columns were refused ('Arrow type extension<arrow.fixed_shape_
    tensor...> cannot be held'); each row is its values flattened, as encode_examples writes
    a shaped numpy array. Other extension types are still refused by name."""
    path = str(tmp_path / "x.tfrecord")
    values = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    assert write_arrow(pa.table({"t": pa.FixedShapeTensorArray.from_numpy_ndarray(values)}), path) == 3
    assert list(TFRecordReader(path)) == tfl.encode_examples({"t": values})

    class Opaque(pa.ExtensionType):
        def __init__(self):
            super().__init__(pa.int64(), "test.opaque")

        def __arrow_ext_serialize__(self):
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return cls()

    opaque = pa.ExtensionArray.from_storage(Opaque(), pa.array([1, 2]))
    with pytest.raises(FeatureSpecError, match="column 'o': Arrow type extension<test.opaque"):
        write_arrow(pa.table({"o": opaque}), path)
    assert backend.name == tfl.implementation


def test_write_arrow_encodes_lists_of_one_length_as_one_array(backend, tmp_path, monkeypatch):
    """A tensor column (Ray's are stored as lists, every row as long) was cut into a numpy
    array per row for the encoder: 15 to 20 times slower than the same values as a
    fixed-size list. Lists of one length go to it as one (n, k) array, as fixed-size lists
    do, and give the same records; ragged ones and ones with nulls are still cut per row."""
    import tfrecord_lite._arrow_write as tfl_arrow_write

    seen, real = [], tfl_arrow_write.encode_examples
    monkeypatch.setattr(tfl_arrow_write, "encode_examples",
                        lambda columns, *a: seen.append({k: type(v) for k, v in columns.items()}) or real(columns, *a))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    path = str(tmp_path / "t.tfrecord")
    lists = pa.array(list(x), pa.large_list(pa.float32()))
    for column in (lists, lists[1:], pa.array([[1, 2], [3]]), pa.array([[1], None, [2]])):
        write_arrow(pa.table({"x": column}), path)
        assert list(TFRecordReader(path)) == [tfl.encode_example({} if v is None else {"x": v})
                                              for v in column.to_pylist()]
    assert [s["x"] for s in seen] == [np.ndarray, np.ndarray, list, list]
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("shape, permutation", [((3, 2), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (1, 2, 0))])
def test_write_arrow_writes_a_permuted_tensor_in_its_logical_order(backend, tmp_path, shape, permutation):
    """A fixed_shape_tensor whose permutation is not the identity (from_numpy_ndarray of a
    transposed array makes one) was written in storage order: each row's values silently
    transposed. Rows are written in the row-major order of their logical shape (logical
    dimension i is physical dimension permutation[i], as Arrow's canonical extension
    defines it), as encode_examples writes the numpy array; a null row omits the feature."""
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2 * prod(shape))), prod(shape))
    tensors = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int64(), shape, permutation=permutation),
                                             storage)
    logical = np.arange(2 * prod(shape)).reshape(2, *shape).transpose(0, *(1 + np.array(permutation)))
    path = str(tmp_path / "t.tfrecord")
    assert write_arrow(pa.table({"t": tensors}), path) == 2
    assert list(TFRecordReader(path)) == tfl.encode_examples({"t": logical})
    if len(shape) == 2:  # a transposed matrix, as a user makes it (pyarrow agrees on 2 dimensions only)
        np.testing.assert_array_equal(tensors.to_numpy_ndarray(), logical)
        matrix = np.arange(12).reshape(2, 2, 3).transpose(0, 2, 1)
        assert write_arrow(pa.table({"t": pa.FixedShapeTensorArray.from_numpy_ndarray(matrix)}), path) == 2
        assert list(TFRecordReader(path)) == tfl.encode_examples({"t": matrix})
    with_null = pa.ExtensionArray.from_storage(tensors.type, pa.FixedSizeListArray.from_arrays(
        storage.values, prod(shape), mask=pa.array([True, False])))
    write_arrow(pa.table({"t": with_null}), path)
    assert list(TFRecordReader(path)) == [tfl.encode_example({}), tfl.encode_example({"t": logical[1]})]
    assert backend.name == tfl.implementation
