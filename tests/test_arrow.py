"""tfrecord_lite.arrow: Examples -> pyarrow RecordBatch/Table (to_arrow, parse_example
output="arrow", TFRecordDataset output="arrow", read_table), Arrow -> Examples (write_arrow,
byte-identical to encode_examples), round trips, and the pandas / polars / datasets hand-offs."""

import subprocess
import sys
from math import prod

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import TFRecordDataset, TFRecordReader, TFRecordWriter
from tfrecord_lite.arrow import arrow_schema, read_table, sequence_to_arrow, to_arrow, write_arrow
from tfrecord_lite.errors import FeatureSpecError, TFRecordError

from ._records import Overlap
from .test_example import BAD_KINDS, assert_first_bad_record_named

floats = st.floats(width=32, allow_nan=False)
ints = st.integers(-2**63, 2**63 - 1)
blobs = st.binary(max_size=10)
VALUES = {"float32": floats, "int64": ints, "string": blobs}


@st.composite
def spec_and_records(draw):
    """A random spec of every type Arrow output takes, and records fitting it."""
    spec, makers = {}, []
    for i in range(draw(st.integers(1, 5))):
        name, dtype = f"f{i}", draw(st.sampled_from(list(VALUES)))
        what = draw(st.sampled_from(["fixed", "varlen", "ragged", "sequence", "raw"]))
        if what == "fixed":
            shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
            if not prod(shape):  # no default (TF: one of no values is none), and an empty list
                dtype, default = "int64", None  # of bytes has no kind: it would be absent
            else:
                default = draw(st.none() | st.lists(VALUES[dtype], min_size=prod(shape), max_size=prod(shape)))
            spec[name] = tfl.FixedLenFeature(shape, dtype, default_value=default)
            makers.append((name, dtype, prod(shape), default is not None, 1))
        elif what == "sequence":
            k = draw(st.integers(1, 2))
            spec[name] = tfl.FixedLenSequenceFeature([k], dtype, allow_missing=True)
            makers.append((name, dtype, None, True, k))
        elif what == "raw":  # bools are bits in Arrow, '>i4' needs a swap, 0 values no lists
            dtype = np.dtype(draw(st.sampled_from([np.int16, np.bool_, ">i4"])))
            shape = draw(st.sampled_from([(2,), (0,), (2, 1)]))
            spec[name] = tfl.RawTensorFeature(shape, dtype, default_value=1)
            makers.append((name, dtype, prod(shape), True, 1))
        else:
            spec[name] = tfl.VarLenFeature(dtype) if what == "varlen" else tfl.RaggedFeature(dtype)
            makers.append((name, dtype, None, True, 1))
    records = []
    for _ in range(draw(st.integers(0, 6))):
        mapping = {}
        for name, dtype, size, optional, k in makers:
            if optional and draw(st.booleans()):
                continue
            if isinstance(dtype, np.dtype):
                values = draw(st.lists(st.integers(0 if dtype == np.bool_ else -99, 99), min_size=size, max_size=size))
                mapping[name] = np.array(values, dtype).tobytes()
            elif size is not None:
                mapping[name] = draw(st.lists(VALUES[dtype], min_size=size, max_size=size))
            else:
                mapping[name] = draw(st.lists(VALUES[dtype], max_size=3).map(lambda v, k=k: v * k))
            if dtype == "float32":
                mapping[name] = np.array(mapping[name], np.float32)
            elif dtype == "int64":
                mapping[name] = np.array(mapping[name], np.int64)
        records.append(tfl.encode_example(mapping))
    return spec, records


def _expected_rows(spec, records):
    """Column name -> per-record Python values, from parse_example and decode_examples."""
    parsed = tfl.parse_example(records, spec)
    decoded = tfl.decode_examples(records)
    out = {}
    for name, spec_ in spec.items():
        if isinstance(spec_, (tfl.FixedLenFeature, tfl.RawTensorFeature)):
            out[name] = parsed[name].tolist()
            continue
        rows = []
        for record in decoded:
            value = record.get(name)
            if value is not None:
                value = list(value) if isinstance(value, list) else value.tolist()
                if isinstance(spec_, tfl.FixedLenSequenceFeature):
                    k = spec_.shape[0]
                    value = [value[i:i + k] for i in range(0, len(value), k)]
            rows.append(value)
        out[name] = rows
    return out


@settings(max_examples=120)
@given(case=spec_and_records())
def test_to_arrow_holds_what_parse_example_gives(backend, case):
    spec, records = case
    batch = to_arrow(records, spec)
    assert batch.schema == arrow_schema(spec) and batch.num_rows == len(records)
    batch.validate(full=True)
    assert batch.to_pydict() == _expected_rows(spec, records)
    assert parse_arrow(records, spec).equals(batch)
    assert backend.name == tfl.implementation


def parse_arrow(records, spec):
    return tfl.parse_example(records, spec, output="arrow")


def test_types_nulls_and_defaults(backend):
    records = [tfl.encode_example({"x": 1.5, "v": [1, 2], "s": b"ab"}), tfl.encode_example({"v": []})]
    spec = {"x": tfl.FixedLenFeature([], np.float32, default_value=-1.0), "v": tfl.VarLenFeature(np.int64),
            "s": tfl.RaggedFeature(bytes), "i": tfl.FixedLenFeature([2], bytes, default_value=[b"p", b"q"])}
    batch = to_arrow(records, spec)
    assert batch.schema.field("x").type == pa.float32() and not batch.schema.field("x").nullable
    assert batch.schema.field("v").type == pa.large_list(pa.int64())
    assert batch.schema.field("s").type == pa.large_list(pa.large_binary())
    assert batch.schema.field("i").type == pa.list_(pa.large_binary(), 2)
    assert batch.to_pydict() == {"x": [1.5, -1.0], "v": [[1, 2], []], "s": [[b"ab"], None],
                                 "i": [[b"p", b"q"], [b"p", b"q"]]}


def test_bytes_reach_arrow_without_a_copy(backend):
    from tfrecord_lite.arrow import _flat

    column = tfl.parse_example([tfl.encode_example({"b": b"x" * 1000})] * 3,
                               {"b": tfl.FixedLenFeature([], bytes)}, bytes_output="column")["b"]
    array = _flat(column)
    assert array.buffers()[2].address == column.values.ctypes.data
    assert array.buffers()[1].address == column.offsets.ctypes.data
    assert array.to_pylist() == [b"x" * 1000] * 3 and backend.name == tfl.implementation


def test_errors_name_the_feature(backend):
    with pytest.raises(FeatureSpecError, match="'sp'.*SparseFeature") as info:
        to_arrow([], {"sp": tfl.SparseFeature("i", "v", np.float32, 4)})
    assert "VarLenFeature" in info.value.hint
    with pytest.raises(FeatureSpecError, match="'x'.*required") as info:
        to_arrow([tfl.encode_example({"x": 1})] * 2 + [tfl.encode_example({})],
                 {"x": tfl.FixedLenFeature([], np.int64)})
    assert info.value.index == 2
    with pytest.raises(FeatureSpecError, match="'r'"):
        arrow_schema({"r": tfl.RawTensorFeature([2], np.complex64)})
    with pytest.raises(FeatureSpecError, match="'r'.*S4"):  # Arrow's binary is not fixed-width
        to_arrow([], {"r": tfl.RawTensorFeature([2], "S4")})
    with pytest.raises(FeatureSpecError, match="'x'.*float32"):
        to_arrow([tfl.encode_example({"x": 1.0})], {"x": tfl.VarLenFeature(np.int64)})
    assert backend.name == tfl.implementation


@settings(max_examples=60)
@given(rows=st.lists(st.tuples(st.integers(-5, 5),
                               st.none() | st.lists(st.lists(blobs, min_size=2, max_size=2), max_size=3),
                               st.none() | st.lists(st.lists(floats, max_size=3), max_size=3)), max_size=5))
def test_sequence_to_arrow(backend, rows):
    records = []
    for label, pairs, floats_ in rows:
        lists = {}
        if pairs is not None:
            lists["pair"] = pairs
        if floats_ is not None:
            lists["f"] = [np.array(step, np.float32) for step in floats_]
        records.append(tfl.encode_sequence_example({"label": label}, lists))
    context = {"label": tfl.FixedLenFeature([], np.int64)}
    sequence = {"pair": tfl.FixedLenSequenceFeature([2], bytes, allow_missing=True),
                "f": tfl.VarLenFeature(np.float32), "g": tfl.RaggedFeature(np.float32, value_key="f")}
    batch = sequence_to_arrow(records, context, sequence)
    batch.validate(full=True)
    assert batch.schema.field("pair").type == pa.large_list(pa.list_(pa.large_binary(), 2))
    assert batch.schema.field("f").type == pa.large_list(pa.large_list(pa.float32()))
    floats_out = [None if f is None else [[float(np.float32(x)) for x in step] for step in f] for _, _, f in rows]
    assert batch.to_pydict() == {"label": [r[0] for r in rows], "pair": [r[1] for r in rows],
                                 "f": floats_out, "g": floats_out}
    if any(r[1] is None for r in rows):  # without allow_missing, a record lacking the list fails
        with pytest.raises(FeatureSpecError, match="'pair'.*required"):
            sequence_to_arrow(records, {}, {"pair": tfl.FixedLenSequenceFeature([2], bytes)})
    with pytest.raises(FeatureSpecError, match="'label'.*both"):
        sequence_to_arrow(records, context, {"label": tfl.VarLenFeature(np.int64)})
    assert backend.name == tfl.implementation


@pytest.fixture
def files(tmp_path):
    paths = []
    for f in range(3):
        path = str(tmp_path / f"part{f}.tfrecord")
        with TFRecordWriter(path) as w:
            for j in range(40):
                i = 40 * f + j
                w.write(tfl.encode_example({"id": i, "x": [i / 2, -i], "name": f"n{i}", "tags": [b"t"] * (i % 3)}))
        paths.append(path)
    return paths


SPEC = {"id": tfl.FixedLenFeature([], np.int64), "x": tfl.FixedLenFeature([2], np.float32),
        "name": tfl.FixedLenFeature([], bytes), "tags": tfl.VarLenFeature(bytes)}


def test_dataset_yields_record_batches(backend, files):
    records = [r for p in files for r in TFRecordReader(p)]
    expected = to_arrow(records, SPEC)
    for options in ({}, {"num_threads": 2, "cycle_length": 1}):
        batches = list(TFRecordDataset(files, SPEC, batch_size=7, output="arrow", **options))
        assert all(isinstance(b, pa.RecordBatch) and b.schema == expected.schema for b in batches)
        assert [b.num_rows for b in batches] == [7] * 17 + [1]
        assert pa.Table.from_batches(batches).equals(pa.Table.from_batches([expected]))
    # a dense spec is parsed several batches at a time, then sliced
    dense = {k: SPEC[k] for k in ("id", "x")}
    batches = list(TFRecordDataset(files, dense, batch_size=5, output="arrow", num_threads=2, cycle_length=1))
    assert pa.Table.from_batches(batches).column("id").to_pylist() == list(range(120))
    with pytest.raises(TFRecordError, match="batch_size"):
        TFRecordDataset(files, SPEC, output="arrow")
    assert backend.name == tfl.implementation


def test_read_table(backend, files):
    table = read_table(files, SPEC)
    assert table.num_rows == 120 and table.column("id").to_pylist() == list(range(120))
    assert table.column("tags").to_pylist()[:4] == [[], [b"t"], [b"t", b"t"], []]
    inferred = read_table(files)  # infer_schema: tags vary in count, so a list column
    assert inferred.schema.field("tags").type == pa.large_list(pa.large_binary())
    assert inferred.schema.field("x").type == pa.list_(pa.float32(), 2)
    assert inferred.select(table.column_names).equals(table)
    picked = read_table(files[0], columns=["name", "id"], num_threads=2)
    assert picked.column_names == ["name", "id"] and picked.column("name").to_pylist()[:2] == [b"n0", b"n1"]
    with pytest.raises(FeatureSpecError, match="'nope'"):
        read_table(files, columns=["nope"])
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("on_corrupt, ids", [("skip", [0, 2, 3]), ("stop", [0])])
def test_the_spec_is_inferred_under_the_reads_on_corrupt(backend, tmp_path, on_corrupt, ids):
    # The sample read for infer_schema raised at a damaged record whatever on_corrupt said,
    # so read_table(..., on_corrupt="skip") of a damaged file never got to skip it.
    path = tmp_path / "damaged.tfrecord"
    with TFRecordWriter(str(path)) as w:
        w.write_many(tfl.encode_example({"id": i}) for i in range(4))
    data = bytearray(path.read_bytes())
    frame = len(data) // 4
    data[frame + 14] ^= 0xFF  # record 1's data
    path.write_bytes(bytes(data))
    with pytest.raises(TFRecordError, match="record 1"):
        read_table(str(path))
    table = read_table(str(path), on_corrupt=on_corrupt)
    assert table.column("id").to_pylist() == ids
    assert backend.name == tfl.implementation


def test_the_spec_is_inferred_past_an_empty_first_file(backend, files, tmp_path):
    # A shard with no records first gave an empty spec: a table of no columns and no rows,
    # and to-parquet wrote an empty Parquet file.
    import pyarrow.parquet as pq

    from tfrecord_lite.arrow import write_parquet

    empty = str(tmp_path / "a-empty.tfrecord")
    TFRecordWriter(empty).close()
    table = read_table([empty] + files)
    assert table.equals(read_table(files)) and table.num_rows == 120
    assert write_parquet([empty, empty] + files, str(tmp_path / "t.parquet")) == 120
    assert pq.read_table(str(tmp_path / "t.parquet")).equals(table)
    assert read_table([empty]).num_columns == 0
    assert backend.name == tfl.implementation


def test_the_sample_reads_the_files_after_the_first_concurrently_in_order(backend, tmp_path, monkeypatch):
    """The sample a spec is inferred from (read_table and read_tfrecords without one) read
    the files one after another: small files on an object store made a thousand sequential
    opens for 1,000 records. When the first file falls short, up to 16 are now read at
    once: the same records in the same order, and only a file the sample needs fails it."""
    from tfrecord_lite import arrow as tfl_arrow

    paths = []
    for k in range(40):  # files 0..17 hold the first 60 records (file 3 none, 17 the last two)
        paths.append(str(tmp_path / f"f{k:02d}.tfrecord"))
        with TFRecordWriter(paths[-1]) as w:
            w.write_many(tfl.encode_example({"id": 100 * k + j}) for j in range(0 if k == 3 else k % 7 + 1))
    overlap = Overlap(4)

    class SlowStore(tfl_arrow.TFRecordReader):  # reads wait here until 4 overlap
        def head(self, n):
            with overlap():
                return super().head(n)

    monkeypatch.setattr(tfl_arrow, "TFRecordReader", SlowStore)
    want = [r for p in paths for r in TFRecordReader(p)][:60]
    sample = tfl_arrow._sample(paths, 60)
    assert overlap.peak >= 4 and [bytes(r) for r in sample] == want
    assert sample.locate(59)[0] == paths[17] and sample.locate(0)[0] == paths[0]
    (tmp_path / "f30.tfrecord").unlink()  # not needed: its failure is not the sample's
    assert [bytes(r) for r in tfl_arrow._sample(paths, 60)] == want
    (tmp_path / "f20.tfrecord").unlink()
    (tmp_path / "f12.tfrecord").unlink()  # needed: the first such failure in file order
    with pytest.raises(FileNotFoundError) as info:
        tfl_arrow._sample(paths, 60)
    assert info.value.filename == paths[12] and backend.name == tfl.implementation


def test_a_spec_of_no_features_keeps_the_row_count(backend, files, tmp_path):
    # from_arrays counts rows from the first column: with none, every batch had 0 rows, so
    # read_table(files, columns=[]) of 120 records was empty and a table of no columns did
    # not come back from its TFRecord file.
    records = [tfl.encode_example({"a": 1})] * 3
    assert to_arrow(records, {}).num_rows == 3 and parse_arrow([], {}).num_rows == 0
    assert sequence_to_arrow(records).num_rows == 3
    assert read_table(files, columns=[]).num_rows == 120
    assert [b.num_rows for b in TFRecordDataset(files, {}, batch_size=50, output="arrow")] == [50, 50, 20]
    table = pa.table({"a": [1, 2, 3]}).select([])
    assert write_arrow(table, str(tmp_path / "t.tfrecord")) == 3
    assert read_table(str(tmp_path / "t.tfrecord")).equals(table)
    assert backend.name == tfl.implementation


def test_inferring_a_spec_for_sequence_examples_says_what_reads_them(backend, tmp_path):
    # infer_schema's SequenceSchema went on to the dataset as the spec: "features must map
    # names to feature specs, not SequenceSchema(...)", an error about an argument never given
    path = str(tmp_path / "seq.tfrecord")
    with TFRecordWriter(path) as w:
        w.write(tfl.encode_sequence_example({"label": 1}, {"frames": [[1.0], [2.0]]}))
    with pytest.raises(FeatureSpecError, match="SequenceExamples") as info:
        read_table(path)
    assert info.value.path == path and "sequence_to_arrow" in info.value.hint
    assert backend.name == tfl.implementation


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


# -- the data stack ------------------------------------------------------------------------

def test_pandas_polars_and_datasets(backend, files):
    import datasets
    import polars as pl

    table = read_table(files, SPEC)
    df = table.to_pandas()
    assert df["id"].tolist() == list(range(120)) and df["name"][3] == b"n3" and list(df["x"][2]) == [1.0, -2.0]
    frame = pl.from_arrow(table)
    assert frame.shape == (120, 4) and frame["id"].sum() == sum(range(120))
    assert frame["tags"].list.len().to_list()[:3] == [0, 1, 2]
    ds = datasets.Dataset(table)
    assert len(ds) == 120 and ds[5]["id"] == 5 and ds[5]["tags"] == [b"t", b"t"] and ds[5]["x"] == [2.5, -5.0]
    assert backend.name == tfl.implementation


def test_import_tfrecord_lite_imports_no_optional_dependency():
    code = ("import sys, tfrecord_lite as tfl; "
            "tfl.parse_example([tfl.encode_example({'a': 1})], {'a': tfl.FixedLenFeature([], 'int64')}); "
            "heavy = sorted(m for m in ('pyarrow', 'fsspec', 'ray', 'torch', 'tensorflow', 'jax', 'polars', "
            "'pandas', 'datasets') if m in sys.modules); print(heavy); "
            "import tfrecord_lite.arrow; print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]


def test_readme_arrow_section_runs(tmp_path):
    import os
    import re

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Arrow, pandas, polars and Hugging Face datasets", 1)[1].split("\n## ", 1)[0]
    snippets = re.findall(r"```python\n(.+?)\n```", section, flags=re.S)
    assert snippets
    script = "\n".join(snippets) + "\nassert hf.num_rows == len(df) == frame.height == 1000\n"
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True)
    assert sorted(p.name for p in tmp_path.iterdir())[:2] == ["copy.tfrecord", "people-00000-of-00004.tfrecord"]


@pytest.mark.parametrize("bad", [None, [tfl.VarLenFeature(np.int64)], "ab"])
def test_a_spec_that_is_not_a_mapping_is_refused(backend, bad):
    """to_arrow(records, None) raised AttributeError: 'NoneType' object has no attribute 'items'."""
    records = [tfl.encode_example({"a": 1})]
    calls = [lambda: to_arrow(records, bad), lambda: tfl.parse_example(records, bad, output="arrow")]
    if bad is not None:  # None is "no context" or "no sequence" there
        calls += [lambda: sequence_to_arrow(records, bad), lambda: sequence_to_arrow(records, None, bad)]
    for call in calls:
        with pytest.raises(tfl.ArgumentTypeError, match="must map names to feature specs"):
            call()
    assert backend.name == tfl.implementation


def test_columns_given_as_one_str_are_refused(tmp_path):
    """read_table(path, columns="ab") read the columns "a" and "b"."""
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path) as w:
        w.write(tfl.encode_example({"a": 1, "b": 2, "ab": 3}))
    with pytest.raises(tfl.ArgumentTypeError, match=r"columns must be a list of names.*pass \['ab'\]"):
        read_table(path, columns="ab")
    assert read_table(path, columns=["ab"]).to_pydict() == {"ab": [3]}


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


@settings(max_examples=40, deadline=None)
@given(kinds=BAD_KINDS)
def test_a_batch_error_names_its_first_bad_record(backend, tmp_path_factory, kinds):
    """As parse_example's (test_example): the first bad record's error, whatever follows."""
    assert_first_bad_record_named([to_arrow, sequence_to_arrow], tmp_path_factory.mktemp("first"), kinds)
