"""Fuzz Example and SequenceExample decoding with every feature kind (FixedLen, VarLen,
Sparse, Ragged, FixedLenSequence, RawTensor), on both backends, which must agree.

Byte 0 picks the mode. Even: the rest is one serialized record, parsed with fixed specs
of every kind (a byte-level view, as a corrupt file would give). Odd: structure-aware, the
rest drives an atheris.FuzzedDataProvider that chooses a batch of Examples (or
SequenceExamples) and a spec, encodes them with encode_example, applies a few byte
mutations, and parses them from a list and from a RecordBatch read out of valid frames.
"""


import atheris
import numpy as np

with atheris.instrument_imports(include=["tfrecord_lite"]):
    import tfrecord_lite as tfl
    from tfrecord_lite import _framing_py
from _common import fuzz, on_both

NAMES = ("a", "b", "c")
KINDS = (np.float32, np.int64, bytes)

# The byte-level mode's specs: every kind, over the one- and two-letter names a fuzzer
# finds quickly.
RAW_SPECS = (
    {"a": tfl.FixedLenFeature([], np.int64, default_value=0), "b": tfl.VarLenFeature(np.float32),
     "c": tfl.RaggedFeature(bytes)},
    {"a": tfl.FixedLenFeature([2], np.float32, default_value=[0, 0]), "b": tfl.RawTensorFeature((2,), np.uint8),
     "c": tfl.SparseFeature("i", "c", np.int64, 4)},
    {"a": tfl.FixedLenSequenceFeature([], bytes, allow_missing=True), "b": tfl.VarLenFeature(bytes),
     "c": tfl.RaggedFeature(np.int64, row_splits_dtype="int64")},
)
RAW_SEQUENCE_SPECS = (
    ({"a": tfl.FixedLenFeature([], np.int64, default_value=1)},
     {"b": tfl.FixedLenSequenceFeature([], np.float32), "c": tfl.VarLenFeature(bytes)}),
    ({"a": tfl.VarLenFeature(np.float32), "c": tfl.RaggedFeature(bytes)},
     {"a": tfl.RaggedFeature(np.int64), "b": tfl.FixedLenSequenceFeature([2], np.int64, default_value=0)}),
)


def values(fdp, kind, n):
    if kind is np.float32:
        with np.errstate(over="ignore"):  # doubles beyond float32's range become inf
            return np.array([fdp.ConsumeRegularFloat() for _ in range(n)]).astype(np.float32)
    if kind is np.int64:
        return np.array(fdp.ConsumeIntListInRange(n, -2**63, 2**63 - 1), np.int64)
    return [fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 6)) for _ in range(n)]


def feature_values(fdp, kinds):
    """One record's {name: values}: each feature present or not, with 0..4 values."""
    out = {}
    for name, kind in kinds.items():
        if fdp.ConsumeIntInRange(0, 3):
            out[name] = values(fdp, kind, fdp.ConsumeIntInRange(0, 4))
    if fdp.ConsumeBool():
        out["i"] = np.array(fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 4), -1, 5), np.int64)
    return out


def spec_for(fdp, name, kind, sequence):
    """A spec for one feature, of a kind the fuzzer picks; its dtype mostly matches the data."""
    dtype = kind if fdp.ConsumeIntInRange(0, 7) else fdp.PickValueInList(list(KINDS))
    k = fdp.ConsumeIntInRange(0, 3)
    pick = fdp.ConsumeIntInRange(0, 5)
    if sequence:
        if pick < 3:
            return tfl.FixedLenSequenceFeature([k] if pick else [], dtype)
        return tfl.VarLenFeature(dtype) if pick == 3 else tfl.RaggedFeature(dtype)
    if pick == 0:
        default = None if fdp.ConsumeBool() else (b"" if dtype is bytes else 0)
        return tfl.FixedLenFeature([k] if fdp.ConsumeBool() else [], dtype, default_value=default)
    if pick == 1:
        return tfl.VarLenFeature(dtype)
    if pick == 2:
        return tfl.RaggedFeature(dtype, row_splits_dtype=fdp.PickValueInList(["int32", "int64"]))
    if pick == 3:
        return tfl.FixedLenSequenceFeature([k], dtype, allow_missing=True)
    if pick == 4:
        return tfl.RawTensorFeature((k,), fdp.PickValueInList([np.uint8, np.int16, np.float32]))
    return tfl.SparseFeature("i", name, dtype, k + 1, already_sorted=fdp.ConsumeBool())


def mutate(fdp, record):
    """A few byte-level edits: flip a bit, set a byte, delete, insert, truncate."""
    data = bytearray(record)
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        if not data:
            break
        at, op = fdp.ConsumeIntInRange(0, len(data) - 1), fdp.ConsumeIntInRange(0, 4)
        if op == 0:
            data[at] ^= 1 << fdp.ConsumeIntInRange(0, 7)
        elif op == 1:
            data[at] = fdp.ConsumeIntInRange(0, 255)
        elif op == 2:
            del data[at]
        elif op == 3:
            data.insert(at, fdp.ConsumeIntInRange(0, 255))
        else:
            del data[at:]
    return bytes(data)


def from_frames(records):
    """The same records as a RecordBatch left in place in valid frames."""
    framed = bytes(_framing_py.encode_frames(records))
    return next(iter(tfl.TFRecordReader(framed).record_batches(len(records))))


def structured(fdp):
    sequence = fdp.ConsumeBool()
    kinds = {name: fdp.PickValueInList(list(KINDS)) for name in NAMES[: fdp.ConsumeIntInRange(1, 3)]}
    records = []
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        if sequence:
            steps = {name: [values(fdp, kind, fdp.ConsumeIntInRange(0, 3)) for _ in range(fdp.ConsumeIntInRange(0, 3))]
                     for name, kind in kinds.items() if fdp.ConsumeBool()}
            record = tfl.encode_sequence_example(feature_values(fdp, kinds), steps)
        else:
            record = tfl.encode_example(feature_values(fdp, kinds), deterministic=fdp.ConsumeBool())
        records.append(mutate(fdp, record))
    try:
        if sequence:
            context = {n: spec_for(fdp, n, k, False) for n, k in kinds.items() if fdp.ConsumeBool()}
            steps = {n: spec_for(fdp, n, k, True) for n, k in kinds.items() if fdp.ConsumeBool()}
        else:
            spec = {n: spec_for(fdp, n, k, False) for n, k in kinds.items()}
    except tfl.FeatureSpecError:
        return  # a spec the library refuses up front (e.g. a default of the wrong type)
    if sequence:
        result = on_both(lambda: tfl.parse_sequence_example(records, context, steps))
        assert on_both(lambda: tfl.parse_sequence_example(from_frames(records), context, steps)) == result
    else:
        result = on_both(lambda: tfl.parse_example(records, spec))
        assert on_both(lambda: tfl.parse_example(from_frames(records), spec)) == result
    on_both(lambda: tfl.decode_examples(records))


def TestOneInput(data):
    if not data:
        return
    if data[0] & 1:
        structured(atheris.FuzzedDataProvider(data[1:]))
        return
    record = [data[1:]]
    on_both(lambda: tfl.decode_examples(record))
    spec = RAW_SPECS[data[0] // 2 % len(RAW_SPECS)]
    on_both(lambda: tfl.parse_example(record, spec))
    context, steps = RAW_SEQUENCE_SPECS[data[0] // 2 % len(RAW_SEQUENCE_SPECS)]
    on_both(lambda: tfl.parse_sequence_example(record, context, steps))


if __name__ == "__main__":
    fuzz(TestOneInput)
