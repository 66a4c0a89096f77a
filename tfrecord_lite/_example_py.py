"""Pure-Python twin of csrc/_example.pyx: Example/SequenceExample decoding through the
protobuf package, and the same columnar output and encoders.

The message classes come from the bundled example.proto, built at import time from a
descriptor in a private pool under the package ``tfrecord_lite.example``, so they never
clash with TensorFlow's ``tensorflow.*`` messages whichever is imported first. Every error
protobuf raises on malformed input becomes ExampleDecodeError naming the record, with the
core's message: a walk of the record in the core's order (_Walk) finds what and where.
"""

from __future__ import annotations

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from . import _framing_py
from .errors import ExampleDecodeError, FeatureSpecError, InvalidArgumentError

from ._contract import DecodedColumn, Kind, malformed

KIND_ABSENT = Kind.ABSENT.value
KIND_BYTES = Kind.BYTES.value
KIND_FLOAT = Kind.FLOAT.value
KIND_INT64 = Kind.INT64.value
KIND_EMPTY = Kind.EMPTY.value
KIND_RAW = Kind.RAW.value
KIND_ROWS = Kind.ROWS.value

PACKAGE = "tfrecord_lite.example"
_F = descriptor_pb2.FieldDescriptorProto

# message -> fields (name, number, label, type, message type, oneof index, packed); mirrors
# example.proto, which tests/test_example.py checks against this table.
_MESSAGES = {
    "BytesList": [("value", 1, _F.LABEL_REPEATED, _F.TYPE_BYTES, None, None, False)],
    "FloatList": [("value", 1, _F.LABEL_REPEATED, _F.TYPE_FLOAT, None, None, True)],
    "Int64List": [("value", 1, _F.LABEL_REPEATED, _F.TYPE_INT64, None, None, True)],
    "Feature": [
        ("bytes_list", 1, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "BytesList", 0, False),
        ("float_list", 2, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "FloatList", 0, False),
        ("int64_list", 3, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "Int64List", 0, False),
    ],
    "Features": [("feature", 1, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "Features.FeatureEntry", None, False)],
    "FeatureList": [("feature", 1, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "Feature", None, False)],
    "FeatureLists": [
        ("feature_list", 1, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "FeatureLists.FeatureListEntry", None, False)
    ],
    "Example": [("features", 1, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "Features", None, False)],
    "SequenceExample": [
        ("context", 1, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "Features", None, False),
        ("feature_lists", 2, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "FeatureLists", None, False),
    ],
}
_MAPS = {"Features": ("FeatureEntry", "Feature"), "FeatureLists": ("FeatureListEntry", "FeatureList")}
_ONEOFS = {"Feature": "kind"}


def _add_field(msg, name, number, label, ftype, type_name, oneof, packed):
    field = msg.field.add(name=name, number=number, label=label, type=ftype)
    if type_name:
        field.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        field.oneof_index = oneof
    if packed:
        field.options.packed = True


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of example.proto."""
    fd = descriptor_pb2.FileDescriptorProto(name="tfrecord_lite/example.proto", package=PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        if name in _ONEOFS:
            msg.oneof_decl.add(name=_ONEOFS[name])
        if name in _MAPS:
            entry_name, value_type = _MAPS[name]
            entry = msg.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            _add_field(entry, "key", 1, _F.LABEL_OPTIONAL, _F.TYPE_STRING, None, None, False)
            _add_field(entry, "value", 2, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, value_type, None, False)
        for field in fields:
            _add_field(msg, *field)
    return fd


_pool = descriptor_pool.DescriptorPool()
_pool.Add(file_descriptor())
Feature = message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.Feature"))
Example = message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.Example"))
SequenceExample = message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.SequenceExample"))

_KIND_OF = {None: KIND_EMPTY, "bytes_list": KIND_BYTES, "float_list": KIND_FLOAT, "int64_list": KIND_INT64}


# -- decoding ------------------------------------------------------------------------------

class _Column:
    """Rows of one key across a batch, as the compiled core lays them out."""

    def __init__(self, sequence, records_before):
        self.sequence = sequence
        self.steps = [-1] * records_before if sequence else None
        self.kinds = [] if sequence else [KIND_ABSENT] * records_before
        self.counts = [] if sequence else [0] * records_before
        self.floats, self.ints, self.bytes = [], [], []

    def add_absent(self):
        if self.sequence:
            self.steps.append(-1)
        else:
            self.kinds.append(KIND_ABSENT)
            self.counts.append(0)

    def add_feature(self, feature):
        kind = _KIND_OF[feature.WhichOneof("kind")]
        self.kinds.append(kind)
        if kind == KIND_FLOAT:
            # Re-serializing keeps every float's bits (NaN payloads included), which
            # converting through Python floats would not. Unknown fields would be
            # re-serialized too and read as floats: drop them first.
            feature.float_list.DiscardUnknownFields()
            data = feature.float_list.SerializeToString()
            values = _packed_floats(data)
            self.floats.append(values)
        elif kind == KIND_INT64:
            values = feature.int64_list.value
            self.ints.append(np.array(values, dtype=np.int64))
        elif kind == KIND_BYTES:
            values = feature.bytes_list.value
            self.bytes.extend(values)
        else:
            values = ()
        self.counts.append(len(values))

    def output(self, raw, bytes_column=False, lean=None):
        full = self._output(raw, bytes_column)
        if lean is None or not (raw is None or raw < 0) or self.sequence or full.uniform != lean:
            return full
        # Only lean's kind of values, as the core gives.
        return DecodedColumn(None, None, None, *(v if kind == lean[0] else None for kind, v in
                                                 zip((KIND_FLOAT, KIND_INT64, KIND_BYTES), full[3:6])), full.uniform)

    def _output(self, raw, bytes_column):
        kinds = np.array(self.kinds, dtype=np.uint8)
        counts = np.array(self.counts, dtype=np.int64)
        if bytes_column and (raw is None or raw < 0):
            offsets = np.zeros(len(self.bytes) + 1, dtype=np.int64)
            np.cumsum([len(v) for v in self.bytes], out=offsets[1:])
            byte_values = np.frombuffer(bytearray(b"".join(self.bytes)), dtype=np.uint8), offsets
        elif raw is None or raw < 0:
            byte_values = np.empty(len(self.bytes), dtype=object)
            byte_values[:] = self.bytes
        else:
            out = np.zeros((len(kinds), raw), dtype=np.uint8)
            lengths = np.full(len(kinds), -1, dtype=np.int64)
            at = 0
            for i, (kind, count) in enumerate(zip(self.kinds, self.counts)):
                if kind == KIND_BYTES:
                    if count == 1:
                        value = self.bytes[at]
                        lengths[i] = len(value)
                        if len(value) == raw:
                            out[i] = np.frombuffer(value, dtype=np.uint8)
                    at += count
            byte_values = (out, lengths)
        return DecodedColumn(
            np.array(self.steps, dtype=np.int64) if self.sequence else None,
            kinds,
            counts,
            np.concatenate(self.floats) if self.floats else np.empty(0, np.float32),
            np.concatenate(self.ints) if self.ints else np.empty(0, np.int64),
            byte_values,
            _uniform(self.kinds, self.counts),
        )


def _uniform(kinds, counts):
    """(kind, count) when every row agrees, else None; see csrc/_example.pyx."""
    if kinds and all(k == kinds[0] for k in kinds) and all(c == counts[0] for c in counts):
        return kinds[0], counts[0]
    return None


def _packed_floats(data: bytes) -> np.ndarray:
    """FloatList as serialized: nothing, or tag 0x0A, a varint length and the floats."""
    if not data:
        return np.empty(0, np.float32)
    pos = 1
    while data[pos] & 0x80:
        pos += 1
    return np.frombuffer(data, dtype="<f4", offset=pos + 1).astype(np.float32)


class _Table:
    def __init__(self, keys, sequence):
        self.discover = keys is None
        self.sequence = sequence
        for key in keys or ():   # the core takes the keys' UTF-8 and raises as it does
            if not isinstance(key, str):
                raise TypeError(f"keys must be str, not {type(key).__name__}")
            key.encode()
        self.columns = {k: _Column(sequence, 0) for k in (keys or ())}

    def add(self, record_index, mapping, walk):
        """One record's map; walk: a _Walk of the record, for the order of its new keys."""
        if self.discover:
            new = [key for key in mapping if key not in self.columns]
            if len(new) > 1:   # protobuf's map order is not the record's, which the core keeps
                order = walk.keys()[self.sequence]
                new.sort(key=lambda key: order.get(key, len(order)))
            for key in new:
                self.columns[key] = _Column(self.sequence, record_index)
        for key, column in self.columns.items():
            if key not in mapping:
                column.add_absent()
            elif self.sequence:
                steps = mapping[key].feature
                column.steps.append(len(steps))
                for feature in steps:
                    column.add_feature(feature)
            else:
                column.add_feature(mapping[key])

    def output(self, raw_sizes, bytes_column, lean=None):
        raw = raw_sizes or {}
        lean = lean or [None] * len(self.columns)
        return list(self.columns), [c.output(raw.get(k, -1), bytes_column, want)
                                    for (k, c), want in zip(self.columns.items(), lean)]


def _parse(message_class, data, index):
    """The record's message and a _Walk of it."""
    message = message_class()
    if type(data) is not bytes:  # what the core takes: a contiguous buffer (bytes(3) is 3 NULs)
        data = _framing_py.byte_view(data).tobytes()
    walk = _Walk(data, message_class is SequenceExample)
    try:
        message.ParseFromString(data)
    except Exception as exc:  # DecodeError, RecursionError, UnicodeDecodeError, ...
        # protobuf says neither what nor where: walk the record as the core does to say both.
        found = walk.fault()
        if not found and walk.groups:
            try:  # protobuf before 5 refuses field 0 in a group, which the core skips as protobuf now does
                message.ParseFromString(_blank_groups(data, walk.groups))
                return message, walk
            except Exception:
                pass
        detail = malformed(walk.sequence, *found) if found else f"malformed {message_class.__name__}: {exc}"
        raise ExampleDecodeError(detail, index=index) from None
    return message, walk


def _blank_groups(data: bytes, groups) -> bytes:
    """data with the contents of each unknown group (dropped unread either way) made one
    unknown LEN field (15) of the same size: no length around them changes."""
    out = bytearray(data)
    for start, end in groups:
        n = end - start  # 0, or 2 and more: a field is a tag and a value
        if n >= 2:
            k = 1  # bytes of the length varint, padded (protobuf takes a varint of up to 10)
            while n - 1 - k >= 1 << (7 * k):
                k += 1
            size = n - 1 - k
            length = [(size >> (7 * i)) & 0x7F | (0x80 if i < k - 1 else 0) for i in range(k)]
            out[start:end] = bytes([15 << 3 | _LEN, *length]) + bytes(size)
    return bytes(out)


# -- the core's walk, for its error messages -----------------------------------------------

# csrc/wire.pxd's Err numbers, _contract.FAULTS' indices.
_E_TRUNCATED, _E_VARINT, _E_TAG, _E_WIRE, _E_GROUP, _E_DEPTH, _E_PACKED, _E_UTF8 = range(1, 9)
_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = range(6)


class _Fault(Exception):
    pass


class _Walk:
    """A record's wire format checked in the order csrc/_example_decode.pxi parses it,
    keeping only the map keys: its first fault is the core's, at the byte the core names, and
    its keys come in the core's order. Only a record protobuf refused, or one with new keys
    to order, is walked. Each method takes and returns positions in data."""

    def __init__(self, data: bytes, sequence: bool):
        self.data = data
        self.sequence = sequence
        self.found = ({}, {})   # Features and FeatureLists keys, in order of first appearance
        self.walked = False
        self.groups = []   # (start, end) of the contents of each outermost unknown group

    def fault(self):
        """(Err, byte offset) of the record's first fault, or None."""
        try:
            self.message(0, len(self.data), self.sequence)
        except _Fault as exc:
            return exc.args
        return None

    def keys(self):
        """The record's Features keys and FeatureLists keys, each {key: its place in the
        core's order}."""
        if not self.walked:
            self.walked = True
            self.fault()   # protobuf parsed the record: there is none
        return [{key: i for i, key in enumerate(found)} for found in self.found]

    def varint(self, pos, end, limit=10):
        start, value, shift = pos, 0, 0
        while pos < end and pos - start < limit:
            byte = self.data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value & 0xFFFFFFFFFFFFFFFF, pos
            shift += 7
        raise _Fault(_E_VARINT, start)

    def tag(self, pos, end, in_group=False):
        """(field, wire, pos); a tag takes at most 5 bytes, field 0 passes only in a group."""
        tag, after = self.varint(pos, end, 5)
        if tag >> 32 or (tag >> 3 == 0 and not in_group):
            raise _Fault(_E_TAG, pos)
        return tag >> 3, tag & 7, after

    def length(self, pos, end):
        """(start, end) of a LEN field's bytes."""
        n, start = self.varint(pos, end, 5)
        if n >= 0x7FFFFFFF:
            raise _Fault(_E_VARINT, pos)
        if n > end - start:
            raise _Fault(_E_TRUNCATED, pos)
        return start, start + n

    def skip(self, pos, end, field, wire, depth):
        """Past an unknown field of a message at depth (plus the groups it lies in)."""
        at = pos
        if wire == _VARINT:
            return self.varint(pos, end)[1]
        if wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if size > end - pos:
                raise _Fault(_E_TRUNCATED, at)
            return pos + size
        if wire == _LEN:
            return self.length(pos, end)[1]
        if wire != _SGROUP:
            raise _Fault(_E_GROUP if wire == _EGROUP else _E_WIRE, at)
        if depth >= 100:
            raise _Fault(_E_DEPTH, at)
        outermost = not self.groups or self.groups[-1] is not None
        if outermost:
            self.groups.append(None)  # open: the groups inside it are not recorded
        while True:
            if pos >= end:
                raise _Fault(_E_TRUNCATED, at)
            closing = pos
            f2, w2, pos = self.tag(pos, end, in_group=True)
            if w2 == _EGROUP:
                if f2 != field:
                    raise _Fault(_E_GROUP, at)
                if outermost:
                    self.groups[-1] = (at, closing)
                return pos
            pos = self.skip(pos, end, f2, w2, depth + 1)

    def fields(self, pos, end, depth, on_field):
        """Each field of a message at depth (its nesting, as the core's AT_*) in turn:
        on_field(field, wire, pos) returns where the field ends, or None to skip it."""
        while pos < end:
            field, wire, pos = self.tag(pos, end)
            after = on_field(field, wire, pos)
            pos = self.skip(pos, end, field, wire, depth) if after is None else after

    def message(self, pos, end, sequence):
        def on_field(field, wire, pos):
            if wire == _LEN and (field == 1 or (sequence and field == 2)):
                start, stop = self.length(pos, end)
                self.fields(start, stop, 1, lambda f, w, p: self.entry(f, w, p, stop, field == 2))
                return stop
        self.fields(pos, end, 0, on_field)

    def entry(self, field, wire, pos, end, lists):
        """A map entry (field 1 of Features or FeatureLists): its framing and every key's
        UTF-8 first, then its values."""
        if field != 1 or wire != _LEN:
            return None
        start, stop = self.length(pos, end)
        name, unknown = [""], [False]

        def key(field, wire, pos):
            if field == 1 and wire == _LEN:
                first, last = self.length(pos, stop)
                try:
                    name[0] = self.data[first:last].decode("utf-8")
                except UnicodeDecodeError:
                    raise _Fault(_E_UTF8, pos) from None
                return last
            unknown[0] = unknown[0] or not (field == 2 and wire == _LEN)
        self.fields(start, stop, 2, key)
        if not unknown[0]:   # protobuf drops an entry with other fields from the map
            self.found[lists].setdefault(name[0])

        def value(field, wire, pos):
            if field == 2 and wire == _LEN:
                first, last = self.length(pos, stop)
                if lists:   # a FeatureList: field 1 repeated, each a Feature one level deeper
                    self.fields(first, last, 3, lambda f, w, p: self.feature(p, last, 4) if (f, w) == (1, _LEN)
                                else None)
                else:
                    self.feature(first, last, 3, whole=True)
                return last
        self.fields(start, stop, 2, value)
        return stop

    def feature(self, pos, end, depth, whole=False):
        """A Feature at depth; whole: pos to end is all of it, else pos is at its length."""
        if not whole:
            pos, end = self.length(pos, end)

        def on_field(field, wire, at):
            if 1 <= field <= 3 and wire == _LEN:
                first, last = self.length(at, end)
                self.values(first, last, field, depth + 1)
                return last
        self.fields(pos, end, depth, on_field)
        return end

    def values(self, pos, end, kind, depth):
        """A BytesList (kind 1), FloatList (2) or Int64List (3) at depth."""
        while pos < end:
            at = pos
            field, wire, pos = self.tag(pos, end)
            if field != 1:
                pos = self.skip(pos, end, field, wire, depth)
            elif wire == _LEN:
                first, pos = self.length(pos, end)
                if kind == 2 and (pos - first) % 4:
                    raise _Fault(_E_PACKED, at)
                while kind == 3 and first < pos:
                    first = self.varint(first, pos)[1]
            elif (kind, wire) == (2, _I32):
                if 4 > end - pos:
                    raise _Fault(_E_TRUNCATED, at)
                pos += 4
            elif (kind, wire) == (3, _VARINT):
                try:
                    pos = self.varint(pos, end)[1]
                except _Fault:
                    raise _Fault(_E_VARINT, at) from None
            else:
                pos = self.skip(pos, end, field, wire, depth)


def _records(records):
    """A list of bytes-likes, a RecordBatch's records, or gathered records (``buffers``, and
    per record ``which`` buffer, ``starts``, ``lengths``), after the compiled core's bounds
    checks."""
    if type(records) is list:
        return records
    segments = getattr(records, "segments", None)
    if segments is not None:
        for frames, starts, lengths in segments:
            size = memoryview(frames).nbytes
            for start, length in zip(starts.tolist(), lengths.tolist()):
                _check_inside(size, start, length)
        return list(records)
    if not hasattr(records, "which"):
        return records
    views = [memoryview(b).cast("B") for b in records.buffers]
    which, starts, lengths = records.which.tolist(), records.starts.tolist(), records.lengths.tolist()
    if not len(which) == len(starts) == len(lengths):
        raise InvalidArgumentError("gathered records have mismatched which, starts and lengths")
    out = []
    for w, start, length in zip(which, starts, lengths):
        if not 0 <= w < len(views):
            raise InvalidArgumentError(f"a gathered record names block {w} of {len(views)}")
        _check_inside(views[w].nbytes, start, length)
        out.append(views[w][start:start + length])
    return out


def _check_inside(size, start, length):
    if start < 0 or length < 0 or start > size - length:
        raise InvalidArgumentError(f"a RecordBatch record ({start}, {length}) lies outside its {size}-byte block")


def decode_examples(records, keys=None, raw_sizes=None, bytes_column=False, lean=None):
    """Columns of a batch of serialized Examples; see csrc/_example.pyx."""
    if lean is not None and (keys is None or len(lean) != len(keys)):
        raise InvalidArgumentError("lean needs keys and one entry per key")
    table = _Table(keys, sequence=False)
    for i, data in enumerate(_records(records)):
        message, walk = _parse(Example, data, i)
        table.add(i, message.features.feature, walk)
    return table.output(raw_sizes, bytes_column, lean)


def decode_sequence_examples(records, context_keys=None, sequence_keys=None, raw_sizes=None,
                             bytes_column=False):
    """Columns of a batch of serialized SequenceExamples; see csrc/_example.pyx."""
    context = _Table(context_keys, sequence=False)
    lists = _Table(sequence_keys, sequence=True)
    for i, data in enumerate(_records(records)):
        message, walk = _parse(SequenceExample, data, i)
        context.add(i, message.context.feature, walk)
        lists.add(i, message.feature_lists.feature_list, walk)
    return (*context.output(raw_sizes, bytes_column), *lists.output(None, bytes_column))


# -- encoding ------------------------------------------------------------------------------

def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative int64 as two's complement: 10 bytes
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(body)) + body


def _feature(key, kind, values) -> bytes:
    """A Feature message through protobuf; floats are loaded from their bytes so their bits
    survive (Python floats would quiet signalling NaNs)."""
    feature = Feature()
    if kind == KIND_FLOAT:
        with np.errstate(over="ignore"):  # a float past float32 is inf, as the compiled encoder casts it
            data = np.ascontiguousarray(values, dtype="<f4").tobytes()
        feature.float_list.MergeFromString(_field(0x0A, data) if data else b"")
        feature.float_list.SetInParent()
    elif kind == KIND_INT64:
        feature.int64_list.value.extend(int(v) for v in np.asarray(values, dtype=np.int64).ravel())
        feature.int64_list.SetInParent()
    elif kind == KIND_RAW:
        feature.bytes_list.value.append(_framing_py.byte_view(values).tobytes())
    elif kind == KIND_BYTES:
        for v in values:
            if not isinstance(v, bytes):
                raise FeatureSpecError(f"feature {key.decode(errors='replace')!r}: bytes values must be bytes, "
                                       f"not {type(v).__name__}")
        feature.bytes_list.value.extend(values)
        feature.bytes_list.SetInParent()
    return feature.SerializeToString()


def _features(keys, kinds, values) -> bytes:
    # Map entries are framed by hand so that they keep the caller's order.
    return b"".join(
        _field(0x0A, _field(0x0A, k) + _field(0x12, _feature(k, kind, v)))
        for k, kind, v in zip(keys, kinds, values)
    )


def _lists(*args):
    """The compiled encoders take lists (and bytes keys) and raise TypeError otherwise."""
    for arg in args:
        if type(arg) is not list:
            raise TypeError(f"expected list, got {type(arg).__name__}")


def encode_example(keys, kinds, values):
    """One serialized Example; see csrc/_example.pyx."""
    _lists(keys, kinds, values)
    return _field(0x0A, _features(keys, kinds, values))


def encode_examples(keys, kinds, columns, n):
    """n serialized Examples from columns; see csrc/_example.pyx."""
    _lists(keys, kinds, columns)
    for key, kind, column in zip(keys, kinds, columns):
        if kind == KIND_ROWS:
            _lists(column)
        if kind in (KIND_BYTES, KIND_ROWS) and len(column) != n:
            raise FeatureSpecError(f"feature {key.decode()!r}: {len(column)} rows, expected {n}")
    out = []
    for i in range(n):
        row_kinds, row_values = [], []
        for kind, column in zip(kinds, columns):
            if kind == KIND_ROWS:
                kind, value = column[i]
            else:
                value = column[i]
                if kind == KIND_BYTES and type(value) is bytes:  # a row of one value
                    value = [value]
            row_kinds.append(kind)
            row_values.append(value)
        out.append(encode_example(keys, row_kinds, row_values))
    return out


def encode_examples_framed(keys, kinds, columns, n):
    """encode_examples' records framed in one buffer: (frames, starts, lengths); see
    csrc/_example.pyx."""
    records = encode_examples(keys, kinds, columns, n)
    frames = bytearray()
    for record in records:
        _framing_py.append_frame(frames, record)
    lengths = np.array([len(r) for r in records], np.int64)
    starts = np.cumsum(lengths + _framing_py.OVERHEAD_BYTES) - lengths - _framing_py.FOOTER_BYTES
    return frames, starts, lengths


def encode_sequence_example(context_keys, context_kinds, context_values, list_keys, list_steps):
    """One serialized SequenceExample; see csrc/_example.pyx."""
    _lists(context_keys, context_kinds, context_values, list_keys, list_steps, *list_steps)
    lists = b"".join(
        _field(0x0A, _field(0x0A, k) + _field(0x12, b"".join(_field(0x0A, _feature(k, kind, v)) for kind, v in steps)))
        for k, steps in zip(list_keys, list_steps)
    )
    return _field(0x0A, _features(context_keys, context_kinds, context_values)) + _field(0x12, lists)
