"""Both backends give the same outcome for the same input: the same values, or an error of
the same class with the same message, location and hint. Inputs: Examples and
SequenceExamples cut short, with bits flipped or bytes set, inserted or deleted; specs that
do not fit the data (another dtype, another length, a required feature missing); frames cut
short, with a CRC flipped or a hostile length."""

import logging
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrecord_lite as tfl
from tfrecord_lite import _native
from tfrecord_lite.errors import TFRecordError
from tfrecord_lite.index import scan_index
from tests.test_example import ld, varint

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NAMES = ("a", "b", "c")
DTYPES = (np.float32, np.int64, bytes)


def plain(value):
    """A comparable form of any result: arrays by dtype, shape and bytes (NaN payloads
    compare exactly), containers element by element."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return "object", value.shape, [plain(v) for v in value.ravel().tolist()]
        return value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, tfl.RaggedValue):
        return "ragged", plain(value.values), plain(value.row_splits)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [plain(v) for v in value]
    return value


def outcome(call):
    try:
        return "ok", plain(call())
    except TFRecordError as exc:
        return ("error", type(exc).__name__, str(exc), exc.path, exc.offset, exc.index, exc.batch_index,
                exc.hint)


def on_both(backend, call):
    """call()'s outcome, the same under the other backend."""
    ours = outcome(call)
    with _native.use(backend.other):
        assert outcome(call) == ours
    return ours


# -- records and their damage -------------------------------------------------------------

def values(dtype):
    if dtype is np.float32:
        return st.lists(st.floats(width=32, allow_nan=True), max_size=3).map(lambda v: np.array(v, np.float32))
    if dtype is np.int64:
        return st.lists(st.integers(-2**63, 2**63 - 1) | st.integers(0, 300), max_size=3).map(
            lambda v: np.array(v, np.int64))
    return st.lists(st.binary(max_size=4), max_size=3)


features = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(DTYPES).flatmap(values), max_size=3)
steps = st.dictionaries(st.sampled_from(NAMES), st.lists(st.sampled_from(DTYPES).flatmap(values), max_size=3),
                        max_size=2)
INTERESTING = [0x00, 0x0B, 0x0C, 0x0F, 0x80, 0xFF]   # field 0, groups, wire type 7, varint runs
edits = st.lists(st.tuples(st.sampled_from(["cut", "flip", "set", "insert", "delete"]), st.integers(0, 1 << 16),
                           st.sampled_from(INTERESTING) | st.integers(0, 255)), max_size=3)


def damaged(record, record_edits):
    data = bytearray(record)
    for op, at, byte in record_edits:
        if not data:
            break
        at %= len(data)
        if op == "cut":
            del data[at:]
        elif op == "flip":
            data[at] ^= 1 << byte % 8
        elif op == "set":
            data[at] = byte
        elif op == "insert":
            data.insert(at, byte)
        else:
            del data[at]
    return bytes(data)


def spec_for(dtype, pick, size):
    """A spec of any kind; its dtype need not be the data's."""
    if pick == 0:
        return tfl.FixedLenFeature([size] if size else [], dtype)
    if pick == 1:
        return tfl.FixedLenFeature([size], dtype, default_value=[b"d" if dtype is bytes else 1] * size)
    if pick == 2:
        return tfl.VarLenFeature(dtype)
    if pick == 3:
        return tfl.RaggedFeature(dtype)
    return tfl.FixedLenSequenceFeature([size], dtype, allow_missing=True)


specs = st.dictionaries(st.sampled_from(NAMES), st.builds(spec_for, st.sampled_from(DTYPES), st.integers(0, 4),
                                                          st.integers(0, 2)), min_size=1, max_size=3)
sequence_specs = st.dictionaries(st.sampled_from(NAMES), st.builds(
    lambda dtype, pick, size: spec_for(dtype, pick, size) if pick != 1 else tfl.FixedLenSequenceFeature([size], dtype),
    st.sampled_from(DTYPES), st.integers(1, 4), st.integers(0, 2)), max_size=2)


def in_frames(records):
    """The same records as a RecordBatch in valid frames: errors then name frame and record."""
    framed = bytes(_native.framing.encode_frames(records))
    return next(iter(tfl.TFRecordReader(framed).record_batches(len(records))))


@SETTINGS
@given(rows=st.lists(st.tuples(features, edits), min_size=1, max_size=3), spec=specs)
def test_examples_parse_alike(backend, rows, spec):
    records = [damaged(tfl.encode_example(row), row_edits) for row, row_edits in rows]
    on_both(backend, lambda: tfl.decode_examples(records))
    on_both(backend, lambda: tfl.parse_example(records, spec))
    on_both(backend, lambda: tfl.parse_example(in_frames(records), spec))


@SETTINGS
@given(rows=st.lists(st.tuples(features, steps, edits), min_size=1, max_size=3), context=specs,
       sequence=sequence_specs)
def test_sequence_examples_parse_alike(backend, rows, context, sequence):
    records = [damaged(tfl.encode_sequence_example(ctx, lists), row_edits) for ctx, lists, row_edits in rows]
    on_both(backend, lambda: tfl.decode_sequence_examples(records))
    on_both(backend, lambda: tfl.parse_sequence_example(records, context, sequence))
    on_both(backend, lambda: tfl.parse_sequence_example(in_frames(records), context, sequence))


# Records of every shape protobuf allows, beyond what the encoders write: unpacked lists,
# unknown fields of every wire type (groups nested), oneof switches, map entries value first,
# with a repeated key or an unknown field.
FIELDS = st.sampled_from([4, 5, 9, 2**28])
unknown = st.recursive(
    st.builds(lambda f, v: varint(f << 3) + varint(v), FIELDS, st.integers(0, 2**64 - 1))
    | st.builds(lambda f, n: varint(f << 3 | (1 if n == 8 else 5)) + bytes(n), FIELDS, st.sampled_from([4, 8]))
    | st.builds(ld, FIELDS, st.binary(max_size=3)),
    lambda inner: st.builds(lambda f, body: varint(f << 3 | 3) + b"".join(body) + varint(f << 3 | 4), FIELDS,
                            st.lists(inner, max_size=2)), max_leaves=4)
list_values = {   # Feature field -> one value (or run of values) of its list, packed or not
    1: st.binary(max_size=3).map(lambda b: ld(1, b)),
    2: st.lists(st.floats(width=32), max_size=2).map(lambda v: ld(1, struct.pack(f"<{len(v)}f", *v)))
    | st.floats(width=32).map(lambda v: varint(1 << 3 | 5) + struct.pack("<f", v)),
    3: st.lists(st.integers(0, 2**64 - 1), max_size=2).map(lambda v: ld(1, b"".join(map(varint, v))))
    | st.integers(0, 2**64 - 1).map(lambda v: varint(1 << 3) + varint(v)),
}
feature = st.lists(st.sampled_from([1, 2, 3]).flatmap(
    lambda k: st.lists(list_values[k] | unknown, max_size=3).map(lambda body: ld(k, b"".join(body)))) | unknown,
    max_size=3).map(b"".join)


def map_entry(value):
    return st.builds(lambda key, v, order, extra: ld(1, b"".join((ld(1, key), ld(2, v))[::order] + extra)),
                     st.sampled_from([b"a", b"b", "é".encode(), b"", b"\xff"]), value, st.sampled_from([1, -1]),
                     st.sampled_from([(), (ld(1, b"b"),)]) | unknown.map(lambda u: (u,)))


features_map = st.lists(map_entry(feature), max_size=3).map(lambda e: ld(1, b"".join(e)))
lists_map = st.lists(map_entry(st.lists(feature.map(lambda f: ld(1, f)), max_size=3).map(b"".join)),
                     max_size=3).map(lambda e: ld(2, b"".join(e)))
any_record = st.lists(features_map | lists_map | unknown, max_size=3).map(b"".join)


@SETTINGS
@given(rows=st.lists(st.tuples(any_record, edits), min_size=1, max_size=3))
def test_records_of_any_shape_decode_alike(backend, rows):
    records = [damaged(record, record_edits) for record, record_edits in rows]
    on_both(backend, lambda: _native.example.decode_examples(records))
    on_both(backend, lambda: _native.example.decode_examples(records, ["a", "é"], None, True))
    on_both(backend, lambda: _native.example.decode_sequence_examples(records))
    on_both(backend, lambda: _native.example.decode_sequence_examples(records, ["b"], ["a"]))


@pytest.mark.parametrize("record", [
    b"#\x00\x00$",  # field 0 in an unknown group
    b"#\x00\x00+\x08\x01,$\n\x00",  # and a group in it, then an empty Features
    b"#" + b"\x00\x00" * 100 + b"$\n\x00",  # contents past a one-byte length
])
def test_field_zero_in_an_unknown_group_decodes_alike(backend, record):
    """protobuf before 5 (the oldest the package takes) refuses field 0 in a group, which the
    core skips as protobuf now does: the pure-Python backend said 'malformed Example'."""
    assert on_both(backend, lambda: _native.example.decode_examples([record]))[0] == "ok"
    on_both(backend, lambda: _native.example.decode_sequence_examples([record]))


# -- frames -------------------------------------------------------------------------------

HOSTILE = [2**64 - 1, 2**63, 2**31, 10**6, 17]


@SETTINGS
@given(records=st.lists(st.binary(max_size=40), min_size=1, max_size=5), damage=st.sampled_from(
    ["cut", "flip", "length", "length+crc", "junk"]), at=st.integers(0, 1 << 16), length=st.sampled_from(HOSTILE),
    on_corrupt=st.sampled_from(["raise", "skip", "stop"]), chunk=st.sampled_from([64, 1 << 16]))
def test_damaged_frames_read_alike(backend, tmp_path_factory, records, damage, at, length, on_corrupt, chunk):
    data = bytearray(_native.framing.encode_frames(records))
    starts = np.cumsum([0] + [16 + len(r) for r in records])[:-1].tolist()
    if damage == "cut":
        del data[at % len(data):]
    elif damage == "flip":
        data[at % len(data)] ^= 1 << at % 8
    elif damage == "junk":
        data += bytes([at & 0xFF]) * (1 + at % 15)
    else:   # a length field claiming more than is there, its CRC good or not
        start = starts[at % len(starts)]
        data[start:start + 8] = struct.pack("<Q", length)
        if damage == "length+crc":
            data[start + 8:start + 12] = struct.pack("<I", tfl.masked_crc32c(bytes(data[start:start + 8])))
    data = bytes(data)
    path = tmp_path_factory.mktemp("frames") / "d.tfrecord"
    path.write_bytes(data)

    def read(source):
        reader = tfl.TFRecordReader(source, on_corrupt=on_corrupt, chunk_size=chunk)
        return list(reader), [(type(e).__name__, str(e), e.offset, e.index) for e in reader.skipped]

    logging.disable(logging.WARNING)   # on_corrupt="skip" logs each dropped record
    try:
        on_both(backend, lambda: read(data))
        on_both(backend, lambda: read(str(path)))
        on_both(backend, lambda: [list(b) for b in tfl.TFRecordReader(path, on_corrupt=on_corrupt).record_batches(2)])
        on_both(backend, lambda: scan_index(path))
    finally:
        logging.disable(logging.NOTSET)


# -- the order of keys found ----------------------------------------------------------------

MANY = ("k", "kk", "z", "a", "é", "b" * 20, "q")


def first_seen(*mappings):
    return list(dict.fromkeys(k for mapping in mappings for k in mapping))


@SETTINGS
@given(rows=st.lists(st.permutations(MANY).flatmap(lambda names: st.sets(st.sampled_from(names)).map(
    lambda chosen: [n for n in names if n in chosen])), min_size=1, max_size=3))
def test_keys_found_come_in_order_of_first_appearance(backend, rows):
    """The core's decoders without keys give the names in the order the records first hold
    them, as they say; the twin gave protobuf's map order (a hash order) instead."""
    records = [tfl.encode_example({n: [i] for i, n in enumerate(names)}) for names in rows]
    sequences = [tfl.encode_sequence_example({n: [1] for n in names}, {n: [[1]] for n in reversed(names)})
                 for names in rows]
    want = first_seen(*rows)
    for name in (backend.name, backend.other):
        with _native.use(name):
            assert _native.example.decode_examples(records)[0] == want
            context_keys, _, list_keys, _ = _native.example.decode_sequence_examples(sequences)
            assert (context_keys, list_keys) == (want, first_seen(*(names[::-1] for names in rows)))
