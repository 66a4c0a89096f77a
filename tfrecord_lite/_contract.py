"""The written contract between the Python layer and the Example core: the Feature ``Kind``
numbers, the ``DecodedColumn`` each decoder returns per feature name, and the message of the
ExampleDecodeError each raises for a malformed record (``malformed``).

Both backends (the compiled ``tfrecord_lite._example`` and its twin ``_example_py``) export
``Kind`` and ``DecodedColumn`` under those names; tests/test_contract.py checks that they
agree. The compiled module builds its ``Kind`` from its own C enum, so a drift fails there.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple, Optional, Tuple


class Kind(enum.IntEnum):
    """A row's Feature kind in a decoded column, and the kind of an encoder column."""

    ABSENT = 0  # the key is not in this record
    BYTES = 1
    FLOAT = 2
    INT64 = 3
    EMPTY = 4  # the key is present with an empty Feature (no kind set)
    RAW = 5  # encoder only: 2-D uint8 array, one bytes value per row
    ROWS = 6  # encoder only: list of per-row (kind, values)


class DecodedColumn(NamedTuple):
    """One feature name's rows from decode_examples / decode_sequence_examples.

    steps: int64 FeatureList steps per record (-1 where absent), or None for an Example
    column; kinds: uint8 Kind per row; counts: int64 value count per row; floats, ints: the
    float32 / int64 values of all rows back to back; values: the bytes values (an object array
    of bytes, (values, offsets) with bytes_column, or (uint8 array (rows, nbytes), byte length
    per row or -1) for a raw column); uniform: (kind, count) when every row agrees, else None.
    """

    steps: Any
    kinds: Any
    counts: Any
    floats: Any
    ints: Any
    values: Any
    uniform: Optional[Tuple[int, int]]


# Why a record is malformed, by csrc/wire.pxd's Err number (0 is no fault).
FAULTS = (
    None,
    "a field runs past the end of its message",
    "a varint is cut short or too long (over 10 bytes, or over 5 for a tag or a length), "
    "or a length is 2**31 - 1 or more",
    "invalid field tag (field number 0 or over 32 bits)",
    "invalid wire type",
    "unmatched end-group tag",
    "nesting deeper than 100 levels",
    "packed float data is not a multiple of 4 bytes",
    "a feature name is not valid UTF-8",
)


def malformed(sequence: bool, fault: int, at: int) -> str:
    """The ExampleDecodeError message both decoders give for a record's first fault, at byte
    ``at`` of the record."""
    return f"malformed {'SequenceExample' if sequence else 'Example'}: {FAULTS[fault]} (at byte {at} of the record)"
