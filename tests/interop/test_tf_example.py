"""Example codec against live TensorFlow: byte-identical deterministic encoding and
parse results equal to tf.io.parse_example / parse_sequence_example, on both backends.

TensorFlow is imported at test time only; if it is missing these tests fail, never skip."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.errors import ExampleDecodeError, FeatureSpecError

pytestmark = pytest.mark.interop
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow
    except ImportError as exc:  # CI always installs it: a missing TF is a failure
        pytest.fail(f"interop tests need tensorflow: {exc}")
    return tensorflow


def tf_example(tf, mapping):
    feats = {}
    for k, (kind, vals) in mapping.items():
        if kind == "f":
            feats[k] = tf.train.Feature(float_list=tf.train.FloatList(value=vals))
        elif kind == "i":
            feats[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=vals))
        elif kind == "b":
            feats[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=vals))
        else:
            feats[k] = tf.train.Feature()
    return tf.train.Example(features=tf.train.Features(feature=feats))


def ours(mapping):
    conv = {"f": lambda v: np.array(v, dtype=np.float64).astype(np.float32), "i": lambda v: np.array(v, dtype=np.int64),
            "b": lambda v: list(v) if v else np.array([], dtype="S1"), "e": lambda v: []}
    return {k: conv[kind](vals) for k, (kind, vals) in mapping.items()}


feature_values = st.one_of(
    st.tuples(st.just("f"), st.lists(st.floats(width=32), max_size=5)),
    st.tuples(st.just("i"), st.lists(st.integers(-2**63, 2**63 - 1), max_size=5)),
    st.tuples(st.just("b"), st.lists(st.binary(max_size=6), max_size=4)),
    st.tuples(st.just("e"), st.just([])),
)


@SETTINGS
@given(mapping=st.dictionaries(st.text(max_size=5), feature_values, max_size=6))
def test_deterministic_encoding_is_byte_identical(tf, backend, mapping):
    expected = tf_example(tf, mapping).SerializeToString(deterministic=True)
    assert tfl.encode_example(ours(mapping), deterministic=True) == expected
    assert tfl.encode_examples({k: [v] for k, v in ours(mapping).items()}, deterministic=True) == ([expected] if mapping else [])


int_values = st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(0, 2**63 - 1).map(np.uint64),
                       st.integers(-2**63, 2**63 - 1).map(np.int64))


@SETTINGS
@given(values=st.lists(int_values, min_size=1, max_size=5), past=st.sampled_from([None, 2**63, 2**64, -2**63 - 1]))
def test_plain_int_lists_encode_as_tf_int64_lists(tf, backend, values, past):
    """A list of Python and numpy ints, as passed by hand: numpy makes float64 of some
    (uint64 beside negative ints, ints past int64), which was written as a float_list.
    Values TensorFlow's Int64List refuses are refused too."""
    values = values + ([] if past is None else [past])
    if past is not None:
        with pytest.raises(ValueError, match="out of range"):
            tf.train.Int64List(value=values)
        with pytest.raises(FeatureSpecError, match=f"value {past} does not fit int64"):
            tfl.encode_example({"i": values})
        return
    expected = tf_example(tf, {"i": ("i", [int(v) for v in values])}).SerializeToString(deterministic=True)
    assert tfl.encode_example({"i": values}, deterministic=True) == expected
    assert tfl.encode_examples({"i": [values]}, deterministic=True) == [expected]


@SETTINGS
@given(columns=st.dictionaries(st.text(max_size=5), st.tuples(st.sampled_from(["f", "i", "b", "s"]), st.data()),
                               min_size=1, max_size=5),
       rows=st.integers(0, 4))
def test_write_arrow_is_byte_identical_to_typed_features(tf, backend, tmp_path_factory, columns, rows):
    """Each column's Arrow type names its list, empty rows included (an empty string or
    binary row is an empty bytes_list, as TensorFlow writes it, not a Feature of none)."""
    import pyarrow as pa

    from tfrecord_lite.arrow import write_arrow

    leaves = {"f": (st.floats(width=32), pa.float32(), "f"), "i": (st.integers(-2**63, 2**63 - 1), pa.int64(), "i"),
              "b": (st.binary(max_size=4), pa.binary(), "b"), "s": (st.text(max_size=3), pa.string(), "b")}
    table, mappings = {}, [{} for _ in range(rows)]
    for name, (kind, data) in columns.items():
        values, arrow_type, feature = leaves[kind]
        cells = data.draw(st.lists(st.lists(values, max_size=3), min_size=rows, max_size=rows))
        table[name] = pa.array(cells, pa.list_(arrow_type))
        for mapping, cell in zip(mappings, cells):
            mapping[name] = (feature, [v.encode() for v in cell] if kind == "s" else cell)
    path = tmp_path_factory.mktemp("arrow") / "t.tfrecord"
    assert write_arrow(pa.table(table), path, deterministic=True) == rows
    assert list(tfl.TFRecordReader(path)) == [tf_example(tf, m).SerializeToString(deterministic=True) for m in mappings]


def test_sequence_example_encoding_is_byte_identical(tf, backend):
    s = tf.train.SequenceExample()
    s.context.feature["c"].int64_list.value.extend([1, -2])
    s.context.feature["a"].bytes_list.value.append(b"x")
    for step in ([1.5, 2.5], []):
        s.feature_lists.feature_list["f"].feature.add().float_list.value.extend(step)
    s.feature_lists.feature_list["e"].SetInParent()
    got = tfl.encode_sequence_example({"c": [1, -2], "a": b"x"},
                                      {"f": [np.array([1.5, 2.5], np.float32), np.zeros(0, np.float32)], "e": []},
                                      deterministic=True)
    assert got == s.SerializeToString(deterministic=True)


def assert_same(got, expected):
    if hasattr(expected, "indices"):  # SparseTensor
        assert np.array_equal(got.indices, expected.indices.numpy())
        assert_same(got.values, expected.values)
        assert got.dense_shape.tolist() == expected.dense_shape.numpy().tolist()
    elif hasattr(expected, "row_splits"):
        assert got.to_list() == expected.to_list()
    else:
        exp = expected.numpy()
        assert got.shape == exp.shape and got.dtype == exp.dtype
        if exp.dtype == np.float32:
            assert np.array_equal(got.view(np.uint32), exp.view(np.uint32))
        else:
            assert np.array_equal(got, exp)


@st.composite
def batches(draw):
    specs, columns = {}, {}
    n = draw(st.integers(1, 5))
    for i in range(draw(st.integers(1, 4))):
        name = f"k{i}"
        dtype = draw(st.sampled_from(["float32", "int64", "string"]))
        elem = {"float32": st.floats(width=32, allow_nan=False), "int64": st.integers(-2**63, 2**63 - 1),
                "string": st.binary(max_size=4)}[dtype]
        kind = draw(st.sampled_from(["fixed", "var", "ragged", "seq"]))
        if kind == "fixed":
            size = draw(st.integers(1, 3))
            specs[name] = tfl.FixedLenFeature([size], dtype)
            rows = [draw(st.lists(elem, min_size=size, max_size=size)) for _ in range(n)]
        else:
            rows = [draw(st.one_of(st.none(), st.lists(elem, max_size=4))) for _ in range(n)]
            specs[name] = {"var": tfl.VarLenFeature(dtype), "ragged": tfl.RaggedFeature(dtype),
                           "seq": tfl.FixedLenSequenceFeature([], dtype, allow_missing=True)}[kind]
        columns[name] = (dtype, rows)
    records = []
    for r in range(n):
        m = {}
        for name, (dtype, rows) in columns.items():
            if rows[r] is not None:
                m[name] = ({"float32": "f", "int64": "i", "string": "b"}[dtype], rows[r])
        records.append(m)
    return specs, records


def tf_spec(tf, spec):
    return eval(spec.to_tf(), {"tf": tf})


@SETTINGS
@given(batch=batches())
def test_parse_example_matches_tf(tf, backend, batch):
    specs, records = batch
    serialized = [tf_example(tf, m).SerializeToString() for m in records]
    expected = tf.io.parse_example(serialized, {k: tf_spec(tf, s) for k, s in specs.items()})
    got = tfl.parse_example(serialized, specs)
    for k in specs:
        assert_same(got[k], expected[k])
    single = tfl.parse_single_example(serialized[0], specs)
    expected = tf.io.parse_single_example(serialized[0], {k: tf_spec(tf, s) for k, s in specs.items()})
    for k, s in specs.items():
        if isinstance(s, tfl.RaggedFeature):
            assert np.array_equal(single[k], expected[k].numpy())
        else:
            assert_same(single[k], expected[k])


def test_defaults_sparse_and_item_sequences_match_tf(tf, backend):
    ex = [tf_example(tf, m).SerializeToString() for m in (
        {"i": ("i", [3, 1]), "v": ("f", [1.0, 2.0]), "s": ("b", [b"x"]), "q": ("i", [1, 2, 3, 4])},
        {"i": ("i", []), "v": ("f", []), "q": ("i", [5, 6])},
        {"i": ("i", [0]), "v": ("f", [5.0]), "s": ("e", [])},
    )]
    specs = {
        "sp": tfl.SparseFeature("i", "v", np.float32, 4),
        "s": tfl.FixedLenFeature([], bytes, default_value=b"d"),
        "q": tfl.FixedLenSequenceFeature([2], np.int64, allow_missing=True, default_value=9),
        "m": tfl.FixedLenFeature([2, 2], np.int64, default_value=[[1, 2], [3, 4]]),
    }
    expected = tf.io.parse_example(ex, {k: tf_spec(tf, s) if k not in ("q", "m") else None for k, s in specs.items()}
                                   | {"q": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True, default_value=9),
                                      "m": tf.io.FixedLenFeature([2, 2], tf.int64, default_value=[[1, 2], [3, 4]])})
    got = tfl.parse_example(ex, specs)
    for k in specs:
        assert_same(got[k], expected[k])


@pytest.mark.parametrize("records, spec", [
    ([{"a": ("i", [1])}], {"b": ("FixedLenFeature", [], "int64")}),                 # missing, no default
    ([{"a": ("i", [])}], {"a": ("FixedLenFeature", [], "int64")}),                  # present but empty
    ([{"a": ("f", [1.0])}], {"a": ("FixedLenFeature", [], "int64")}),               # type mismatch
    ([{"a": ("i", [1, 2])}], {"a": ("FixedLenFeature", [], "int64")}),              # wrong count
    ([{"a": ("i", [1])}], {"a": ("VarLenFeature", "float32")}),                     # type mismatch
    ([{"a": ("i", [1, 2, 3])}], {"a": ("FixedLenSequenceFeature", [2], "int64")}),  # not a multiple
    ([{"b": ("i", [1])}], {"a": ("FixedLenFeature", [0], "int64", {"default_value": []})}),  # a default of
    ([{"b": ("i", [1])}], {"a": ("FixedLenFeature", [2, 0], "string", {"default_value": []})}),  # no values
    ([{"b": ("i", [1])}], {"a": ("FixedLenFeature", [0], "float32", {"default_value": []})}),
    ([{"b": ("i", [1])}], {"a": ("FixedLenFeature", [0], "float32")}),
    ([{"a": ("e", [])}], {"a": ("FixedLenFeature", [0], "float32", {"default_value": []})}),  # no kind
])
def test_spec_errors_where_tf_raises(tf, backend, records, spec):
    serialized = [tf_example(tf, m).SerializeToString() for m in records]

    def build(mod, args):
        name, *rest = args
        options = rest.pop() if isinstance(rest[-1], dict) else {}
        if name == "FixedLenSequenceFeature":
            return getattr(mod, name)(*rest, allow_missing=True)
        return getattr(mod, name)(*[getattr(tf, r) if mod is tf.io and r in ("int64", "float32", "string") else r
                                    for r in rest], **options)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(serialized, {k: build(tf.io, v) for k, v in spec.items()})
    with pytest.raises(FeatureSpecError) as info:
        tfl.parse_example(serialized, {k: build(tfl, v) for k, v in spec.items()})
    assert info.value.index == 0 and repr(next(iter(spec))) in str(info.value)


def test_a_shape_of_no_values_parses_an_empty_list_and_requires_the_feature(tf, backend):
    """As TF: FixedLenFeature([0], default_value=[]) parses a present empty float_list, and
    a record without the feature raises 'required' (TF keeps no default of no values); the
    error says why, as the default the spec was given is not used."""
    empty = tf_example(tf, {"a": ("f", [])}).SerializeToString()
    missing = tf_example(tf, {"b": ("i", [1])}).SerializeToString()
    spec = tfl.FixedLenFeature([0], np.float32, default_value=[])
    expected = tf.io.parse_example([empty, empty], {"a": tf_spec(tf, spec)})["a"]
    assert_same(tfl.parse_example([empty, empty], {"a": spec})["a"], expected)
    assert_same(tfl.parse_single_example(empty, {"a": spec})["a"],
                tf.io.parse_single_example(empty, {"a": tf.io.FixedLenFeature([0], tf.float32, default_value=[])})["a"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="required"):
        tf.io.parse_example([empty, missing], {"a": tf.io.FixedLenFeature([0], tf.float32, default_value=[])})
    with pytest.raises(FeatureSpecError, match="required.*a shape of no values") as info:
        tfl.parse_example([empty, missing], {"a": spec})
    assert info.value.index == 1


@SETTINGS
@given(kinds=st.lists(st.sampled_from(["good", "type", "shape", "missing", "malformed"]), min_size=1, max_size=6))
def test_a_batch_error_names_the_record_tf_fails_at(tf, backend, kinds):
    """TensorFlow parses the records before the first bad one and fails with it; ours names
    that record, whatever the kinds of the errors after it."""
    make = {"good": {"a": ("i", [1])}, "type": {"a": ("b", [b"x"])}, "shape": {"a": ("i", [1, 2])}, "missing": {}}
    records = [b"\x0a\x05\x0a\x03" if k == "malformed" else tf_example(tf, make[k]).SerializeToString()
               for k in kinds]
    spec = {"a": tfl.FixedLenFeature([], np.int64)}

    def tf_fails(n):
        try:
            tf.io.parse_example(tf.constant(records[:n], tf.string, shape=[n]),
                                {"a": tf.io.FixedLenFeature([], tf.int64)})
        except tf.errors.InvalidArgumentError:
            return True
        return False

    try:
        tfl.parse_example(records, spec)
    except (ExampleDecodeError, FeatureSpecError) as exc:
        assert not tf_fails(exc.index) and tf_fails(exc.index + 1)
    else:
        assert not tf_fails(len(records))


@pytest.mark.parametrize("context, sequence", [(None, None), ({}, {}), ({}, None), (None, {})])
def test_empty_specs_are_refused_as_tf_refuses_them(tf, backend, context, sequence):
    """parse_example({}) and parse_sequence_example with neither spec returned {} and
    ({}, {}, {}), a result that does not even say how many records there were."""
    record = tf_example(tf, {"a": ("i", [1])}).SerializeToString()
    with pytest.raises(ValueError):
        tf.io.parse_example([record], {})
    with pytest.raises(FeatureSpecError, match="features is empty"):
        tfl.parse_example([record], {})
    with pytest.raises(ValueError):
        tf.io.parse_sequence_example([record], context_features=context, sequence_features=sequence)
    with pytest.raises(FeatureSpecError, match="both empty"):
        tfl.parse_sequence_example([record], context, sequence)
    with pytest.raises(ValueError):
        tf.io.parse_single_sequence_example(record, context_features=context, sequence_features=sequence)
    with pytest.raises(FeatureSpecError, match="both empty"):
        tfl.parse_single_sequence_example(record, context, sequence)


@pytest.mark.parametrize("dtype, default", [("string", 5), ("string", 1.5), ("string", [b"a", 3]), ("int64", 1.5),
                                            ("float32", "abc"), ("int64", 2**64)])
def test_defaults_tf_cannot_convert_are_refused(tf, backend, dtype, default):
    shape = [2] if isinstance(default, list) else []
    with pytest.raises((TypeError, ValueError)):
        tf.io.parse_example([b""], {"a": tf.io.FixedLenFeature(shape, getattr(tf, dtype), default_value=default)})
    with pytest.raises(FeatureSpecError, match="default_value"):
        tfl.FixedLenFeature(shape, dtype, default_value=default)  # when made, not with garbage in a batch


def test_map_entry_field_order_and_unknown_fields(tf, backend):
    """A map entry's value may come before its key (TF and protobuf agree). An entry with an
    unknown field is dropped by protobuf (kept among the unknown fields, not in the map), and
    by both backends of this library; TF's fast parser rejects the record."""

    def record(entry):
        return b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry
    value_first = record(b"\x12\x04\x1a\x02\x08\x07\x0a\x01a")
    with_unknown = record(b"\x0a\x01a\x12\x04\x1a\x02\x08\x07\xa0\x01\x05")
    expected = tf.io.parse_example([value_first], {"a": tf.io.VarLenFeature(tf.int64)})["a"]
    with pytest.raises(Exception):
        tf.io.parse_example([with_unknown], {"a": tf.io.VarLenFeature(tf.int64)})
    assert "a" not in tf.train.Example.FromString(with_unknown).features.feature
    assert_same(tfl.parse_example([value_first], {"a": tfl.VarLenFeature(np.int64)})["a"], expected)
    assert "a" not in backend.example.decode_examples([with_unknown])[0]
    dropped = tfl.parse_example([with_unknown], {"a": tfl.VarLenFeature(np.int64)})["a"]
    assert dropped.values.size == 0 and dropped.dense_shape.tolist() == [1, 0]


@pytest.mark.parametrize("key, feature", [
    (b"b", b"\x12\x05\x0a\x03abc"),      # packed floats of 3 bytes
    (b"b", b"\x0f"),                      # no such wire type
    (b"b", b"\x1a\x03\x0a\x01\x80"),      # a varint cut short
    (b"\xff", b"\x12\x00"),               # a name that is not UTF-8
])
def test_malformed_features_the_spec_does_not_ask_for(tf, backend, key, feature):
    """Malformed protobuf anywhere in a record raises, in the features a spec does not ask
    for too, as protobuf rejects the record. TF's parser does not look inside those, so it
    parses the rest."""

    def entry(name, value):
        body = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(value)]) + value
        return b"\x0a" + bytes([len(body)]) + body
    body = entry(b"a", b"\x12\x06\x0a\x04" + np.float32(1.5).tobytes()) + entry(key, feature)
    record = b"\x0a" + bytes([len(body)]) + body
    assert tf.io.parse_example([record], {"a": tf.io.FixedLenFeature([], tf.float32)})["a"].numpy().tolist() == [1.5]
    with pytest.raises(Exception):
        tf.train.Example.FromString(record)
    with pytest.raises(ExampleDecodeError) as info:
        tfl.parse_example([record], {"a": tfl.FixedLenFeature([], np.float32)})
    assert info.value.index == 0


def test_parse_sequence_example_matches_tf(tf, backend):
    def sx(ctx, lists):
        s = tf.train.SequenceExample()
        s.context.CopyFrom(tf_example(tf, ctx).features)
        for k, steps in lists.items():
            fl = s.feature_lists.feature_list[k]
            for st_ in steps:
                fl.feature.add().CopyFrom(tf_example(tf, {"x": st_}).features.feature["x"])
        return s.SerializeToString()
    recs = [sx({"c": ("i", [1, 2])}, {"f": [("f", [1.0, 2.0]), ("f", [3.0, 4.0])], "v": [("i", [1]), ("i", [2, 3])],
                                       "b": [("b", [b"a"]), ("b", [b"b"])], "w": [("i", [7])]}),
            sx({"c": ("i", [3, 4])}, {"f": [("f", [5.0, 6.0])], "v": [], "b": [("b", [b"c"])], "w": [("i", []), ("i", [8])]})]
    ctx = {"c": tfl.FixedLenFeature([2], np.int64), "cv": tfl.VarLenFeature(np.int64)}
    seq = {"f": tfl.FixedLenSequenceFeature([2], np.float32), "v": tfl.VarLenFeature(np.int64),
           "b": tfl.FixedLenSequenceFeature([], bytes), "r": tfl.RaggedFeature(np.int64, value_key="w")}
    exp = tf.io.parse_sequence_example(recs, {k: tf_spec(tf, s) for k, s in ctx.items()},
                                       {k: tf_spec(tf, s) for k, s in seq.items()})
    got = tfl.parse_sequence_example(recs, ctx, seq)
    for g, e in zip(got, exp):
        assert g.keys() == e.keys()
        for k in e:
            assert_same(g[k], e[k])
    with pytest.raises(FeatureSpecError, match="'z'.*required"):
        tfl.parse_sequence_example(recs, {}, {"z": tfl.FixedLenSequenceFeature([2], np.float32)})


@pytest.mark.parametrize("kind", ["example", "sequence"])
def test_schema_tf_format_is_a_program_tensorflow_runs(tf, backend, tmp_path, capfd, kind):
    """`tfrecord-lite schema --format tf` printed the spec without `import tensorflow as tf`:
    saved and run, it raised NameError. Run here under TensorFlow, its spec parses the file
    as ours does."""
    from tfrecord_lite.cli import main

    path = str(tmp_path / "data.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        for i in range(20):
            context = {"id": i, "xy": [i / 4, 1.0], "name": f"n{i}"}
            if i % 5:
                context["tags"] = [b"t"] * (i % 5)
            w.write(tfl.encode_example(context) if kind == "example" else
                    tfl.encode_sequence_example(context, {"steps": [[j] for j in range(i % 3)]}))
    assert main(["schema", path, "--format", "tf"]) == 0
    program = capfd.readouterr().out
    scope = {}
    exec(compile(program, "schema.py", "exec"), scope)
    assert scope["tf"] is tf
    records = list(tfl.TFRecordReader(path))
    schema = tfl.infer_schema(path)
    if kind == "example":
        pairs = [(tf.io.parse_example(records, scope["features"]), tfl.parse_example(records, schema))]
    else:
        theirs = tf.io.parse_sequence_example(records, scope["context_features"], scope["sequence_features"])
        pairs = list(zip(theirs[:2], tfl.parse_sequence_example(records, schema.context, schema.feature_lists)))
    for tf_out, ours in pairs:
        assert set(tf_out) == set(ours) and tf_out
        for name, value in tf_out.items():
            if isinstance(value, tf.SparseTensor):
                value, mine = (value.indices, value.values, value.dense_shape), ours[name]
            else:
                value, mine = [value], [ours[name]]
            for a, b in zip(value, mine):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", [float, object, np.object_, np.dtype("S3"), np.dtype("U2"), "float32"])
def test_dtype_spellings_tf_takes(tf, backend, dtype):
    """What tf.as_dtype takes: Python's float is float32 (numpy's float is float64), object
    and numpy bytes or str dtypes are tf.string; these were refused as unsupported."""
    record = tfl.encode_example({"x": [b"ab"] if tf.as_dtype(dtype) == tf.string else [1.5]})
    expected = tf.io.parse_example([record], {"x": tf.io.FixedLenFeature([1], dtype)})["x"]
    spec = tfl.FixedLenFeature([1], dtype)
    assert_same(tfl.parse_example([record], {"x": spec})["x"], expected)
    assert eval(spec.to_tf(), {"tf": tf}).dtype == tf.as_dtype(dtype)


@pytest.mark.parametrize("dtype, default", [("float32", 2**63), ("float32", 2**70), ("float32", [1, -2**70]),
                                            ("float32", np.array([1, 2.5], dtype=object)), ("float32", 1e40),
                                            ("int64", np.array([1, -2], dtype=object))])
def test_defaults_tf_converts_are_taken(tf, backend, dtype, default):
    """Ints past int64 for a float feature were refused as ints that int64 cannot hold, and
    numbers in an object array as not numbers; a float past float32 warned of overflow."""
    import warnings

    shape = [np.size(default)] if np.ndim(default) else []
    record = tfl.encode_example({"other": 1})
    expected = tf.io.parse_example([record], {"x": tf.io.FixedLenFeature(shape, getattr(tf, dtype),
                                                                         default_value=default)})["x"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = tfl.FixedLenFeature(shape, dtype, default_value=default)
    assert_same(tfl.parse_example([record], {"x": spec})["x"], expected)


def test_tf_specs_are_refused_naming_the_spec_to_use(tf, backend):
    """A tf.io spec was refused as 'FixedLenFeature is not supported in parse_example',
    which reads as if this library had no FixedLenFeature."""
    record = tfl.encode_example({"x": 1})
    for spec in (tf.io.FixedLenFeature([], tf.int64), tf.io.VarLenFeature(tf.int64)):
        name = type(spec).__name__
        with pytest.raises(FeatureSpecError, match=f"not a tfrecord_lite spec. Use tfrecord_lite.{name} with"):
            tfl.parse_example([record], {"x": spec})
        with pytest.raises(FeatureSpecError, match="not a tfrecord_lite spec"):
            tfl.parse_sequence_example([record], {"x": spec})
