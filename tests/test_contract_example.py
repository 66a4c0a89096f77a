"""The contract between the Python layer and the core (tfrecord_lite/_contract.py): both
backends of each concern expose the same public names with the same signatures, the same
``Kind`` numbers and the same ``DecodedColumn`` result; the framed encoder uses the one CRC32C
backend that tfrecord_lite._framing owns; the encoders check the containers they are given."""

import __future__
import ctypes
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tfrecord_lite import _contract, _example, _example_py, _framing, _framing_py, _spans, _spans_py

# The twin builds its protobuf classes at import; they are its machinery, not the contract.
# byte_view is the twin of cursor.pxd's acquire, which the core reaches only from Cython.
TWIN_ONLY = {"example": {"Example", "Feature", "SequenceExample", "PACKAGE", "file_descriptor"},
             "framing": {"byte_view"}, "spans": set()}
PAIRS = {"example": (_example, _example_py), "framing": (_framing, _framing_py), "spans": (_spans, _spans_py)}


def public(module, concern):
    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and not inspect.ismodule(value)
            and not isinstance(value, __future__._Feature) and name not in TWIN_ONLY[concern]}


def parameters(fn):
    """(name, kind, default) of each parameter: annotations are the twin's alone."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("concern", sorted(PAIRS))
def test_backends_expose_the_same_names_and_signatures(concern):
    compiled, twin = (public(m, concern) for m in PAIRS[concern])
    assert sorted(compiled) == sorted(twin)
    functions = 0
    for name, value in compiled.items():
        other = twin[name]
        if isinstance(value, type):
            assert isinstance(other, type), name
        elif callable(value):
            assert parameters(value) == parameters(other), name
            functions += 1
        else:
            assert value == other, name
    assert functions >= 6   # the entry points are there and were compared


def test_kind_is_one_enum_with_the_same_numbers():
    numbers = {m.name: m.value for m in _contract.Kind}
    assert numbers == {"ABSENT": 0, "BYTES": 1, "FLOAT": 2, "INT64": 3, "EMPTY": 4, "RAW": 5, "ROWS": 6}
    for module in (_example, _example_py):
        assert {m.name: m.value for m in module.Kind} == numbers   # the compiled one is its C enum's
        assert {name: getattr(module, f"KIND_{name}") for name in numbers} == numbers
    assert _example.Kind is not _contract.Kind   # built from the C enum, so the comparison means something


def test_decoded_column_is_a_named_type_in_both_backends():
    assert _example.DecodedColumn is _example_py.DecodedColumn is _contract.DecodedColumn
    assert _contract.DecodedColumn._fields == ("steps", "kinds", "counts", "floats", "ints", "values", "uniform")


def _feature(ex, row):
    """encode_example's arguments for a record holding "f" as row says: None absent, []
    an empty Feature, else a list of bytes, floats or ints."""
    if row is None:
        return [], [], []
    if row == []:
        return [b"f"], [ex.KIND_EMPTY], [None]
    if isinstance(row[0], bytes):
        return [b"f"], [ex.KIND_BYTES], [row]
    if isinstance(row[0], float):
        return [b"f"], [ex.KIND_FLOAT], [np.array(row, np.float32)]
    return [b"f"], [ex.KIND_INT64], [np.array(row, np.int64)]


def _rows(values, records):
    """Rows for _feature: absent, empty, or 1 to values bytes, floats or ints; 1 to records."""
    return st.lists(st.one_of(st.none(), st.just([]), st.lists(st.binary(max_size=8), min_size=1, max_size=values),
                              st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=values),
                              st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=values)),
                    min_size=1, max_size=records)


@given(_rows(3, 6))
def test_decoders_return_decoded_columns_with_kind_numbers(backend, rows):
    """Each record holds feature "f" as one of the kinds, or not at all; the decoded column's
    fields say so by name, in both backends."""
    ex = backend.example
    records = [ex.encode_example(*_feature(ex, row)) for row in rows]
    keys, (col,) = ex.decode_examples(records, ["f"])
    assert keys == ["f"] and type(col) is _contract.DecodedColumn
    K = ex.Kind
    want = [K.ABSENT if row is None else K.EMPTY if row == [] else
            K.BYTES if isinstance(row[0], bytes) else K.FLOAT if isinstance(row[0], float) else K.INT64
            for row in rows]
    assert col.kinds.tolist() == [int(k) for k in want]
    assert col.counts.tolist() == [len(row or []) for row in rows]
    assert col.steps is None
    assert list(col.values) == [v for row in rows if row and isinstance(row[0], bytes) for v in row]
    assert col.ints.tolist() == [v for row in rows if row and type(row[0]) is int for v in row]
    assert col.uniform == ((int(want[0]), len(rows[0] or [])) if len(set(zip(want, col.counts.tolist()))) == 1
                           else None)


@given(_rows(2, 5), st.sampled_from([None, (2, 1), (2, 2), (3, 1), (3, 2), (1, 1), (1, 2)]), st.booleans())
@example(rows=[[1.5], [2.5]], lean=(2, 1), bytes_column=False)
@example(rows=[[b"a", b""], [b"bc", b"d"]], lean=(1, 2), bytes_column=True)
@example(rows=[[b"a"], [b"bc"]], lean=(1, 1), bytes_column=False)
@example(rows=[[7, 8], None], lean=(3, 2), bytes_column=False)
def test_a_lean_column_holds_only_its_kinds_values(backend, rows, lean, bytes_column):
    """decode_examples(lean=...): a column whose uniform equals its lean entry comes with that
    kind's values alone, equal to the full output's; any other column comes in full. Both
    backends alike (parse_example's all-present FixedLenFeature path)."""
    ex = backend.example
    records = [ex.encode_example(*_feature(ex, row)) for row in rows]
    _, (full,) = ex.decode_examples(records, ["f"], None, bytes_column)
    _, (col,) = ex.decode_examples(records, ["f"], None, bytes_column, [lean])
    assert col.uniform == full.uniform
    slots = {ex.KIND_FLOAT: "floats", ex.KIND_INT64: "ints", ex.KIND_BYTES: "values"}
    if lean is None or full.uniform != lean:
        fields = _contract.DecodedColumn._fields
    else:
        fields = (slots[lean[0]], "uniform")
        assert col.steps is None and col.kinds is None and col.counts is None
        assert all(getattr(col, slot) is None for slot in slots.values() if slot not in fields)
    for field in fields:
        got, want = getattr(col, field), getattr(full, field)
        if field == "uniform" or want is None:
            assert got == want
        elif field == "values" and bytes_column:  # (values, offsets)
            for part, expected in zip(got, want, strict=True):
                np.testing.assert_array_equal(part, expected)
        elif field == "values":
            assert list(got) == list(want)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("keys, lean", [(None, [None]), (["f"], []), (["f"], [None, None])])
def test_lean_needs_keys_and_one_entry_per_key(backend, keys, lean):
    from tfrecord_lite.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="lean needs keys"):
        backend.example.decode_examples([], keys, None, False, lean)


# -- checked containers --------------------------------------------------------------------

FLOATS = np.array([1.0], np.float32)


@pytest.mark.parametrize("call", [
    lambda ex: ex.encode_example((b"a",), [ex.KIND_FLOAT], [FLOATS]),
    lambda ex: ex.encode_example([b"a"], (ex.KIND_FLOAT,), [FLOATS]),
    lambda ex: ex.encode_example([b"a"], [ex.KIND_FLOAT], (FLOATS,)),
    lambda ex: ex.encode_example(["a"], [ex.KIND_FLOAT], [FLOATS]),
    lambda ex: ex.encode_examples((b"a",), [ex.KIND_FLOAT], [FLOATS.reshape(1, 1)], 1),
    lambda ex: ex.encode_examples(["a"], [ex.KIND_FLOAT], [FLOATS.reshape(1, 1)], 1),
    lambda ex: ex.encode_examples([b"a"], [ex.KIND_ROWS], [((ex.KIND_FLOAT, FLOATS),)], 1),
    lambda ex: ex.encode_examples_framed([b"a"], [ex.KIND_ROWS], [((ex.KIND_FLOAT, FLOATS),)], 1),
    lambda ex: ex.encode_sequence_example([], [], [], [b"s"], [((ex.KIND_FLOAT, FLOATS),)]),
    lambda ex: ex.encode_sequence_example([], [], [], (b"s",), [[(ex.KIND_FLOAT, FLOATS)]]),
], ids=["keys-tuple", "kinds-tuple", "values-tuple", "key-str", "columns-keys-tuple", "columns-key-str",
        "rows-tuple", "framed-rows-tuple", "steps-tuple", "list-keys-tuple"])
def test_a_wrong_container_raises_type_error(backend, call):
    """The compiled encoders cast Python containers to lists and bytes: a tuple or a str in
    their place raises TypeError (never a read of memory it is not), as the twin does."""
    with pytest.raises(TypeError):
        call(backend.example)


# -- one CRC32C: _framing's ------------------------------------------------------------------

def test_only_framing_links_crc32c():
    """crc32c.c is compiled into _framing alone; _example has no CRC code of its own (dlsym
    looks in that library and its dependencies only)."""
    assert hasattr(ctypes.CDLL(_framing.__file__), "tfl_crc32c")
    example = ctypes.CDLL(_example.__file__)
    for symbol in ("tfl_crc32c", "tfl_crc32c_init", "tfl_crc32c_backend"):
        assert not hasattr(example, symbol), symbol


@pytest.mark.parametrize("crc", ["table", "hardware"])
def test_framed_encoder_and_reader_agree_under_each_crc_backend(crc):
    columns = [b"x", b"n"], [_example.KIND_BYTES, _example.KIND_INT64]
    data = [[b"a" * i for i in range(50)], np.arange(50, dtype=np.int64).reshape(50, 1)]
    try:
        active = _framing.set_crc32c_backend(crc)   # "table", or the hardware path's name
        assert (active == "table") == (crc == "table")
        frames, starts, lengths = _example.encode_examples_framed(*columns, data, 50)
        assert _framing.crc32c_backend() == active   # encoding did not switch it
        twin_frames, twin_starts, twin_lengths = _example_py.encode_examples_framed(*columns, data, 50)
        assert bytes(frames) == bytes(twin_frames)
        assert starts.tolist() == twin_starts.tolist() and lengths.tolist() == twin_lengths.tolist()
        records = _framing.scan_frames(frames)[0]
        assert records == _example.encode_examples(*columns, data, 50)
        # a flipped data byte fails the data CRC check under this backend too
        broken = bytearray(frames)
        broken[int(starts[3])] ^= 1
        assert len(_framing.scan_frames(broken)[0]) == 3
    finally:
        _framing.set_crc32c_backend("hardware")


def _framed_both(sizes):
    """A bytes column (one value per row, sizes[i] bytes) and an int64 column, framed by the
    core and by the twin; the core's unframed records (encode_examples) are checked against
    the twin's on the way, since they come from the same buffer that grows."""
    keys, kinds = [b"x", b"n"], [_example.KIND_BYTES, _example.KIND_INT64]
    data = [[bytes([i % 251]) * size for i, size in enumerate(sizes)],
            np.arange(len(sizes), dtype=np.int64).reshape(-1, 1) << 40]
    records = _example.encode_examples(keys, kinds, data, len(sizes))
    assert records == _example_py.encode_examples(keys, kinds, data, len(sizes))
    assert all(type(r) is bytes for r in records)
    return (_example.encode_examples_framed(keys, kinds, data, len(sizes)),
            _example_py.encode_examples_framed(keys, kinds, data, len(sizes)), data)


@given(st.lists(st.integers(0, 3000), min_size=1, max_size=30))
@example([0] + [3000] * 29)      # every later row larger than the first: the buffer grows
@example([3000] + [0] * 29)      # the first row larger than the rest: the buffer shrinks
@example([0, 0, 0, 200_000])     # one row far past what the others left room for
def test_the_framed_encoder_sizes_its_buffer_from_the_rows(sizes):
    """The core measures and writes each record in one pass, into a buffer sized from the
    first row that grows when a record would not fit: whatever the rows' sizes, it gives the
    twin's frames, with no bytes past the last one, and the twin's records unframed."""
    (frames, starts, lengths), (twin, twin_starts, twin_lengths), data = _framed_both(sizes)
    assert bytes(frames) == bytes(twin)
    assert starts.tolist() == twin_starts.tolist() and lengths.tolist() == twin_lengths.tolist()
    assert len(frames) == int(starts[-1] + lengths[-1]) + _framing.FOOTER_BYTES


def test_the_framed_encoders_first_buffer_is_capped():
    """A first row of 1 MiB in front of 99 small ones does not reserve 100 MiB; 80 rows of
    1 MiB grow past the cap. Both frame every row as the twin does."""
    for sizes in ([1 << 20] + [10] * 99, [1 << 20] * 80):
        (frames, starts, lengths), (twin, _, _), _ = _framed_both(sizes)
        assert bytes(frames) == bytes(twin)
        assert len(frames) == int(starts[-1] + lengths[-1]) + _framing.FOOTER_BYTES


def test_table_switch_reaches_the_framed_encoder():
    """TFRECORD_LITE_CRC32C_TABLE=1 picks the table path in _framing, the one state the
    framed encoder also uses; its frames still verify."""
    code = ("from tfrecord_lite import _example, _framing\n"
            "f, s, n = _example.encode_examples_framed([b'k'], [_example.KIND_BYTES], [[b'v'] * 3], 3)\n"
            "print(_framing.crc32c_backend(), len(_framing.scan_frames(f)[0]))")
    env = dict(os.environ, TFRECORD_LITE_CRC32C_TABLE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["table", "3"]
