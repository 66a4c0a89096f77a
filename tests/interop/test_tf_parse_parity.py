"""Parsing against live TensorFlow beyond test_tf_example: generated SequenceExample specs
and records, empty batches, features of no values, and defaults with shapes, on both
backends. Where TensorFlow fails by a bug of its own, the test holds ours to what the
README says instead."""

from math import prod

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.errors import FeatureSpecError

from .test_tf_example import assert_same, tf_example

pytestmark = pytest.mark.interop
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KINDS = {"float32": "f", "int64": "i", "string": "b"}
ELEMENTS = {"f": st.floats(width=32, allow_nan=False), "i": st.integers(-2**63, 2**63 - 1), "b": st.binary(max_size=3)}
# TensorFlow keeps a default's constant by value, and 0.0 == -0.0: whichever zero a process
# used first is the default of every later spec of the other. Defaults hold no -0.0.
DEFAULTS = dict(ELEMENTS, f=ELEMENTS["f"].map(lambda x: x + 0.0))
dtypes = st.sampled_from(sorted(KINDS))


def tf_specs(tf, specs):
    return {name: eval(spec.to_tf(), {"tf": tf}) for name, spec in specs.items()} or None


def sequence_example(tf, context, lists):
    """A serialized SequenceExample: context {name: (kind, values)}, lists {name: [steps]}."""
    s = tf.train.SequenceExample()
    s.context.CopyFrom(tf_example(tf, context).features)
    for name, steps in lists.items():
        feature_list = s.feature_lists.feature_list[name]
        feature_list.SetInParent()  # a list of no steps is still there
        for step in steps:
            feature_list.feature.add().CopyFrom(tf_example(tf, {"x": step}).features.feature["x"])
    return s.SerializeToString()


@st.composite
def feature(draw, kind, count, empty=True):
    """(kind, values): mostly count values of kind; sometimes another count, another kind,
    or an empty Feature (no kind), which the specs must catch as TensorFlow does."""
    odd = draw(st.integers(0, 11 if empty else 10))
    if odd == 0:
        kind = draw(st.sampled_from(sorted(set("fib") - {kind})))
    elif odd == 1:
        count = draw(st.integers(0, 3))
    elif odd == 11:
        return ("e", [])
    return (kind, draw(st.lists(ELEMENTS[kind], min_size=count, max_size=count)))


def _features(draw, name, kinds, empty_fixed=True):
    """A spec of one of kinds for name, and a function drawing one record's features for it
    ({key: (kind, values)}, or {} when missing); empty_fixed: a FixedLenFeature's may be an
    empty Feature."""
    dtype = draw(dtypes)
    kind, wire = draw(st.sampled_from(kinds)), KINDS[dtype]
    count = st.integers(0, 3)
    if kind == "fixed":
        shape = draw(st.sampled_from([(), (2,), (1, 2), (0,)]))
        size = prod(shape)
        default = None
        if size and draw(st.booleans()):
            values = draw(st.lists(DEFAULTS[wire], min_size=size, max_size=size))
            default = np.array(values, dtype=object).reshape(shape).tolist()
        spec, count = tfl.FixedLenFeature(shape, dtype, default_value=default), st.just(size)
    elif kind == "var":
        spec = tfl.VarLenFeature(dtype)
    elif kind == "ragged":
        key = draw(st.sampled_from([None, f"{name}_v"]))  # value_key: another name's values
        spec = tfl.RaggedFeature(dtype, value_key=key, row_splits_dtype=draw(st.sampled_from(["int32", "int64"])))
    elif kind == "items":  # FixedLenSequenceFeature in parse_example: items of the shape, padded
        shape = draw(st.sampled_from([(), (2,)]))
        default = draw(st.one_of(st.none(), DEFAULTS[wire]))
        spec = tfl.FixedLenSequenceFeature(shape, dtype, allow_missing=True, default_value=default)
        count = st.integers(0, 2).map(lambda n: n * prod(shape))
    else:  # sparse, over one or two index features, indices out of range sometimes
        sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))
        keys = [f"{name}_i{d}" for d in range(len(sizes))]
        spec = tfl.SparseFeature(keys if len(keys) > 1 else keys[0], f"{name}_v", dtype,
                                 sizes if len(sizes) > 1 else sizes[0], already_sorted=draw(st.booleans()))

        def sparse(draw):
            n = draw(st.integers(0, 3))
            out = {key: ("i", draw(st.lists(st.integers(-1, size), min_size=n, max_size=n)))
                   for key, size in zip(keys, sizes) if draw(st.integers(0, 9))}
            return out | ({f"{name}_v": draw(feature(wire, n, False))} if draw(st.integers(0, 9)) else {})
        return spec, sparse
    key = getattr(spec, "value_key", None) or name

    def one(draw):
        if draw(st.integers(0, 4)) == 0:  # missing
            return {}
        return {key: draw(feature(wire, draw(count), empty_fixed or kind != "fixed"))}
    return spec, one


@st.composite
def example_batches(draw):
    """parse_example specs of every kind, and 1-4 records that mostly fit them."""
    specs, makers = {}, []
    for i in range(draw(st.integers(1, 4))):
        specs[f"k{i}"], maker = _features(draw, f"k{i}", ["fixed", "var", "ragged", "items", "sparse"])
        makers.append(maker)
    records = []
    for _ in range(draw(st.integers(1, 4))):
        mapping = {}
        for maker in makers:
            mapping |= maker(draw)
        records.append(mapping)
    return specs, records


@st.composite
def sequence_batches(draw):
    """Context and sequence specs, and 1-4 records that mostly fit them. A context
    FixedLenFeature is never an empty Feature: TensorFlow's two parsers differ there
    (test_a_context_feature_of_no_kind_is_missing)."""
    context, makers = {}, []
    for i in range(draw(st.integers(0, 3))):
        context[f"c{i}"], maker = _features(draw, f"c{i}", ["fixed", "var", "ragged"], empty_fixed=False)
        makers.append(maker)
    lists, steps = {}, []
    for i in range(draw(st.integers(0 if context else 1, 3))):
        name, dtype = f"s{i}", draw(dtypes)
        kind = draw(st.sampled_from(["fixed", "var", "ragged"]))
        count = st.integers(0, 3)
        if kind == "fixed":
            shape = draw(st.sampled_from([(), (2,), (1, 2)]))
            lists[name] = tfl.FixedLenSequenceFeature(shape, dtype, allow_missing=draw(st.booleans()))
            count = st.just(prod(shape))
        elif kind == "var":
            lists[name] = tfl.VarLenFeature(dtype)
        else:
            lists[name] = tfl.RaggedFeature(dtype)
        steps.append((name, KINDS[dtype], count))
    records = []
    for _ in range(draw(st.integers(1, 4))):
        parts = {"context": {}, "lists": {}}
        for maker in makers:
            parts["context"] |= maker(draw)
        for name, kind, count in steps:
            if draw(st.integers(0, 4)):  # else missing
                parts["lists"][name] = [draw(feature(kind, draw(count))) for _ in range(draw(st.integers(0, 3)))]
        records.append(parts)
    return context, lists, records


def _same_single(got, expected):
    """parse_single_* results: TensorFlow gives tensors (a context RaggedFeature dense)."""
    if hasattr(expected, "to_list") or hasattr(got, "to_list"):
        assert got.to_list() == expected.to_list()
    elif hasattr(expected, "indices"):
        assert_same(got, expected)
    else:
        exp = expected.numpy()
        if isinstance(exp, bytes):
            assert got == exp
        else:
            assert_same(np.asarray(got), expected)


@SETTINGS
@given(batch=sequence_batches())
def test_parse_sequence_example_matches_tf(tf, backend, batch):
    """Equal results where TensorFlow parses; where it fails, ours fails at the first
    record TensorFlow fails at (FixedLenFeature with and without defaults and shapes,
    FixedLenSequenceFeature with and without allow_missing, VarLenFeature, RaggedFeature)."""
    context, lists, parts = batch
    records = [sequence_example(tf, p["context"], p["lists"]) for p in parts]

    def tf_parse(n):
        return tf.io.parse_sequence_example(tf.constant(records[:n], tf.string, shape=[n]),
                                            tf_specs(tf, context), tf_specs(tf, lists))
    try:
        expected = tf_parse(len(records))
    except tf.errors.InvalidArgumentError:
        with pytest.raises(FeatureSpecError) as info:
            tfl.parse_sequence_example(records, context, lists)
        k = info.value.index
        if k:  # (no records: TensorFlow's empty-batch bug, test_empty_batches_match_tf)
            tf_parse(k)  # the records before ours parse ...
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf_parse(k + 1)  # ... and TensorFlow fails at the one ours names
        return
    got = tfl.parse_sequence_example(records, context, lists)
    for g, e in zip(got, expected):
        assert g.keys() == e.keys()
        for name in e:
            assert_same(g[name], e[name])
    single = tfl.parse_single_sequence_example(records[0], context, lists)
    expected = tf.io.parse_single_sequence_example(records[0], tf_specs(tf, context), tf_specs(tf, lists))
    for g, e in zip(single, expected):
        assert g.keys() == e.keys()
        for name in e:
            _same_single(g[name], e[name])


@SETTINGS
@given(batch=example_batches())
def test_parse_example_matches_tf_or_fails_where_it_does(tf, backend, batch):
    """As test_tf_example's, with defaults, SparseFeature (indices out of range too),
    RaggedFeature value_key, padded FixedLenSequenceFeature items, and records that do not
    fit: ours fails at the first record TensorFlow fails at."""
    specs, mappings = batch
    records = [tf_example(tf, m).SerializeToString() for m in mappings]

    def tf_parse(n):
        return tf.io.parse_example(tf.constant(records[:n], tf.string, shape=[n]), tf_specs(tf, specs))
    try:
        expected = tf_parse(len(records))
    except (tf.errors.InvalidArgumentError, ValueError):  # ValueError: SparseFeature's shape checks
        with pytest.raises(FeatureSpecError) as info:
            tfl.parse_example(records, specs)
        k = info.value.index
        tf_parse(k)
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
            tf_parse(k + 1)
        return
    try:
        got = tfl.parse_example(records, specs)
    except FeatureSpecError as exc:  # counts that even out over the batch: test_sparse_counts_...
        assert "index feature" in str(exc)
        return
    for name in specs:
        assert_same(got[name], expected[name])


def test_sparse_counts_are_checked_per_record(tf, backend):
    """A SparseFeature's index and value counts must agree in each record. TensorFlow checks
    them over the whole batch only, so one record's values missing and another's indices
    missing pair the first record's value with the second's index (a bug); ours names
    the first record whose counts differ."""
    spec = {"s": tfl.SparseFeature("i", "v", np.float32, 5)}
    records = [tfl.encode_example({"v": [7.0]}), tfl.encode_example({"i": [3]})]
    paired = tf.io.parse_example(records, tf_specs(tf, spec))["s"]
    assert paired.indices.numpy().tolist() == [[1, 3]] and paired.values.numpy().tolist() == [7.0]
    with pytest.raises(ValueError):
        tf.io.parse_example(records[:1], tf_specs(tf, spec))
    with pytest.raises(FeatureSpecError, match="1 values but index feature 'i' has 0") as info:
        tfl.parse_example(records, spec)
    assert info.value.index == 0


DEFAULTED = {
    "fixed": tfl.FixedLenFeature([2], np.float32, default_value=[1.5, -2.0]),
    "scalar": tfl.FixedLenFeature([], bytes, default_value=b"d'\"\x00"),
    "items": tfl.FixedLenSequenceFeature([2], np.int64, allow_missing=True, default_value=-7),
    "words": tfl.FixedLenSequenceFeature([], bytes, allow_missing=True, default_value=b"pad"),
    "extremes": tfl.FixedLenFeature([3], np.float32, default_value=[np.inf, -np.inf, np.nan]),
}


def test_printed_specs_parse_as_the_specs(tf, backend):
    """Schema.to_tf_code() is TensorFlow code that parses as the spec does, and to_code()
    tfrecord_lite code: FixedLenSequenceFeature's default_value (padding) was left out of
    to_tf(), so TensorFlow padded with zeros, and inf or nan defaults printed as bare names."""
    records = [tfl.encode_example(m) for m in (
        {"fixed": [3.0, 4.0], "scalar": b"s", "items": [1, 2, 3, 4], "words": [b"a"], "extremes": [1.0, 2.0, 3.0]},
        {"items": [5, 6], "words": [b"b", b"c", b"d"]},
        {},
    )]
    schema = tfl.Schema(DEFAULTED)
    tf_code, code = {"tf": tf}, {}
    exec(schema.to_tf_code(), tf_code)
    exec(schema.to_code(), code)
    expected = tf.io.parse_example(records, tf_code["features"])
    for got in (tfl.parse_example(records, schema), tfl.parse_example(records, code["features"])):
        for name in DEFAULTED:
            assert_same(got[name], expected[name])


ALL_KINDS = {
    "fixed": tfl.FixedLenFeature([2], np.int64, default_value=[1, 2]),
    "required": tfl.FixedLenFeature([1, 2], bytes),
    "var": tfl.VarLenFeature(np.float32),
    "ragged": tfl.RaggedFeature(bytes, row_splits_dtype="int64"),
    "sparse": tfl.SparseFeature("i", "v", np.float32, 4),
    "items": tfl.FixedLenSequenceFeature([2], np.float32, allow_missing=True),
}
STEPS = {"dense": tfl.FixedLenSequenceFeature([2], bytes), "var": tfl.VarLenFeature(np.int64),
         "ragged": tfl.RaggedFeature(np.float32)}


def test_empty_batches_match_tf(tf, backend):
    """No records: every output with a batch dimension of 0. In parse_sequence_example a
    context FixedLenFeature without a default makes TensorFlow fail ('Inconsistent max number
    of elements', a bug: parse_example gives the empty array); ours gives the empty array."""
    empty = tf.constant([], tf.string)
    expected = tf.io.parse_example(empty, tf_specs(tf, ALL_KINDS))
    got = tfl.parse_example([], ALL_KINDS)
    for name in ALL_KINDS:
        assert_same(got[name], expected[name])
    context = {k: s for k, s in ALL_KINDS.items() if k in ("fixed", "var", "ragged")}
    expected = tf.io.parse_sequence_example(empty, tf_specs(tf, context), tf_specs(tf, STEPS))
    for g, e in zip(tfl.parse_sequence_example([], context, STEPS), expected):
        assert g.keys() == e.keys()
        for name in e:
            assert_same(g[name], e[name])
    required = {"required": ALL_KINDS["required"]}
    with pytest.raises(tf.errors.InvalidArgumentError, match="Inconsistent max number of elements"):
        tf.io.parse_sequence_example(empty, tf_specs(tf, required))
    context, lists, lengths = tfl.parse_sequence_example([], required)
    assert context["required"].shape == (0, 1, 2) and context["required"].dtype == object
    assert lists == lengths == {}


@pytest.mark.parametrize("shape", [[0], [2, 0]])
def test_features_of_no_values_match_tf(tf, backend, shape):
    """A FixedLenFeature of a shape with no values: present with no values gives (batch,) +
    shape; missing is an error, a default cannot help (it has no values either)."""
    present = [tf_example(tf, {"a": ("i", [])}).SerializeToString()] * 2
    missing = present[:1] + [tf_example(tf, {"b": ("i", [1])}).SerializeToString()]
    for default in (None, []):
        spec = {"a": tfl.FixedLenFeature(shape, np.int64, default_value=default)}
        assert_same(tfl.parse_example(present, spec)["a"], tf.io.parse_example(present, tf_specs(tf, spec))["a"])
        sequences = [sequence_example(tf, {"a": ("i", [])}, {})] * 2
        assert_same(tfl.parse_sequence_example(sequences, spec)[0]["a"],
                    tf.io.parse_sequence_example(sequences, tf_specs(tf, spec))[0]["a"])
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.io.parse_example(missing, tf_specs(tf, spec))
        with pytest.raises(FeatureSpecError, match="'a'.*required") as info:
            tfl.parse_example(missing, spec)
        assert info.value.index == 1


def test_item_sequences_of_no_values(backend):
    """FixedLenSequenceFeature of a shape with no values: TensorFlow's parsers end the
    process (SIGFPE, a division by the item size). parse_example cannot tell how many items
    a record holds and refuses it; parse_sequence_example gives each step an empty item."""
    spec = {"a": tfl.FixedLenSequenceFeature([0], np.int64, allow_missing=True)}
    with pytest.raises(FeatureSpecError, match="'a'.*at least one value"):
        tfl.parse_example([tfl.encode_example({"a": np.zeros(0, np.int64)})], spec)
    records = [tfl.encode_sequence_example({}, {"a": [np.zeros(0, np.int64)] * n}) for n in (2, 0)]
    _, lists, lengths = tfl.parse_sequence_example(records, None, spec)
    assert lists["a"].shape == (2, 2, 0) and lengths["a"].tolist() == [2, 0]


def test_a_context_feature_of_no_kind_is_missing(tf, backend):
    """An empty Feature (no kind) is a missing feature for parse_example, TensorFlow's and
    ours. TensorFlow's parse_sequence_example counts it as a feature of no values instead (an
    error for a shape with values, even with a default, and none for a shape without);
    ours takes it as missing there too, so both parsers agree."""
    example = tf_example(tf, {"a": ("e", [])}).SerializeToString()
    sequence = sequence_example(tf, {"a": ("e", [])}, {})
    defaulted = {"a": tfl.FixedLenFeature([2], np.float32, default_value=[1, 2])}
    expected = tf.io.parse_example([example], tf_specs(tf, defaulted))["a"]
    assert_same(tfl.parse_example([example], defaulted)["a"], expected)
    assert_same(tfl.parse_sequence_example([sequence], defaulted)[0]["a"], expected)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Unexpected number of elements"):
        tf.io.parse_sequence_example([sequence], tf_specs(tf, defaulted))
    empty = {"a": tfl.FixedLenFeature([0], np.float32)}
    with pytest.raises(tf.errors.InvalidArgumentError, match="required"):
        tf.io.parse_example([example], tf_specs(tf, empty))
    assert tf.io.parse_sequence_example([sequence], tf_specs(tf, empty))[0]["a"].shape == (1, 0)
    for parse in (tfl.parse_example, tfl.parse_sequence_example):
        with pytest.raises(FeatureSpecError, match="'a'.*required"):
            parse([example], empty)


@pytest.mark.parametrize("dtype, default", [(np.int64, 7), (np.float32, 0.5), (bytes, b"x")])
def test_a_scalar_default_fills_the_shape(tf, backend, dtype, default):
    """TensorFlow refuses a default of one value for a shape of several (it reshapes the
    default); ours broadcasts it, and prints the whole default for TensorFlow."""
    records = [tfl.encode_example({"b": 1}), tfl.encode_example({"a": np.array([default] * 6, dtype)})]
    tf_dtype = {np.int64: tf.int64, np.float32: tf.float32, bytes: tf.string}[dtype]
    with pytest.raises(tf.errors.InvalidArgumentError, match="reshape"):
        tf.io.parse_example(records, {"a": tf.io.FixedLenFeature([2, 3], tf_dtype, default_value=default)})
    spec = {"a": tfl.FixedLenFeature([2, 3], dtype, default_value=default)}
    got = tfl.parse_example(records, spec)["a"]
    assert got.shape == (2, 2, 3) and (got[0] == default).all()
    assert_same(got, tf.io.parse_example(records, tf_specs(tf, spec))["a"])


def test_zero_defaults_keep_their_sign(tf, backend):
    """TensorFlow keeps a default's constant by value, and 0.0 == -0.0: a spec defaulting to
    one zero gets whichever zero the process used first (a bug). Ours keeps each sign."""
    records = [tfl.encode_example({"b": 1})]
    signs = []
    for zero in (-0.0, 0.0):
        tf_spec = {"a": tf.io.FixedLenFeature([], tf.float32, default_value=zero)}
        signs.append(tf.io.parse_example(records, tf_spec)["a"].numpy().view(np.uint32).tolist())
        got = tfl.parse_example(records, {"a": tfl.FixedLenFeature([], np.float32, default_value=zero)})["a"]
        assert got.view(np.uint32).tolist() == [np.float32(zero).view(np.uint32)]
    assert signs[0] == signs[1]


@pytest.mark.parametrize("index_key, size", [("i", [5]), ("i", (5,)), (["i"], 5), (("i", "j"), [5, 3]), ("i", 5)])
def test_printed_sparse_specs_run_under_tf(tf, backend, index_key, size):
    """to_tf() printed the size as given: a list beside one index name, or an int beside a
    list of them, which TensorFlow refuses ('vocab_size has to be a Tensor or Python int')."""
    spec = tfl.SparseFeature(index_key, "v", np.float32, size)
    record = tfl.encode_example({"i": [1], "j": [2], "v": [2.5]})
    expected = tf.io.parse_example([record], {"s": eval(spec.to_tf(), {"tf": tf})})["s"]
    assert_same(tfl.parse_example([record], {"s": spec})["s"], expected)


def test_printed_raw_tensor_specs_run_under_tf(tf, backend):
    """A RawTensorFeature's TF code ended in a comment that took the comma after it (a
    SyntaxError before the next feature); it runs now, and decode_raw of what it parses
    is the array ours gives."""
    schema = tfl.Schema(img=tfl.RawTensorFeature([2, 3], np.uint16), y=tfl.FixedLenFeature([], np.int64))
    image = np.arange(6, dtype=np.uint16).reshape(2, 3) * 1000
    records = tfl.encode_examples({"img": image[None], "y": [7]}, raw="img")
    scope = {"tf": tf}
    exec(schema.to_tf_code(), scope)
    parsed = tf.io.parse_example(records, scope["features"])
    raw = tf.reshape(tf.io.decode_raw(parsed["img"], tf.uint16), [-1, 2, 3]).numpy()
    ours = tfl.parse_example(records, schema)
    assert np.array_equal(ours["img"], raw) and ours["y"].tolist() == parsed["y"].numpy().tolist() == [7]


def test_a_key_read_as_two_dtypes_is_refused_as_tf_refuses_it(tf, backend):
    """TensorFlow refuses the spec up front; ours failed only at a record holding the key,
    blaming it for one spec's dtype, and parsed a batch without it."""
    specs = {"r": tfl.RaggedFeature(np.float32, value_key="i"), "i": tfl.FixedLenFeature([2], np.int64,
                                                                                      default_value=[0, 0])}
    records = [tfl.encode_example({"x": 1})]
    with pytest.raises(ValueError):
        tf.io.parse_example(records, tf_specs(tf, specs))
    with pytest.raises(FeatureSpecError, match="'i' reads 'i' as int64, but feature 'r' reads it as float32"):
        tfl.parse_example(records, specs)
