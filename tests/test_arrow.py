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
    # partitions were left out: the values came as one list per record
    nested = {"r": tfl.RaggedFeature(np.int64, "v", [tfl.RaggedFeature.RowLengths("n")])}
    for make in (lambda: to_arrow([tfl.encode_example({"v": [1, 2], "n": [1, 1]})], nested),
                 lambda: sequence_to_arrow([], nested), lambda: sequence_to_arrow([], None, nested)):
        with pytest.raises(FeatureSpecError, match="'r': RaggedFeature partitions have no Arrow form"):
            make()
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
    with pytest.raises(tfl.ArgumentTypeError, match=r"columns must be a list of names.*Pass \['ab'\]"):
        read_table(path, columns="ab")
    assert read_table(path, columns=["ab"]).to_pydict() == {"ab": [3]}


@settings(max_examples=40, deadline=None)
@given(kinds=BAD_KINDS)
def test_a_batch_error_names_its_first_bad_record(backend, tmp_path_factory, kinds):
    """As parse_example's (test_example): the first bad record's error, whatever follows."""
    assert_first_bad_record_named([to_arrow, sequence_to_arrow], tmp_path_factory.mktemp("first"), kinds)
