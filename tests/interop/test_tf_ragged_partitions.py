"""RaggedFeature partitions against live TensorFlow: generated nested rows written as values
and partition features of every kind, parsed by tf.io (validate=True) and by ours, in
Examples and in SequenceExamples, on both backends."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite.errors import FeatureSpecError

from .test_tf_parse_parity import sequence_example
from .test_tf_example import tf_example

pytestmark = pytest.mark.interop
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KINDS = ["RowSplits", "RowLengths", "RowStarts", "RowLimits", "ValueRowIds", "UniformRowLength"]


def _features(partitions, rows):
    """The value and partition features ({key: ("i", values)}) of nested rows: rows[k] the
    child counts of the level-k rows, values the innermost items."""
    out = {}
    for k, (kind, arg) in enumerate(partitions):
        counts = np.array(rows[k], dtype=np.int64)
        ends = np.cumsum(counts)
        out[f"p{k}"] = ("i", {"RowSplits": [0, *ends], "RowLengths": counts, "RowStarts": ends - counts,
                              "RowLimits": ends, "UniformRowLength": None,
                              "ValueRowIds": np.repeat(np.arange(len(counts)), counts)}[kind])
    return {k: (kind, [int(v) for v in vals]) for k, (kind, vals) in out.items() if vals is not None}


@st.composite
def nested(draw, partitions):
    """One record's (or step's) features: level-k rows of any number of children (or of
    UniformRowLength's length; the last of ValueRowIds' at least one), the innermost of values."""
    rows, count = [], draw(st.integers(0, 3))
    for kind, length in partitions:
        children = [length if kind == "UniformRowLength" else draw(st.integers(0, 3)) for _ in range(count)]
        if kind == "ValueRowIds" and children and not children[-1]:  # ids cannot end in an empty row
            children[-1] = 1
        rows.append(children)
        count = sum(children)
    features = _features(partitions, rows)
    features["v"] = ("i", draw(st.lists(st.integers(-9, 9), min_size=count, max_size=count)))
    return features


partition_lists = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 2)), min_size=1, max_size=3)


def specs(module, partitions, dtype, splits):
    made = [getattr(module.RaggedFeature, kind)(length if kind == "UniformRowLength" else f"p{k}")
            for k, (kind, length) in enumerate(partitions)]
    return {"r": module.RaggedFeature(dtype, value_key="v", partitions=made, row_splits_dtype=splits,
                                      validate=True)}


def to_list(value):
    return value.to_list() if hasattr(value, "to_list") else np.asarray(value).tolist()


@SETTINGS
@given(data=st.data(), partitions=partition_lists, splits=st.sampled_from(["int32", "int64"]))
def test_partitions_in_examples_match_tf(tf, backend, data, partitions, splits):
    """Partitions were refused ("not supported"); each kind, nested up to three deep with
    UniformRowLength inside or outside, now parses as TensorFlow's, batched and single."""
    records = [tf_example(tf, data.draw(nested(partitions))).SerializeToString()
               for _ in range(data.draw(st.integers(1, 3)))]
    theirs = specs(tf.io, partitions, tf.int64, getattr(tf, splits))
    ours = specs(tfl, partitions, np.int64, splits)
    got = tfl.parse_example(records, ours)["r"]
    assert to_list(got) == to_list(tf.io.parse_example(records, theirs)["r"])
    inner = got
    while isinstance(inner, tfl.RaggedValue):
        assert inner.row_splits.dtype == splits
        inner = inner.values
    single = tfl.parse_single_example(records[0], ours)["r"]
    assert to_list(single) == to_list(tf.io.parse_single_example(records[0], theirs)["r"])


@SETTINGS
@given(data=st.data(), partitions=partition_lists)
def test_partitions_in_sequence_examples_match_tf(tf, backend, data, partitions):
    """A sequence RaggedFeature's partitions split each step's values by feature lists of
    the same steps; one in the context by context features."""
    records = []
    for _ in range(data.draw(st.integers(1, 3))):
        steps = [data.draw(nested(partitions)) for _ in range(data.draw(st.integers(0, 3)))]
        keys = steps[0].keys() if steps else ["v"]
        records.append(sequence_example(tf, data.draw(nested(partitions)),
                                        {key: [step[key] for step in steps] for key in keys}))
    theirs, ours = specs(tf.io, partitions, tf.int64, tf.int64), specs(tfl, partitions, np.int64, "int64")
    expected = tf.io.parse_sequence_example(records, theirs, theirs)
    context, lists, _ = tfl.parse_sequence_example(records, ours, ours)
    assert to_list(context["r"]) == to_list(expected[0]["r"])
    assert to_list(lists["r"]) == to_list(expected[1]["r"])
    expected = tf.io.parse_single_sequence_example(records[0], theirs, theirs)
    context, lists = tfl.parse_single_sequence_example(records[0], ours, ours)
    assert to_list(context["r"]) == to_list(expected[0]["r"])
    assert to_list(lists["r"]) == to_list(expected[1]["r"])


@pytest.mark.parametrize("kind, partition, values", [
    ("RowSplits", [0, 2, 5], 4),     # ends past the values
    ("RowSplits", [1, 4], 3),        # does not start at 0
    ("RowSplits", [0, 3, 1, 4], 4),  # descending
    ("RowLengths", [1, 1], 3),       # short of the values
    ("RowLengths", [3, -1], 2),      # negative
    ("RowLimits", [2, 1, 3], 3),     # descending
    ("RowStarts", [1, 2], 3),        # does not start at 0
    ("ValueRowIds", [0, 2, 1], 3),   # descending
    ("ValueRowIds", [0, 0], 3),      # one id short
    ("UniformRowLength", None, 3),   # 3 values are no rows of 2
])
def test_partitions_that_do_not_fit_are_refused_as_tf_validates(tf, backend, kind, partition, values):
    """TensorFlow refuses these with validate=True (without it, it gives rows made of other
    records' values, or drops values); ours refuses them always, naming feature and record."""
    good = {"v": ("i", [1]), "p": ("i", {"RowSplits": [0, 1], "ValueRowIds": [0], "RowStarts": [0]}.get(kind, [1]))}
    if kind == "UniformRowLength":
        good = {"v": ("i", [1, 2])}
    bad = {"v": ("i", list(range(values)))} | ({} if partition is None else {"p": ("i", partition)})
    records = [tf_example(tf, m).SerializeToString() for m in (good, bad)]
    theirs = tf.io.RaggedFeature(tf.int64, value_key="v", validate=True, partitions=[
        tf.io.RaggedFeature.UniformRowLength(2) if partition is None else getattr(tf.io.RaggedFeature, kind)("p")])
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):  # ValueError: ids and values
        tf.io.parse_example(records[1:], {"r": theirs})
    ours = tfl.RaggedFeature(np.int64, value_key="v", partitions=[
        tfl.RaggedFeature.UniformRowLength(2) if partition is None else getattr(tfl.RaggedFeature, kind)("p")])
    with pytest.raises(FeatureSpecError, match=f"feature 'r': {kind}") as info:
        tfl.parse_example(records, {"r": ours})
    assert info.value.index == 1
    assert tfl.parse_example(records[:1], {"r": ours})["r"].to_list() == to_list(
        tf.io.parse_example(records[:1], {"r": theirs})["r"])


def test_partitions_are_checked_per_record(tf, backend):
    """TensorFlow validates partitions over the whole batch: row starts that do not start at
    0 in the second record pass, and the first record's row takes the second's first value.
    Ours names the record."""
    records = [tfl.encode_example({"v": [1, 2], "p": [0]}), tfl.encode_example({"v": [3, 4, 5], "p": [1, 2]})]
    theirs = tf.io.RaggedFeature(tf.int64, value_key="v", validate=True,
                                 partitions=[tf.io.RaggedFeature.RowStarts("p")])
    assert to_list(tf.io.parse_example(records, {"r": theirs})["r"]) == [[[1, 2, 3]], [[4], [5]]]
    ours = tfl.RaggedFeature(np.int64, value_key="v", partitions=[tfl.RaggedFeature.RowStarts("p")])
    with pytest.raises(FeatureSpecError, match="feature 'r': RowStarts.'p'.: row starts start at 1, not 0") as info:
        tfl.parse_example(records, {"r": ours})
    assert info.value.index == 1


def test_tf_partitions_and_printed_specs(tf, backend):
    """tf.io.RaggedFeature's partition objects are taken as ours; to_tf() prints a spec
    TensorFlow parses the same."""
    spec = tfl.RaggedFeature(np.int64, value_key="v", partitions=[tf.io.RaggedFeature.RowLengths("p"),
                                                                  tf.io.RaggedFeature.UniformRowLength(2)])
    assert spec.partitions == (tfl.RaggedFeature.RowLengths("p"), tfl.RaggedFeature.UniformRowLength(2))
    record = tfl.encode_example({"v": [1, 2, 3, 4, 5, 6], "p": [1, 0, 2]})
    expected = tf.io.parse_example([record], {"r": eval(spec.to_tf(), {"tf": tf})})["r"]
    assert to_list(tfl.parse_example([record], {"r": spec})["r"]) == to_list(expected)
