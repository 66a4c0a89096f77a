"""infer_schema on Examples and SequenceExamples, and the code Schema emits (to_code for
tfrecord_lite, to_tf_code for TensorFlow), exec'd and used to parse the records it came from."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.features import spec_code

_names = st.sampled_from(["a", "b", "label", "x y", "ü"])
_VALUES = {
    int: st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=4),
    float: st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=4),
    bytes: st.lists(st.binary(max_size=6), min_size=1, max_size=4),
}


def _kind(values):
    return type(values[0])


@st.composite
def _examples(draw):
    """Records whose features keep one kind each across records (as a schema needs)."""
    kinds = draw(st.dictionaries(_names, st.sampled_from([int, float, bytes]), min_size=1, max_size=4))
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        row = {}
        for name, kind in kinds.items():
            if draw(st.booleans()) or not rows:
                row[name] = draw(_VALUES[kind])
        rows.append(row)
    return rows


def _exec(code):
    namespace = {}
    exec(code, namespace)
    return namespace


@given(_examples())
def test_to_code_of_inferred_example_schema_parses_the_records(backend, rows):
    records = [tfl.encode_example(row) for row in rows]
    schema = tfl.infer_schema(records)
    assert type(schema) is tfl.Schema
    features = _exec(schema.to_code())["features"]
    assert _exec(tfl.Schema(features).to_code())["features"].keys() == features.keys()
    assert tfl.Schema(features).to_code() == schema.to_code()  # the emitted code rebuilds it exactly
    parsed = tfl.parse_example(records, features)
    for name, spec in features.items():
        present = [i for i, row in enumerate(rows) if name in row]
        if isinstance(spec, tfl.FixedLenFeature):
            assert len(present) == len(rows)
            # A slice keeps the object dtype: np.ravel of one bytes value makes an "S" array,
            # which drops trailing NULs (b"\x00" became b"").
            got = [parsed[name][i:i + 1].ravel().tolist() for i in present]
        else:
            sparse = parsed[name]
            got = [sparse.values[sparse.indices[:, 0] == i].tolist() for i in present]
        want = [np.asarray(rows[i][name], dtype=np.float32).tolist() if _kind(rows[i][name]) is float
                else list(rows[i][name]) for i in present]
        assert got == want, name


def _sequences():
    return [
        tfl.encode_sequence_example({"id": 1, "name": b"a"},
                                    {"tokens": [[1, 2], [3], [4, 5, 6]], "score": [[0.5], [1.5]]}),
        tfl.encode_sequence_example({"id": 2, "name": b"b"}, {"score": [[2.5]]}),
        tfl.encode_sequence_example({"id": 3, "name": b"c"}, {"tokens": [[7]], "score": []}),
    ]


def test_sequence_examples_give_both_parts(backend, tmp_path):
    path = tmp_path / "seq.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write_many(_sequences())
    schema = tfl.infer_schema(path)
    assert isinstance(schema, tfl.SequenceSchema)
    context, lists = schema  # unpacks as the two spec arguments of parse_sequence_example
    assert context == {"id": tfl.FixedLenFeature([], np.int64), "name": tfl.FixedLenFeature([], bytes)}
    assert lists == {"score": tfl.FixedLenSequenceFeature([], np.float32, allow_missing=False),
                     "tokens": tfl.VarLenFeature(np.int64)}
    assert schema.to_tf_code() == (
        "context_features = {\n    'id': tf.io.FixedLenFeature([], tf.int64),\n"
        "    'name': tf.io.FixedLenFeature([], tf.string),\n}\n"
        "sequence_features = {\n"
        "    'score': tf.io.FixedLenSequenceFeature([], tf.float32, allow_missing=False),\n"
        "    'tokens': tf.io.VarLenFeature(tf.int64),\n}")

    code = _exec(schema.to_code())
    ctx, seq, lengths = tfl.parse_sequence_example(_sequences(), code["context_features"],
                                                   code["sequence_features"])
    assert ctx["id"].tolist() == [1, 2, 3] and ctx["name"].tolist() == [b"a", b"b", b"c"]
    assert seq["score"].tolist() == [[0.5, 1.5], [2.5, 0.0], [0.0, 0.0]]
    assert lengths["score"].tolist() == [2, 1, 0]
    assert seq["tokens"].values.tolist() == [1, 2, 3, 4, 5, 6, 7]


def test_sequence_schema_marks_lists_some_records_lack(backend):
    records = _sequences()[:2]  # the second has no "tokens" list at all
    _, lists = tfl.infer_schema(records)
    assert lists["tokens"] == tfl.VarLenFeature(np.int64)
    _, lists = tfl.infer_schema([tfl.encode_sequence_example({}, {"t": [[1], [2]]}),
                                 tfl.encode_sequence_example({}, {"u": [[1.0]]})])
    assert lists == {"t": tfl.FixedLenSequenceFeature([], np.int64, allow_missing=True),
                     "u": tfl.FixedLenSequenceFeature([], np.float32, allow_missing=True)}


def test_sequence_list_of_mixed_kinds_names_the_record(backend):
    records = [tfl.encode_sequence_example({}, {"t": [[1], [2]]}),
               tfl.encode_sequence_example({}, {"t": [[1], [b"x"]]})]
    with pytest.raises(tfl.FeatureSpecError, match="'t' has values of more than one type") as info:
        tfl.infer_schema(records)
    assert info.value.index == 1


def test_bad_record_in_a_file_is_named_by_file_offset_and_index(backend, tmp_path):
    """A sample read from files across several read chunks: the error names the file, the
    frame's offset and the record's index in it, like every other reading error."""
    good = [tfl.encode_example({"a": np.full(k % 50, 2**40, np.int64)}) for k in range(3000)]  # ~500 KB
    for bad, kind, message in [(tfl.encode_example({"a": np.ones(2, np.float32)}), tfl.FeatureSpecError,
                                "'a' has values of more than one type"),
                               (b"\x0a\x05garbage", tfl.ExampleDecodeError, "malformed")]:
        path = tmp_path / "ex.tfrecord"
        records = good[:2500] + [bad] + good[2500:]
        with tfl.TFRecordWriter(path) as w:
            w.write_many(records)
        with pytest.raises(kind, match=message) as info:
            tfl.infer_schema(path, sample=2800)
        offset = sum(16 + len(r) for r in records[:2500])
        assert (info.value.path, info.value.offset, info.value.index) == (str(path), offset, 2500)
        assert f"byte offset {offset}" in str(info.value)
        # Records after the sample are never looked at.
        assert tfl.infer_schema(path, sample=2500) == {"a": tfl.VarLenFeature(np.int64)}


def test_a_record_neither_example_nor_sequence_example_is_a_malformed_example(backend):
    """Such records are mostly meant as Examples (and `stats` says so), but infer_schema
    named them "malformed SequenceExample", the decoder it tries first."""
    records = [tfl.encode_example({"a": 1}), b"\x0a\x05garbage"]
    with pytest.raises(tfl.ExampleDecodeError, match="malformed Example: ") as info:
        tfl.infer_schema(records)
    assert "SequenceExample" not in str(info.value) and info.value.index == 1
    # A SequenceExample whose feature lists are broken stays a malformed SequenceExample.
    broken = b"\x12\x03\x0a\x01\xff"  # feature_lists {feature_list {<a bad key field>}}
    with pytest.raises(tfl.ExampleDecodeError, match="malformed SequenceExample: "):
        tfl.infer_schema([broken])


def test_decode_sequence_example(backend):
    context, lists = tfl.decode_sequence_example(_sequences()[0])
    assert context["id"].tolist() == [1] and context["name"] == [b"a"]
    assert [s.tolist() for s in lists["tokens"]] == [[1, 2], [3], [4, 5, 6]]
    assert [s.tolist() for s in lists["score"]] == [[0.5], [1.5]]
    (_, lists), = tfl.decode_sequence_examples(_sequences()[2:])
    assert lists["score"] == [] and [s.tolist() for s in lists["tokens"]] == [[7]]
    assert tfl.decode_sequence_example(tfl.encode_example({"a": 1}))[1] == {}


@pytest.mark.parametrize("spec", [
    tfl.FixedLenFeature([2, 2], np.int64, default_value=7),
    tfl.FixedLenFeature([], bytes, default_value=b"x"),
    tfl.VarLenFeature(np.float32),
    tfl.RaggedFeature(np.int64, value_key="a", row_splits_dtype="int64"),
    tfl.SparseFeature(["r", "c"], "v", np.float32, [2, 3], already_sorted=True),
    tfl.FixedLenSequenceFeature([3], np.float32, allow_missing=True, default_value=1.5),
    tfl.RawTensorFeature((2, 3), np.uint8),
    tfl.RawTensorFeature((4,), ">f4", default_value=0.5),
])
def test_spec_code_rebuilds_every_spec_type(spec):
    code = spec_code(spec)
    rebuilt = eval(code, {"tfl": tfl, "np": np})
    assert type(rebuilt) is type(spec) and spec_code(rebuilt) == code
    for field in ("shape", "dtype", "value_key", "index_key", "size", "allow_missing", "row_splits_dtype"):
        assert getattr(rebuilt, field, None) == getattr(spec, field, None), field
    if getattr(spec, "default_value", None) is not None:
        assert np.array_equal(rebuilt.default_value, spec.default_value)


def _empty_feature_example(name=b"e"):
    """An Example whose feature `name` is a Feature with no value list set."""
    entry = b"\x0a" + bytes([len(name)]) + name + b"\x12\x00"
    return b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry


def test_a_feature_only_ever_empty_is_marked_as_of_any_dtype(backend):
    """A feature only ever seen as an empty Feature (no kind) has no dtype to infer: the
    schema gave VarLenFeature(float32) as if the records said float32. It still does (any
    dtype parses it, to no values), but marks the name in .untyped and says so in the code."""
    records = [_empty_feature_example(), tfl.encode_example({"a": 1})]
    schema = tfl.infer_schema(records)
    assert schema == {"e": tfl.VarLenFeature(np.float32), "a": tfl.VarLenFeature(np.int64)}
    assert schema.untyped == {"e"}
    assert "'e': tfl.VarLenFeature(np.float32),  # only empty Features seen: any dtype parses it" in schema.to_code()
    assert "'a': tfl.VarLenFeature(np.int64),\n" in schema.to_code()
    assert "tf.io.VarLenFeature(tf.float32),  # only empty Features seen" in schema.to_tf_code()
    for dtype in (np.float32, np.int64, bytes):
        assert tfl.parse_example(records, {"e": tfl.VarLenFeature(dtype)})["e"].values.size == 0
    # Once a record gives it a type, that is its dtype, and nothing is marked.
    typed = tfl.infer_schema(records + [tfl.encode_example({"e": [b"x"]})])
    assert typed["e"] == tfl.VarLenFeature(bytes) and not typed.untyped
    context, lists = tfl.infer_schema([tfl.encode_sequence_example({}, {"t": [[1]]})])
    assert not context.untyped and not lists.untyped


def test_a_feature_of_two_types_names_both_records_and_says_what_to_do(backend):
    """The error named only the record of the second type and gave no hint."""
    records = [tfl.encode_example({"b": 1}), tfl.encode_example({"a": 1}), tfl.encode_example({"a": [0.5]})]
    with pytest.raises(tfl.FeatureSpecError) as info:
        tfl.infer_schema(records)
    err = info.value
    assert err.index == 2 and "fix or leave out the records" in err.hint
    assert str(err).startswith("record 2: feature 'a' has values of more than one type (float32, int64): "
                               "float32 here, int64 in record 1. A spec gives each feature one type")
    lists = [tfl.encode_sequence_example({}, {"t": [[1], [2]]}), tfl.encode_sequence_example({}, {"t": [[b"x"]]})]
    with pytest.raises(tfl.FeatureSpecError, match="string here, int64 in record 0. A spec") as info:
        tfl.infer_schema(lists)
    assert info.value.index == 1


def test_infer_schema_reads_an_iterator_no_further_than_the_sample(backend):
    """An iterable source was read to its end (list(source)) before the sample was cut: an
    endless or huge one (a dataset, a generator) hung or filled memory."""
    import itertools

    taken = []

    def records():  # endless, but fails rather than hang when read too far
        for i in itertools.count():
            taken.append(i)
            assert i < 100, "read past the sample"
            yield tfl.encode_example({"a": [i]})

    assert tfl.infer_schema(records(), sample=3) == {"a": tfl.FixedLenFeature([], np.int64)}
    assert len(taken) == 3


def test_infer_schema_refuses_a_sample_it_cannot_take(backend, tmp_path):
    """sample=-1 dropped a list's last record ([:-1]) where a file's read none; one bytes
    record was iterated as ints ('int is not a serialized record')."""
    records = [tfl.encode_example({"a": [1]})] * 3
    path = tmp_path / "a.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write_many(records)
    for source in (records, path):
        for sample in (-1, -3):
            with pytest.raises(tfl.InvalidArgumentError, match=f"number of records >= 0, not {sample}"):
                tfl.infer_schema(source, sample=sample)
        assert tfl.infer_schema(source, sample=0) == {}
        with pytest.raises(tfl.ArgumentTypeError, match="sample must be an int, not float"):
            tfl.infer_schema(source, sample=2.5)
    with pytest.raises(tfl.ArgumentTypeError, match="not one serialized record. Pass a list of records"):
        tfl.infer_schema(records[0])
    assert tfl.infer_schema(records, sample=np.int64(1)) == {"a": tfl.FixedLenFeature([], np.int64)}
