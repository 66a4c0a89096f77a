"""Example/SequenceExample codec: hand-built wire encodings, merge semantics, round trips,
backend parity and malformed input, for both backends."""

import io
import os
import re
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import _native
from tfrecord_lite.errors import ArgumentTypeError, ExampleDecodeError, FeatureSpecError, TFRecordError

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- a tiny wire writer, independent of both backends --------------------------------------

def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def ld(field, body):
    return varint(field << 3 | 2) + varint(len(body)) + body


def floats_packed(vals):
    return ld(2, ld(1, struct.pack(f"<{len(vals)}f", *vals)))


def floats_unpacked(vals):
    return ld(2, b"".join(varint(1 << 3 | 5) + struct.pack("<f", v) for v in vals))


def ints_packed(vals):
    return ld(3, ld(1, b"".join(varint(v) for v in vals)))


def ints_unpacked(vals):
    return ld(3, b"".join(varint(1 << 3) + varint(v) for v in vals))


def bytes_list(vals):
    return ld(1, b"".join(ld(1, v) for v in vals))


def entry(key, feature):
    return ld(1, ld(1, key.encode()) + ld(2, feature))


def example(*entries):
    return ld(1, b"".join(entries))


def decode(backend, records, keys=None, raw=None):
    names, cols = backend.example.decode_examples(records, keys, raw)
    return dict(zip(names, cols))


# -- decoding ------------------------------------------------------------------------------

def test_packed_and_unpacked_lists_decode_alike(backend):
    recs = [example(entry("f", floats_packed([1.5, -2])), entry("i", ints_packed([-1, 2**63 - 1]))),
            example(entry("f", floats_unpacked([1.5, -2])), entry("i", ints_unpacked([-1, 2**63 - 1])))]
    out = tfl.parse_example(recs, {"f": tfl.FixedLenFeature([2], np.float32), "i": tfl.FixedLenFeature([2], "int64")})
    assert out["f"].tolist() == [[1.5, -2], [1.5, -2]]
    assert out["i"].tolist() == [[-1, 2**63 - 1]] * 2
    assert _native.implementation == backend.name


def test_merge_semantics(backend):
    rec = (example(entry("a", ints_packed([1])), entry("b", floats_packed([1])))
           + example(entry("a", ints_packed([2, 3])))   # repeated `features` merges, a's last entry wins
           + varint(99 << 3) + varint(7))                # unknown field
    cols = decode(backend, [rec])
    assert cols["a"][4].tolist() == [2, 3] and cols["b"][3].tolist() == [1.0]
    # Same kind twice concatenates; switching the oneof clears.
    feat = ints_packed([1]) + ints_packed([2]) + floats_packed([9]) + floats_packed([8])
    cols = decode(backend, [example(entry("x", feat))])
    assert cols["x"][1].tolist() == [2] and cols["x"][3].tolist() == [9, 8] and cols["x"][4].size == 0
    # Value before key, two value fields (merged), key repeated (last wins).
    rec = example(ld(1, ld(2, ints_packed([5])) + ld(1, b"zz") + ld(2, ints_packed([6])) + ld(1, b"k")))
    assert decode(backend, [rec])["k"][4].tolist() == [5, 6]


def test_unknown_fields_of_every_wire_type_are_skipped(backend):
    junk = (varint(20 << 3 | 0) + varint(-5) + varint(21 << 3 | 1) + bytes(8) + varint(22 << 3 | 5) + bytes(4)
            + ld(23, b"abc") + varint(24 << 3 | 3) + varint(25 << 3 | 0) + varint(1) + varint(24 << 3 | 4))
    feat = ld(3, junk + ld(1, varint(7)))
    rec = junk + ld(1, junk + ld(1, ld(1, b"a") + ld(2, junk + feat)))
    assert decode(backend, [rec])["a"][4].tolist() == [7]
    # Unknown fields inside a map entry: protobuf moves the whole entry to the unknown fields,
    # so the feature is absent, in both backends (tf.io.parse_example rejects the record).
    rec = example(ld(1, junk + ld(1, b"a") + ld(2, feat)))
    assert "a" not in decode(backend, [rec])
    with _native.use(backend.other):
        assert "a" not in decode(backend, [rec])


def test_empty_feature_empty_list_and_missing(backend):
    rec = example(entry("e", b""), entry("l", ld(2, b"")))
    cols = decode(backend, [rec, example()], ["e", "l", "m"])
    assert cols["e"][1].tolist() == [4, 0] and cols["l"][1].tolist() == [2, 0] and cols["m"][1].tolist() == [0, 0]


@pytest.mark.parametrize("data, what", [
    (b"\x0a", "varint"), (b"\x0a\x05\x0a", "past the end"), (b"\x00", "tag"),
    (b"\x0f", "wire type"), (b"\x0c", "end-group"), (b"\x0b", "past the end"), (b"\x08" + b"\xff" * 11, "varint"),
    (example(entry("f", ld(2, ld(1, b"abc")))), "multiple of 4"), (ld(1, ld(1, ld(1, b"\xff") + ld(2, b""))), "UTF-8"),
])
def test_malformed_input_names_the_record(backend, data, what):
    with pytest.raises(ExampleDecodeError) as info:
        backend.example.decode_examples([example(), data])
    assert info.value.index == 1 and what in str(info.value)
    with _native.use(backend.other), pytest.raises(ExampleDecodeError) as theirs:
        _native.example.decode_examples([example(), data])
    assert str(theirs.value) == str(info.value)


def test_overread_guard(backend):
    rec = example(entry("b", bytes_list([b"x" * 10])))
    view = memoryview(rec + b"\x0a")[:-1]
    assert decode(backend, [view])["b"][5] == [b"x" * 10]
    with pytest.raises(ExampleDecodeError):
        backend.example.decode_examples([memoryview(rec)[:-1]])


def test_deep_groups_fail_cleanly(backend):
    deep = varint(5 << 3 | 3) * 200 + varint(5 << 3 | 4) * 200
    with pytest.raises(ExampleDecodeError):
        backend.example.decode_examples([deep])
    ok = varint(5 << 3 | 3) * 20 + varint(5 << 3 | 4) * 20
    assert backend.example.decode_examples([ok]) == ([], [])


# -- the spec layer ------------------------------------------------------------------------

def test_spec_errors_name_feature_and_record(backend):
    recs = [tfl.encode_example({"a": [1, 2]}), tfl.encode_example({"a": [1.0]}), tfl.encode_example({"b": 1})]
    with pytest.raises(FeatureSpecError, match="'a'.*float32.*int64") as info:
        tfl.parse_example(recs[:2], {"a": tfl.VarLenFeature(np.int64)})
    assert info.value.index == 1
    with pytest.raises(FeatureSpecError, match="2 values") as info:
        tfl.parse_example([recs[0]], {"a": tfl.FixedLenFeature([], np.int64)})
    assert info.value.index == 0
    with pytest.raises(FeatureSpecError, match="required") as info:
        tfl.parse_example([recs[0], recs[2]], {"a": tfl.FixedLenFeature([2], np.int64)})
    assert info.value.index == 1


_BAD = {  # records for the spec {"a": FixedLenFeature([], int64)}, and the error each gives alone
    "good": (lambda: tfl.encode_example({"a": np.array([1], np.int64)}), None),
    "type": (lambda: tfl.encode_example({"a": [b"x"]}), FeatureSpecError),
    "shape": (lambda: tfl.encode_example({"a": np.array([1, 2], np.int64)}), FeatureSpecError),
    "missing": (lambda: tfl.encode_example({}), FeatureSpecError),
    "malformed": (lambda: b"\x0a\x05\x0a\x03", ExampleDecodeError),
}


BAD_KINDS = st.lists(st.sampled_from(sorted(_BAD)), min_size=1, max_size=8).filter(lambda k: set(k) != {"good"})


def assert_first_bad_record_named(parsers, directory, kinds):
    """Each parser of a batch (records, spec) fails at the first record that is not good,
    with the error that record gives alone, from a list and from a file's RecordBatch (whose
    error names the file's record)."""
    first = next(i for i, k in enumerate(kinds) if k != "good")
    records = [_BAD[k][0]() for k in kinds]
    spec = {"a": tfl.FixedLenFeature([], np.int64)}
    path = directory / "x.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write(b"before")  # file indices are one past batch positions
        w.write_many(records)
    batch = next(tfl.TFRecordReader(path).record_batches(len(records) + 1))[1:]
    for parse in parsers:
        with pytest.raises(_BAD[kinds[first]][1]) as err:
            parse(records, spec)
        assert err.value.index == first
        with pytest.raises(_BAD[kinds[first]][1]) as err:
            parse(batch, spec)
        assert (err.value.path, err.value.index) == (os.fspath(path), first + 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=BAD_KINDS)
def test_a_batch_error_names_its_first_bad_record(backend, tmp_path_factory, kinds):
    """As TensorFlow, which checks each record whole in turn: a malformed record (found
    while decoding) or a type error after a shape or missing-value error (found later, by
    the spec's checks) no longer hides an earlier bad record (to_arrow: test_arrow)."""
    assert_first_bad_record_named([tfl.parse_example, tfl.parse_sequence_example],
                                  tmp_path_factory.mktemp("first"), kinds)


def test_raw_tensor_feature(backend):
    imgs = np.random.default_rng(0).integers(0, 255, (3, 4, 5, 3), dtype=np.uint8)
    recs = tfl.encode_examples({"img": imgs, "label": np.arange(3)}, raw=("img",))
    out = tfl.parse_example(recs, {"img": tfl.RawTensorFeature((4, 5, 3), np.uint8), "label": tfl.FixedLenFeature([], "int64")})
    assert np.array_equal(out["img"], imgs) and out["label"].tolist() == [0, 1, 2]
    fl = np.random.default_rng(1).standard_normal((2, 8, 8)).astype(np.float32)
    recs = tfl.encode_examples({"x": fl}, raw=("x",))
    assert np.array_equal(tfl.parse_example(recs, {"x": tfl.RawTensorFeature((8, 8), np.float32)})["x"], fl)
    with pytest.raises(FeatureSpecError, match="256 bytes.*needs 260") as info:
        tfl.parse_example(recs, {"x": tfl.RawTensorFeature((65,), np.float32)})
    assert info.value.index == 0


def test_decode_and_infer_schema(backend, tmp_path):
    recs = [tfl.encode_example({"a": [1.0, 2.0], "b": 1, "s": "x"}), tfl.encode_example({"a": [3.0, 4.0], "b": [1, 2]})]
    assert tfl.decode_example(recs[1])["b"].tolist() == [1, 2]
    assert tfl.decode_examples(recs)[0]["s"] == [b"x"]
    schema = tfl.infer_schema(recs)
    assert schema == {"a": tfl.FixedLenFeature([2], "float32"), "b": tfl.VarLenFeature("int64"),
                      "s": tfl.VarLenFeature("string")}
    assert "tf.io.FixedLenFeature([2], tf.float32)" in schema.to_tf_code()
    path = tmp_path / "x.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write_many(recs)
    assert tfl.infer_schema(path, sample=1) == {"a": tfl.FixedLenFeature([2], "float32"),
                                                "b": tfl.FixedLenFeature([], "int64"),
                                                "s": tfl.FixedLenFeature([], "string")}


def test_encode_empty_and_types(backend):
    rec = tfl.encode_example({"e": [], "ef": np.zeros(0, np.float32), "t": True, "u": "ü"}, deterministic=True)
    cols = decode(backend, [rec])
    assert cols["e"][1].tolist() == [4] and cols["ef"][1].tolist() == [2]
    assert cols["t"][4].tolist() == [1] and cols["u"][5] == ["ü".encode()]
    with pytest.raises(FeatureSpecError):
        tfl.encode_example({"x": [1, b"a"]})
    with pytest.raises(FeatureSpecError):
        tfl.encode_example({"x": np.array([2**64 - 1], dtype=np.uint64)})


def test_sequence_example_round_trip(backend):
    rec = tfl.encode_sequence_example({"c": [1, 2]}, {"f": np.arange(6, dtype=np.float32).reshape(3, 2), "v": [[1], [], [2, 3]]})
    ctx, lists, lengths = tfl.parse_sequence_example(
        [rec, tfl.encode_sequence_example({"c": [3, 4]}, {"f": [[9.0, 9.0]], "v": []})],
        {"c": tfl.FixedLenFeature([2], "int64")},
        {"f": tfl.FixedLenSequenceFeature([2], "float32"), "v": tfl.VarLenFeature("int64"),
         "r": tfl.RaggedFeature("int64", value_key="v")})
    assert ctx["c"].tolist() == [[1, 2], [3, 4]]
    assert lists["f"].tolist() == [[[0, 1], [2, 3], [4, 5]], [[9, 9], [0, 0], [0, 0]]]
    assert lengths["f"].tolist() == [3, 1]
    assert lists["r"].to_list() == [[[1], [], [2, 3]], []]
    assert lists["v"].dense_shape.tolist() == [2, 3, 2]


# -- properties ----------------------------------------------------------------------------

keys = st.text(min_size=0, max_size=6)
int64s = st.integers(-2**63, 2**63 - 1)
float32s = st.floats(width=32, allow_nan=True, allow_infinity=True)
values = st.one_of(
    st.lists(int64s, max_size=5),
    st.lists(float32s, min_size=1, max_size=5),
    st.lists(st.binary(max_size=8), max_size=4),
    st.builds(lambda a: a, st.lists(float32s, max_size=5).map(lambda v: np.array(v, dtype=np.float32))),
)
mappings = st.dictionaries(keys, values, max_size=6)


def _bits_equal(a, b):
    if isinstance(a, np.ndarray) and a.dtype == np.float32:
        return np.array_equal(a.view(np.uint32), np.asarray(b, np.float32).view(np.uint32))
    return list(a) == list(b)


@SETTINGS
@given(mapping=mappings, deterministic=st.booleans())
def test_round_trip_and_backend_parity(backend, mapping, deterministic):
    data = tfl.encode_example(mapping, deterministic=deterministic)
    with _native.use(backend.other):
        assert tfl.encode_example(mapping, deterministic=deterministic) == data
        theirs = tfl.decode_example(data)
    ours = tfl.decode_example(data)
    assert ours.keys() == theirs.keys() == mapping.keys()
    for k, v in mapping.items():
        assert _bits_equal(ours[k], v) and _bits_equal(theirs[k], v), k


def test_every_short_length_encodes_as_the_twin_does(backend):
    """The core copies keys, bytes values and float runs of up to 16 bytes with fixed-size
    moves, by length class (0, 1-3, 4-7, 8-16, longer): every length across those edges, as
    an Example and as a framed column batch, gives the twin's bytes."""
    for n in range(41):
        mapping = {"k" * n: [bytes(range(n))], "f" * (n + 1): np.arange(n // 4, dtype=np.float32),
                   "é" * (n // 2) + "e": [b"x" * n, b""]}
        columns = {key: [value] if isinstance(value, list) else value.reshape(1, -1)
                   for key, value in mapping.items()}
        data = tfl.encode_example(mapping, deterministic=True)
        rows = list(tfl.encode_examples(columns, deterministic=True, as_batch=True))  # framed in one buffer
        with _native.use(backend.other):
            assert tfl.encode_example(mapping, deterministic=True) == data, n
            assert list(tfl.encode_examples(columns, deterministic=True, as_batch=True)) == rows == [data], n
        assert list(tfl.decode_example(data)["k" * n]) == [bytes(range(n))]


def _decoded(data, *more):
    """decode_examples' rows of these records in a comparable form (dtype and bytes of each
    array, bytes values as a list), or the error's class, record index and message."""
    try:
        rows = tfl.decode_examples([data, *more])
    except TFRecordError as exc:
        assert isinstance(exc, ExampleDecodeError) and 0 <= exc.index <= len(more), exc
        return type(exc).__name__, exc.index, str(exc)
    return [{k: (v.dtype.str, v.tobytes()) if isinstance(v, np.ndarray) else list(v) for k, v in row.items()}
            for row in rows]


@SETTINGS
@given(data=st.binary(max_size=64))
def test_fuzz_only_hierarchy_errors_and_parity(backend, data):
    ours = _decoded(data)
    with _native.use(backend.other):
        assert _decoded(data) == ours


# Records of one schema, as a batch: the core parses an entry that repeats, byte for byte
# before its values, the last entry of the column it expects next, straight into that column.
schema_rows = st.fixed_dictionaries({
    "f": st.lists(float32s, min_size=0, max_size=3),
    "i": st.lists(st.integers(-2**63, 2**63 - 1) | st.integers(0, 300), min_size=0, max_size=3),
    "s": st.lists(st.binary(max_size=3), max_size=2),
    "g" * 40: st.sampled_from([[1.5], [2.5, 3.5]]),   # an entry of over 32 bytes before its values
}, optional={"j": st.sampled_from([[7], [300], [-1]])})


@SETTINGS
@given(rows=st.lists(schema_rows, min_size=2, max_size=6), cut=st.integers(0, 80), flip=st.integers(0, 4000),
       mutate=st.integers(0, 3))
def test_batches_of_one_schema_parse_as_the_twin_does(backend, rows, cut, flip, mutate):
    """Whole batches, intact or with one record cut short, one bit flipped, or one entry
    repeated (the last wins), give the twin's rows or the twin's error, at the same record."""
    records = [bytearray(tfl.encode_example(row, deterministic=True)) for row in rows]
    k = 1 + flip % (len(records) - 1)   # a later record: the first sets the templates
    body = _features_of(records[k])   # its entries, to cut or repeat inside a size that fits
    if mutate == 1:   # cut inside an entry, its values or sizes
        records[k] = bytearray(ld(1, body[:cut])) if body else records[k]
    elif mutate == 2 and records[k]:
        records[k][flip % len(records[k])] ^= 1 << (flip % 8)
    elif mutate == 3:   # every entry again: every key repeats
        records[k] = bytearray(ld(1, body + body)) if body else records[k]
    ours = _decoded(*map(bytes, records))
    with _native.use(backend.other):
        assert _decoded(*map(bytes, records)) == ours
    if mutate == 0:
        assert ours == _decoded(*(tfl.encode_example(row) for row in rows))   # any key order


def test_an_entry_like_the_last_but_cut_short_fails_as_the_twin_does(backend):
    """Each record's entry for "g" starts with the same bytes as the record before's; one
    whose values are cut short, inside a Features message whose size fits what is left,
    fails at that record, as it does in the twin, however many values remain."""
    good = tfl.encode_example({"g": [2.5, 3.5], "i": [5]}, deterministic=True)
    features = _features_of(good)
    g_entry = len(tfl.encode_example({"g": [2.5, 3.5]})) - 2   # the first entry's bytes
    for cut in range(1, len(features)):
        bad = ld(1, features[:cut])
        ours = _decoded(good, good, bad, good)
        if cut < g_entry:
            assert ours[:2] == ("ExampleDecodeError", 2), cut
        with _native.use(backend.other):
            assert _decoded(good, good, bad, good) == ours, cut


def test_an_entry_that_differs_from_the_last_in_one_byte_is_parsed_anew(backend):
    """A float entry and an int64 entry of the same key and sizes differ in one byte, the
    Feature's tag, wherever the key's length puts it among the bytes before the values: each
    record's values keep their own kind, as in the twin."""
    for n in range(1, 41):
        records = [tfl.encode_example({"k" * n: value}) for value in ([1.0], [2**21], [2**21], [1.0], [1.0])]
        assert len(set(map(len, records))) == 1
        ours = _decoded(*records)
        f, i = ("<f4", np.float32(1).tobytes()), ("<i8", np.int64(2**21).tobytes())
        assert [row["k" * n] for row in ours] == [f, i, i, f, f], n
        with _native.use(backend.other):
            assert _decoded(*records) == ours
        # The entry's own tag changed to an unknown field 3 (LEN): skipped, no value.
        unknown = records[0][:2] + b"\x1a" + records[0][3:]
        ours = _decoded(records[0], unknown, records[0])
        assert [list(row) for row in ours] == [["k" * n], [], ["k" * n]], n
        with _native.use(backend.other):
            assert _decoded(records[0], unknown, records[0]) == ours


def test_entries_written_value_first_keep_their_keys(backend):
    """Map entries may hold the value before the key, or be followed by a repeat of it: such
    an entry is no template for the next (its bytes before the values do not hold its key),
    so records whose keys come in another order still get their own values, as in the twin."""
    def either(key, value, key_first):
        if key_first:
            return entry(key, floats_packed([value]))
        return ld(1, ld(2, floats_packed([value])) + ld(1, key.encode()))

    for key_first in (False, True):
        records = [example(either("a", 1, key_first), either("b", 2, key_first)),
                   example(either("b", 3, key_first), either("a", 4, key_first)),
                   example(either("a", 5, False), either("a", 6, True))]   # a repeated key: the last wins
        ours = _decoded(*records)
        values = [{k: np.frombuffer(v[1], "<f4").tolist() for k, v in row.items()} for row in ours]
        assert values == [{"a": [1], "b": [2]}, {"a": [4], "b": [3]}, {"a": [6]}], key_first
        with _native.use(backend.other):
            assert _decoded(*records) == ours


def _features_of(record):
    """An Example's Features message (its map entries): what follows field 1's tag and size."""
    size, shift, i = 0, 0, 1
    while True:
        size |= (record[i] & 0x7F) << shift
        shift, i = shift + 7, i + 1
        if record[i - 1] < 0x80:
            return record[i:i + size]


@SETTINGS
@given(mapping=mappings, cut=st.integers(0, 200), flip=st.integers(0, 2000))
def test_mutated_records_fail_cleanly(backend, mapping, cut, flip):
    data = bytearray(tfl.encode_example(mapping))
    if data:
        data[flip % len(data)] ^= 1 << (flip % 8)
    for candidate in (bytes(data), bytes(data[:cut])):
        try:
            backend.example.decode_sequence_examples([candidate])
            backend.example.decode_examples([candidate], list(mapping), None)
        except ExampleDecodeError:
            pass


# -- the bundled descriptor ----------------------------------------------------------------

def test_bundled_proto_matches_descriptor():
    from tfrecord_lite import _example_py
    text = open(os.path.join(os.path.dirname(tfl.__file__), "example.proto")).read()
    declared = {}
    for name, body in re.findall(r"message (\w+) \{(.*?)\n\}", text, re.S):
        declared[name] = sorted((f, int(n)) for f, n in re.findall(r"(\w+) = (\d+)", body))
    built = {m.name: sorted((f.name, f.number) for f in m.field) for m in _example_py.file_descriptor().message_type}
    assert declared == built


@pytest.mark.parametrize("order", ["tfrecord_lite first", "tensorflow first"])
def test_imports_alongside_tensorflow(order):
    first, second = ("tfrecord_lite", "tensorflow") if order == "tfrecord_lite first" else ("tensorflow", "tfrecord_lite")
    code = (f"import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\nimport {first}\nimport {second}\n"
            "import tensorflow as tf, tfrecord_lite as t\n"
            "from tfrecord_lite import _example_py as p\n"
            "ex = tf.train.Example(features=tf.train.Features(feature={'a': tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))}))\n"
            "assert p.decode_examples([ex.SerializeToString()])[1][0][4].tolist() == [1]\n"
            "assert t.encode_example({'a': 1}) == ex.SerializeToString(deterministic=True)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tfl.__file__)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


# -- records read in place (RecordBatch) and the spec plan -----------------------------------

rows_st = st.lists(st.tuples(st.one_of(st.none(), int64s), st.lists(float32s, min_size=2, max_size=2),
                             st.one_of(st.none(), st.binary(max_size=6)), st.lists(int64s, max_size=3)),
                   max_size=30)
ROW_SPEC = {"i": tfl.FixedLenFeature([], np.int64, default_value=-1), "f": tfl.FixedLenFeature([2], np.float32),
            "s": tfl.FixedLenFeature([], bytes, default_value=b"?"), "v": tfl.VarLenFeature(np.int64)}


def _row(i, f, s, v):
    out = {"f": np.array(f, np.float32), "v": v}
    if i is not None:
        out["i"] = i
    if s is not None:
        out["s"] = s
    return tfl.encode_example(out)


def _same(a, b):
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, tfl.SparseTensorValue):
            assert all(np.array_equal(p, q) for p, q in zip(x, y)), k
        elif x.dtype == np.float32:
            assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), k
        else:
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), k


@SETTINGS
@given(rows=rows_st, chunk=st.integers(64, 400), data=st.data())
def test_record_batch_parses_like_the_record_list(backend, rows, chunk, data):
    from tfrecord_lite import RecordBatch, TFRecordReader, TFRecordWriter

    records = [_row(*r) for r in rows]
    out = io.BytesIO()
    with TFRecordWriter(out) as w:
        w.write_many(records)
    whole = RecordBatch.concat(list(TFRecordReader(io.BytesIO(out.getvalue()), chunk_size=chunk).record_batches()))
    start, step = data.draw(st.integers(0, 5)), data.draw(st.integers(1, 3))
    expected = tfl.parse_example(records[start::step], ROW_SPEC)
    _same(tfl.parse_example(whole[start::step], ROW_SPEC), expected)
    with _native.use(backend.other):
        _same(tfl.parse_example(whole[start::step], ROW_SPEC), expected)
    assert expected["i"].tolist() == [-1 if r[0] is None else r[0] for r in rows[start::step]]


class _Blob(bytes):
    pass


_AS = [bytes, bytearray, memoryview, _Blob, lambda r: np.frombuffer(r, np.uint8),
       lambda r: memoryview(b"<" + r + b">")[1:-1]]


@SETTINGS
@given(rows=rows_st, data=st.data())
def test_records_of_any_bytes_like_parse_as_bytes_do(backend, rows, data):
    # The core points at bytes objects without a buffer each, and takes one of anything else.
    records = [_row(*r) for r in rows]
    given = [_AS[data.draw(st.integers(0, len(_AS) - 1))](r) for r in records]
    _same(tfl.parse_example(given, ROW_SPEC), tfl.parse_example(records, ROW_SPEC))


def test_a_list_changed_while_it_is_parsed_reads_whole_records(backend):
    # The parse runs without the GIL: another thread replacing the list's records meanwhile
    # (dropping the only reference to each) must leave each record read whole, as it was or
    # as it became, never freed bytes.
    rows = [(k, [k, -k], bytes([k % 256]) * 5, [k] * (k % 4)) for k in range(4000)]
    records = [_row(*r) for r in rows]
    churned = (-1, [0.0, 0.0], b"!", [])
    shared, stop = [], threading.Event()

    def churn():
        while not stop.is_set():
            for k in range(len(shared)):
                shared[k] = _row(*churned)

    for _ in range(10):
        shared[:] = [bytes(bytearray(r)) for r in records]  # each the list's alone
        thread = threading.Thread(target=churn)
        thread.start()
        try:
            got = tfl.parse_example(shared, ROW_SPEC)
        finally:
            stop.set()
            thread.join()
            stop.clear()
        sparse = got["v"]
        values = np.split(sparse.values, np.searchsorted(sparse.indices[:, 0], np.arange(1, len(rows))))
        for k, (i, f, s, v) in enumerate(rows):
            row = (int(got["i"][k]), got["f"][k].tolist(), got["s"][k], values[k].tolist())
            assert row in ((i, [float(f[0]), float(f[1])], s, v), churned), k


def test_record_batch_offsets_are_checked(backend):
    from tfrecord_lite import RecordBatch

    rec = tfl.encode_example({"a": 1})
    bad = RecordBatch(rec, np.array([1], np.int64), np.array([len(rec)], np.int64))
    with pytest.raises(tfl.InvalidArgumentError, match="outside"):
        tfl.parse_example(bad, {"a": tfl.FixedLenFeature([], np.int64)})


def test_uniformly_wrong_columns_still_fail(backend):
    recs = [tfl.encode_example({"a": [1.0, 2.0]})] * 3
    with pytest.raises(FeatureSpecError, match="float32 but the spec expects int64") as info:
        tfl.parse_example(recs, {"a": tfl.FixedLenFeature([2], np.int64)})
    assert info.value.index == 0
    with pytest.raises(FeatureSpecError, match="2 values but the shape \\[3\\] needs 3"):
        tfl.parse_example(recs, {"a": tfl.FixedLenFeature([3], np.float32)})
    assert tfl.parse_example(recs, {"a": tfl.FixedLenFeature([2, 1], np.float32)})["a"].shape == (3, 2, 1)


def test_spec_changes_between_calls_are_seen(backend):
    recs = [tfl.encode_example({"a": 1, "b": 2.5})]
    spec = {"a": tfl.FixedLenFeature([], np.int64)}
    assert list(tfl.parse_example(recs, spec)) == ["a"]
    spec["b"] = tfl.FixedLenFeature([], np.float32)
    assert tfl.parse_example(recs, spec)["b"].tolist() == [2.5]
    spec["a"] = tfl.FixedLenFeature([], np.float32)
    with pytest.raises(FeatureSpecError, match="int64 but the spec expects float32"):
        tfl.parse_example(recs, spec)


@SETTINGS
@given(values=st.lists(st.sampled_from([b"", b"a", b"b", b"ab", b"ba", b"red", b"der", b"x" * 8, b"x" * 9,
                                        b"y" * 16, b"y" * 17, b"abcdefgh12345678", b"abcdefgi12345678"])
                       | st.binary(max_size=20), max_size=60))
def test_repeated_short_strings_decode_exactly(backend, values):
    # Short repeated values share one bytes object in the compiled core; each must still be
    # exactly its own value, whatever collides in the sharing table.
    recs = [tfl.encode_example({"s": v}) for v in values]
    out = tfl.parse_example(recs, {"s": tfl.FixedLenFeature([], bytes)})["s"]
    assert out.dtype == object and out.tolist() == values
    assert all(type(v) is bytes for v in out)


def test_long_bytes_values_are_filled_exactly(backend):
    # Long values are allocated first and copied in afterwards (without the GIL once a
    # column holds 64 KiB or more); each must hold exactly its own bytes.
    rng = np.random.default_rng(7)
    values = [rng.bytes(n) for n in (17, 70_000, 0, 1 << 17, 33)]
    recs = [tfl.encode_example({"v": v, "w": [v, v[:5]]}) for v in values]
    out = tfl.parse_example(recs, {"v": tfl.FixedLenFeature([], bytes), "w": tfl.FixedLenFeature([2], bytes)})
    assert out["v"].tolist() == values
    assert out["w"].tolist() == [[v, v[:5]] for v in values]


@pytest.mark.parametrize("bad", [0, 3, None, "abc", memoryview(b"\x08\x01" * 4)[::2]])
def test_a_record_that_is_not_serialized_bytes_is_named(backend, bad):
    """Both backends refuse what is not a contiguous bytes-like: the twin took 0 as b"" (and
    3 as three NULs), the core raised a bare TypeError."""
    good = tfl.encode_example({"a": 1})
    spec = {"a": tfl.VarLenFeature(np.int64)}
    for parse in (lambda r: tfl.parse_example(r, spec), tfl.decode_examples, tfl.decode_sequence_examples,
                  lambda r: tfl.parse_sequence_example(r, sequence_features={"a": tfl.VarLenFeature(np.int64)})):
        with pytest.raises(ArgumentTypeError, match="not a serialized record") as info:
            parse([good, bad])
        assert info.value.index == 1 and type(bad).__name__ in str(info.value)
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("bad", [None, 5, "abc", b"\x0a\x00", bytearray(b"\x0a\x00"), memoryview(b"\x0a\x00")])
def test_a_batch_that_is_one_record_or_not_iterable_is_refused(backend, bad):
    """One record passed where a batch goes was iterated byte by byte and blamed as
    "record 0: int is not a serialized record"; None or an int raised a bare TypeError."""
    seq = {"a": tfl.VarLenFeature(np.int64)}
    for parse in (lambda r: tfl.parse_example(r, seq),
                  lambda r: tfl.parse_sequence_example(r, sequence_features=seq)):
        with pytest.raises(ArgumentTypeError, match="a batch of records is expected"):
            parse(bad)
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("bad", [None, [tfl.VarLenFeature(np.int64)], "a", 3])
def test_a_spec_that_is_not_a_mapping_is_refused(backend, bad):
    """parse_example(records, None) raised AttributeError: 'NoneType' object has no attribute 'items'."""
    record = tfl.encode_example({"a": 1})
    calls = [lambda: tfl.parse_example([record], bad), lambda: tfl.parse_single_example(record, bad)]
    if bad is not None:  # None is "no context" or "no sequence" there, as in TF
        calls += [lambda: tfl.parse_sequence_example([record], bad, {"a": tfl.VarLenFeature(np.int64)}),
                  lambda: tfl.parse_sequence_example([record], {"a": tfl.VarLenFeature(np.int64)}, bad)]
    for call in calls:
        with pytest.raises(ArgumentTypeError, match="must map names to feature specs"):
            call()
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("spec", [lambda: {b"a": tfl.VarLenFeature(np.int64)},
                                  lambda: {"s": tfl.SparseFeature("i", b"v", np.int64, 4)},
                                  lambda: {"r": tfl.RaggedFeature(np.int64, value_key=b"a")}])
def test_feature_names_must_be_str(backend, spec):
    with pytest.raises(FeatureSpecError, match="names must be str"):  # made or parsed
        tfl.parse_example([tfl.encode_example({"a": 1})], spec())
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("call", [
    lambda spec: tfl.parse_example([tfl.encode_example({"a": 1})], spec),
    lambda spec: tfl.parse_sequence_example([tfl.encode_example({"a": 1})], spec, {}),
    lambda spec: tfl.parse_sequence_example([tfl.encode_example({"a": 1})], {}, spec),
    lambda spec: tfl.encode_example({name: [1] for name in spec}),
    lambda spec: tfl.encode_sequence_example({}, {name: [[1]] for name in spec}),
])
def test_feature_names_with_a_lone_surrogate_are_spec_errors(backend, call):
    # No record can hold such a name: a bare UnicodeEncodeError escaped, or with the twin a
    # feature list spec read nothing.
    with pytest.raises(FeatureSpecError, match="valid UTF-8") as info:
        call({"\ud800": tfl.VarLenFeature(np.int64)})
    assert "'\\ud800'" in str(info.value)
    for keys, error in ((["\ud800"], UnicodeEncodeError), ([b"a"], TypeError)):   # as the core's C API
        with pytest.raises(error):
            backend.example.decode_sequence_examples([b""], ["a"], keys)


def test_a_numpy_bytes_array_of_records_says_it_dropped_trailing_nuls(backend):
    """numpy's "S" dtype drops each record's trailing NUL bytes (an int64 0 last), and the
    record then failed as malformed with no word of why (TensorFlow fails alike)."""
    record = tfl.encode_example({"x": [0]})
    batch = np.array([record, record])
    spec = {"x": tfl.FixedLenFeature([], np.int64)}
    for parse in (lambda: tfl.parse_example(batch, spec), lambda: tfl.decode_examples(batch),
                  lambda: tfl.parse_sequence_example(batch, spec), lambda: tfl.decode_sequence_examples(batch)):
        with pytest.raises(ExampleDecodeError, match="numpy bytes array .dtype S., which drops each record's "
                                                     "trailing NUL bytes: pass a list"):
            parse()
    assert tfl.parse_example(np.array([record, record], dtype=object), spec)["x"].tolist() == [0, 0]


@pytest.mark.parametrize("dtype, empty", [("float32", np.zeros(0, np.float32)), ("int64", np.zeros(0, np.int64)),
                                          ("string", np.array([], dtype=object))])
def test_a_shape_of_no_values_names_how_to_write_an_empty_list(backend, dtype, empty):
    """encode_example({'x': []}) writes a Feature of no kind, which FixedLenFeature([0])
    counts as missing (as TF does); the error names the value that writes an empty list."""
    spec = {"x": tfl.FixedLenFeature([0], dtype, default_value=[])}
    assert tfl.parse_example([tfl.encode_example({"x": empty})], spec)["x"].shape == (1, 0)
    with pytest.raises(FeatureSpecError, match="required") as info:
        tfl.parse_example([tfl.encode_example({"x": []})], spec)
    code = {"float32": "np.zeros(0, np.float32)", "int64": "np.zeros(0, np.int64)",
            "string": "np.array([], dtype=object)"}[dtype]
    assert f"encode_example writes {code} as one; a plain [] is a Feature of no kind" in str(info.value)


def test_a_batch_given_to_parse_single_names_the_batch_function(backend):
    """parse_single_example([record]) said 'record 0: list is not a serialized record'."""
    record = tfl.encode_example({"x": 1})
    spec = {"x": tfl.FixedLenFeature([], np.int64)}
    with pytest.raises(ArgumentTypeError, match="one record is expected, not a list of them: use parse_example"):
        tfl.parse_single_example([record], spec)
    with pytest.raises(ArgumentTypeError, match="not a tuple of them: use parse_sequence_example for a batch"):
        tfl.parse_single_sequence_example((record,), spec)
