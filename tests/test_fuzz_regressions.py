"""Every finding of the fuzz harnesses (fuzz/), kept fixed: the input that found it as a
bytes literal, checked on both backends, plus a replay of the harness corpora (the seeds
and every input that once was a finding) through the harnesses themselves."""

import importlib
import os
import re
import sys

import numpy as np
import pytest

import tfrecord_lite as tfl
from tfrecord_lite import _native
from tests.test_example import ld

FUZZ = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz")
HARNESSES = ("framing", "example", "index")


def on_other(backend, call):
    with _native.use(backend.other):
        return call()


def rejected_on_both(backend, record):
    """decode_examples raises ExampleDecodeError for the record on each backend."""
    with pytest.raises(tfl.ExampleDecodeError):
        tfl.decode_examples([record])
    with _native.use(backend.other), pytest.raises(tfl.ExampleDecodeError):
        tfl.decode_examples([record])


# An Example whose float feature holds an empty packed run: {b: float_list {value: []}}
# written as a packed field of length 0. The compiled core copied those 0 bytes into a
# column not yet allocated: memcpy(NULL, src, 0), undefined behaviour that UBSan reports.
EMPTY_PACKED_FLOATS = b"\n\x0b\n\x09\n\x01b\x12\x04\x12\x02\x0a\x00"


@pytest.mark.parametrize("spec, expected", [
    (tfl.VarLenFeature(np.float32), lambda v: v.values.size == 0 and v.dense_shape.tolist() == [1, 0]),
    (tfl.RaggedFeature(np.float32), lambda v: v.to_list() == [[]]),
    (tfl.FixedLenFeature([0], np.float32), lambda v: v.shape == (1, 0)),
    (tfl.FixedLenSequenceFeature([], np.float32, allow_missing=True), lambda v: v.shape == (1, 0)),
])
def test_empty_packed_float_run(backend, spec, expected):
    got = tfl.parse_example([EMPTY_PACKED_FLOATS], {"b": spec})["b"]
    assert expected(got)
    theirs = on_other(backend, lambda: tfl.parse_example([EMPTY_PACKED_FLOATS], {"b": spec})["b"])
    assert repr(got) == repr(theirs)
    decoded = tfl.decode_example(EMPTY_PACKED_FLOATS)["b"]
    assert decoded.dtype == np.float32 and decoded.size == 0


# Map entries of Features holding a field other than key (1) and value (2). Protobuf keeps
# such an entry among the unknown fields, so the feature is absent; the compiled core
# used to keep it as a present, empty feature.
ENTRIES_WITH_UNKNOWN_FIELDS = [
    b"\n\t\n\x07\n\x03a\x12\x02\x1a\x00",          # key "a\x12\x02", then field 3
    b"\n\t\n\x07\n\x01a\x12\x00\x1a\x00",          # key, empty value, then field 3
    b"\n\x07\n\x05\n\x01a\x10\x00",                # key, then field 2 as a varint
    b"\n\x0b\n\x09\x1a\x00\n\x01a\x12\x02\x1a\x00",  # field 3 first, then key and value
]


@pytest.mark.parametrize("record", ENTRIES_WITH_UNKNOWN_FIELDS)
def test_map_entry_with_unknown_field_is_dropped(backend, record):
    assert tfl.decode_examples([record]) == [{}]
    got = tfl.parse_example([record], {"a": tfl.FixedLenFeature([], np.int64, default_value=7)})
    assert got["a"].tolist() == [7]
    context, lists, lengths = tfl.parse_sequence_example(
        [record], {"a": tfl.VarLenFeature(np.int64)}, {"a": tfl.VarLenFeature(np.int64)})
    assert context["a"].values.size == 0 and lists["a"].values.size == 0
    assert on_other(backend, lambda: tfl.decode_examples([record])) == [{}]


# A dropped entry is still parsed: an invalid value or a key that is not UTF-8 is an error,
# as in protobuf (the core used to skip the values of a dropped entry unchecked).
@pytest.mark.parametrize("record", [
    b"\n\x0f\n\r\x15\x01a\x12\x08\x12\x06\n\x04\x00\x00\x80\x7f",  # value's BytesList has tag 0
    b"\n\x07\n\x05\n\x01\xff\x1a\x00",                                # key b"\xff", then field 3
])
def test_dropped_map_entry_is_still_validated(backend, record):
    spec = {"a": tfl.FixedLenSequenceFeature([1], np.float32, allow_missing=True)}
    for call in (lambda: tfl.decode_examples([record]), lambda: tfl.parse_example([record], spec)):
        with pytest.raises(tfl.ExampleDecodeError) as info:
            call()
        assert info.value.index == 0
        with _native.use(backend.other), pytest.raises(tfl.ExampleDecodeError):
            call()


def test_map_entry_without_unknown_fields_is_kept(backend):
    # The general path still takes the key after the value, as protobuf does.
    record = b"\n\x0b\n\x09\x12\x04\x1a\x02\x08\x05\n\x01a"
    assert tfl.decode_example(record)["a"].tolist() == [5]
    assert on_other(backend, lambda: tfl.decode_example(record)["a"].tolist()) == [5]


@pytest.mark.parametrize("harness", HARNESSES)
def test_harness_corpus_replays(harness):
    """Each harness runs its committed corpus cleanly (any finding would raise here); the
    harnesses run every input on both backends and compare them themselves."""
    sys.path.insert(0, FUZZ)
    try:
        module = importlib.import_module(f"fuzz_{harness}")
    finally:
        sys.path.remove(FUZZ)
    corpus = os.path.join(FUZZ, "corpus", harness)
    names = sorted(os.listdir(corpus))
    assert names, f"fuzz/corpus/{harness} is empty"
    for name in names:
        with open(os.path.join(corpus, name), "rb") as f:
            module.TestOneInput(f.read())


# A shape with no values ([0]) and a record without the feature: the present rows were
# reshaped with -1 rows, which numpy cannot infer from 0 values (a bare ValueError). A
# default of no values is none, as in TF, so the missing row is the error TF gives.
def test_zero_size_shape_with_missing_rows(backend):
    empty, bare = tfl.encode_example({"f": np.zeros(0, np.float32)}), tfl.encode_example({})
    spec = {"f": tfl.FixedLenFeature([0], np.float32, default_value=[])}
    got = tfl.parse_example([empty, empty], spec)["f"]
    assert got.shape == (2, 0) and got.dtype == np.float32
    for parse in (lambda: tfl.parse_example([empty, bare], spec), lambda: on_other(
            backend, lambda: tfl.parse_example([empty, bare], spec))):
        with pytest.raises(tfl.FeatureSpecError, match="'f'.*required") as info:
            parse()
        assert info.value.index == 1
    steps = tfl.encode_sequence_example({}, {"s": [np.zeros(0, np.float32)] * 2})
    sequence = {"s": tfl.FixedLenSequenceFeature([0], np.float32, allow_missing=True)}
    _, lists, lengths = tfl.parse_sequence_example([steps, bare], sequence_features=sequence)
    assert lists["s"].shape == (2, 2, 0) and lengths["s"].tolist() == [2, 0]
    theirs = on_other(backend, lambda: tfl.parse_sequence_example([steps, bare], sequence_features=sequence))
    assert theirs[1]["s"].shape == (2, 2, 0) and theirs[2]["s"].tolist() == [2, 0]


# Index sidecars with numbers beyond int64 (an OverflowError escaped) or large enough that
# offset + length wraps around int64 and passes the contiguity and file-size checks.
@pytest.mark.parametrize("sidecar", [
    b"99999999999999999999 16\n",
    b"-99999999999999999999 16\n",
    b"%d 16\n" % (2**63 - 8),
    b"0 %d\n%d 16\n" % (2**62, 2**62),
    b"%d %d\n%d 16\n" % (2**62, 2**62, -(2**63)),
])
def test_hostile_sidecar_numbers(tmp_path, sidecar):
    path = tmp_path / "d.tfrecord"
    with tfl.TFRecordWriter(path) as w:
        w.write(b"record")
    (tmp_path / "d.tfrecord.index").write_bytes(sidecar)
    with pytest.raises(tfl.TFRecordError, match="index") as info:
        tfl.TFRecordFile(path)
    assert info.value.path == str(path) + ".index" or info.value.path == str(path)
    assert "build_index" in info.value.hint
    tfl.build_index(path)
    assert tfl.TFRecordFile(path)[0] == b"record"


# A truncated compressed stream read in small chunks: inflate stops at the requested
# output size and may still hold decoded bytes when the input runs out. Those bytes were
# dropped with the truncation error, so the records before it depended on chunk_size.
@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_truncated_compressed_stream_yields_every_decodable_record(backend, compression):
    import gzip
    import io
    import zlib

    records = [b"\x00b", b"", b"", b"c", b""]
    framed = bytes(backend.framing.encode_frames(records))
    packed = gzip.compress(framed, mtime=0) if compression == "gzip" else zlib.compress(framed)
    for cut in range(1, 9):
        damaged = packed[:-cut]
        seen = set()
        for chunk in [64, 65, 69, 80, 1 << 18]:
            for source in (damaged, io.BytesIO(damaged)):
                reader = tfl.TFRecordReader(source, chunk_size=chunk, on_corrupt="skip")
                got = list(reader)  # the truncation ends the read under "skip"
                assert [type(e) for e in reader.skipped] == [tfl.DataLossError]
                assert re.search("ends before its end marker|corrupt", str(reader.skipped[0]))
                seen.add(tuple(got))
        assert len(seen) == 1, (cut, seen)
        assert list(seen)[0] == tuple(records[: len(list(seen)[0])])


# A FloatList holding an unknown field (13, 12 bytes). The twin re-serializes the FloatList
# to keep NaN payloads and read the unknown field's bytes as three more floats.
def test_float_list_unknown_field_is_not_values(backend):
    record = b"\n\x17\n\x15\n\x01b\x12\x10\x12\x0ej\x0c\x00\x00\x80\x7f\x00\x00\x80\xff\x00\x00\x80\xff"
    got = tfl.decode_example(record)["b"]
    assert got.dtype == np.float32 and got.size == 0
    assert on_other(backend, lambda: tfl.decode_example(record)["b"].size) == 0
    floats = np.array([1.5, np.nan], np.float32).tobytes()   # then field 13, empty
    mixed = b"\n\x15\n\x13\n\x01b\x12\x0e\x12\x0c\n\x08" + floats + b"j\x00"
    values = tfl.decode_example(mixed)["b"]
    assert values[0] == 1.5 and np.isnan(values[1]) and values.size == 2
    assert on_other(backend, lambda: tfl.decode_example(mixed)["b"].tobytes()) == values.tobytes()


# A map entry whose key field repeats: protobuf checks every occurrence for UTF-8, the
# core only the last one.
@pytest.mark.parametrize("record", [
    b"\n\x0a\n\x08\n\x01\xff\n\x01a\x12\x00",   # keys b"\xff" then "a", with a value
    b"\n\x08\n\x06\n\x01\xff\n\x01a",           # the same without a value
])
def test_every_repeated_key_must_be_utf8(backend, record):
    rejected_on_both(backend, record)


# Field 1 opened as a group (wire type 3) holding fields numbered 0: the core called such
# a tag invalid, protobuf's upb runtime skips it inside a group (and rejects it outside).
# The first record is the input the fuzzer found; the others pin each wire type.
@pytest.mark.parametrize("record", [
    b"\x0b\t\n\x07\n\x01i\x12\x02\x1a\x00\x12\x19\n\x17\n\x01c\x12\x12\n\x0c\x12\n\n\x08"
    b"\x00\x00\x80\xff\x00\x00\x80\x7f\n\x02\x12\x00",
    b"\x0b\x00\x00\x0c",
    b"\x0b\x80\x00\x00\x0c",                 # the tag as a 2-byte varint
    b"\x0b\x02\x00\x0c\n\x00",                # LEN, then an empty Features
    b"\x0b\x03\x04\x0c",                     # a nested group numbered 0
    b"\x0b\x05\x00\x00\x00\x00\x0c",
    b"\x0b\x01" + b"\x00" * 8 + b"\x0c",
])
def test_field_zero_inside_a_skipped_group(backend, record):
    ours = tfl.decode_examples([record])
    assert ours == [{}]
    assert on_other(backend, lambda: tfl.decode_examples([record])) == ours


@pytest.mark.parametrize("record", [b"\x00\x12", b"\x0b\x04\x0c", b"\x0b\x06\x0c", b"\n\x02\x00\x00"])
def test_field_zero_outside_a_group_or_as_a_bad_end_is_still_an_error(backend, record):
    rejected_on_both(backend, record)


# Tags and byte counts as varints longer than 5 bytes: protobuf's upb runtime reads them in
# at most 5 bytes (and a byte count below 2**31 - 1) and rejects longer encodings, whatever
# their value; the core read up to 10 bytes. The first record is the fuzzer's input (an
# unknown LEN field whose count 0 takes 10 bytes); the others pin each place.
@pytest.mark.parametrize("record", [
    b"\x1a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00",
    b"\x1a\x80\x80\x80\x80\x80\x00",              # a 6-byte count
    b"\x98\x80\x80\x80\x80\x00\x00",              # a 6-byte tag (field 3, VARINT)
    b"\n\x07\x1a\x80\x80\x80\x80\x80\x00",        # a 6-byte count inside Features
    b"\n\x0c\n\n\n\x81\x80\x80\x80\x80\x00a\x12\x00",  # a feature name's count in 6 bytes
])
def test_tags_and_byte_counts_longer_than_5_bytes_are_malformed(backend, record):
    rejected_on_both(backend, record)


@pytest.mark.parametrize("record", [
    b"\x1a\x80\x80\x80\x80\x00",                  # a count of 0 in 5 bytes
    b"\x98\x80\x80\x80\x00\x00",                  # a tag in 5 bytes
    b"\n\x06\x1a\x80\x80\x80\x80\x00",            # a 5-byte count inside Features
    b"\x18\x80\x80\x80\x80\x80\x80\x80\x80\x00",  # a VARINT value may take all 10 bytes
    b"\n\x0b\n\t\n\x81\x80\x80\x80\x00a\x12\x00",  # a feature name's count in 5 bytes
])
def test_tags_and_byte_counts_of_5_bytes_or_fewer_still_parse(backend, record):
    want = [{"a": []}] if record.endswith(b"a\x12\x00") else [{}]
    assert tfl.decode_examples([record]) == want
    assert on_other(backend, lambda: tfl.decode_examples([record])) == want


# Groups in unknown fields, nested as deep as protobuf allows and one deeper. Protobuf counts
# the messages a group lies in toward its limit of 100 levels, so a message n levels down
# holds at most 100 - n nested groups; the core counted the groups alone and accepted up to
# 100 at every level, where the twin (protobuf) refused the record.
def _groups(n):
    return b"\x2b" * n + b"\x2c" * n   # field 5: n start-group tags, then n end-group tags


_A = b"\n\x01a"   # a map entry's key "a"
GROUP_NESTS = [   # (SequenceExample?, record around groups, the message's depth)
    (False, lambda g: g, 0),
    (False, lambda g: ld(1, g), 1),                                              # Features
    (False, lambda g: ld(1, ld(1, _A + g)), 2),                                  # a map entry
    (False, lambda g: ld(1, ld(1, _A + ld(2, g))), 3),                           # Feature
    (False, lambda g: ld(1, ld(1, _A + ld(2, ld(3, g)))), 4),                    # Int64List
    (True, lambda g: ld(2, g), 1),                                               # FeatureLists
    (True, lambda g: ld(2, ld(1, _A + ld(2, g))), 3),                            # FeatureList
    (True, lambda g: ld(2, ld(1, _A + ld(2, ld(1, g)))), 4),                     # a step's Feature
    (True, lambda g: ld(2, ld(1, _A + ld(2, ld(1, ld(1, g))))), 5),              # its BytesList
]


@pytest.mark.parametrize("sequence, wrap, depth", GROUP_NESTS)
def test_group_nesting_counts_the_messages_it_lies_in(backend, sequence, wrap, depth):
    decode = backend.example.decode_sequence_examples if sequence else backend.example.decode_examples
    deepest = [wrap(_groups(100 - depth))]
    ours = repr(decode(deepest))
    assert on_other(backend, lambda: repr(getattr(_native.example, decode.__name__)(deepest))) == ours
    with pytest.raises(tfl.ExampleDecodeError, match="nesting deeper than 100 levels") as info:
        decode([b"", wrap(_groups(101 - depth))])
    assert info.value.index == 1
