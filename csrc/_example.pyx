# cython: freethreading_compatible = False
"""Protobuf wire decoding and encoding of tf.train.Example and SequenceExample.

Decoding is columnar and spec-agnostic: every requested key (or every key, when ``keys`` is
None) becomes a column of rows, one row per Feature, holding the Feature's kind, its value
count and its values appended to flat buffers. Interpreting columns against a feature spec
(dense, sparse, ragged, raw tensors) is the job of tfrecord_lite/example.py; this module only
turns bytes into columns and typed columns back into bytes.

Wire facts implemented here (tensorflow/core/example/{example,feature}.proto)::

    Example         { Features features = 1; }
    SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
    Features        { map<string, Feature> feature = 1; }       entry: key = 1, value = 2
    FeatureLists    { map<string, FeatureList> feature_list = 1; }
    FeatureList     { repeated Feature feature = 1; }
    Feature         { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   Int64List int64_list = 3; } }
    BytesList       { repeated bytes value = 1; }
    FloatList       { repeated float value = 1 [packed = true]; }
    Int64List       { repeated int64 value = 1 [packed = true]; }

Protobuf merge semantics are kept: a repeated map key or FeatureList key keeps the last
entry, a repeated ``features``/``context``/``feature_lists`` field merges, a repeated
``*_list`` field of the same kind concatenates, and switching the oneof clears it. Unknown
fields of every wire type (groups included) are skipped; everything else malformed raises
ExampleDecodeError. The whole parse runs without the GIL; Python objects (bytes values,
arrays) are made afterwards from the recorded spans.

The pure-Python twin is tfrecord_lite/_example_py.py; both expose the same names, the same
``Kind`` numbers and the same ``DecodedColumn`` result (tfrecord_lite/_contract.py).

Layout. This one extension module is built from several files, one per concern:
  wire.pxd                 protobuf wire primitives: inline readers over the Cursor
                           (cursor.pxd) and the varint writers
  _example_columns.pxi     growable column buffers (Buf, Column, Table) and their output
  _example_records.pxi     the records a decode reads, pointed at where they lie
  _example_decode.pxi      Example / SequenceExample decoding and its entry points
  _example_encode.pxi      encoding, framed encoding included
They are one module on purpose: the decoder appends every value to a column buffer, and a
call between extension modules goes through a function-pointer table that the C compiler
cannot inline, which the per-value hot path would pay for. `include` keeps them one C unit.
CRC32C is not compiled in here: tfrecord_lite._framing owns it (its backend choice and
TFRECORD_LITE_CRC32C_TABLE), and this module borrows tfl_crc32c from it as a capsule.
"""
import enum

cimport numpy as cnp
import numpy as np
from cpython.buffer cimport PyBuffer_Release
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New, PyCapsule_SetContext
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport (
    PyBytes_AS_STRING, PyBytes_Check, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE,
)
from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

from crc32c cimport TFL_CRC32C_CAPSULE, crc32c_fn, tfl_mask_crc
from guard cimport TFL_GUARD_CAPSULE, mapped_kept, tfl_guard_fns
from cursor cimport Cursor, acquire, cursor_expect, cursor_init, cursor_len, cursor_take, cursor_varint
from frame cimport FRAME_FOOTER, FRAME_HEADER, FRAME_OVERHEAD
from objects cimport (NOGIL_MIN_BYTES, ByteSpan, bytes_objects, heap_hint, pool_bytes, pool_clear, pool_count,
                     same_bytes, share_scan, short_clear, short_count)
from le cimport TFL_LITTLE_ENDIAN, tfl_store_le32, tfl_store_le64
from wire cimport *

from tfrecord_lite import _framing
from tfrecord_lite._contract import DecodedColumn, malformed
from tfrecord_lite.errors import ExampleDecodeError, FeatureSpecError, InvalidArgumentError
from tfrecord_lite.errors import TruncatedRecordError as _TruncatedRecordError  # not a name of the module

cnp.import_array()

# The framed encoder's CRC32C is _framing's, so both follow the one backend choice.
cdef crc32c_fn framing_crc32c = <crc32c_fn>PyCapsule_GetPointer(_framing._crc32c_capsule, TFL_CRC32C_CAPSULE)
# Decodes read records where they lie, mapped files included: inside _framing's guard.
cdef tfl_guard_fns *guard = <tfl_guard_fns *>PyCapsule_GetPointer(_framing._guard_capsule, TFL_GUARD_CAPSULE)

cdef enum:               # Kind: a row's Feature kind; exported below as the Kind IntEnum
    ABSENT = 0           # the key is not in this record
    BYTES = 1
    FLOAT = 2
    INT64 = 3
    EMPTY = 4            # the key is present with an empty Feature (no kind set)
    RAW = 5              # encoder only: 2-D uint8 array, one bytes value per row
    ROWS = 6             # encoder only: list of per-row (kind, values)

KIND_ABSENT = ABSENT
KIND_BYTES = BYTES
KIND_FLOAT = FLOAT
KIND_INT64 = INT64
KIND_EMPTY = EMPTY
KIND_RAW = RAW
KIND_ROWS = ROWS

Kind = enum.IntEnum("Kind", [("ABSENT", ABSENT), ("BYTES", BYTES), ("FLOAT", FLOAT), ("INT64", INT64),
                             ("EMPTY", EMPTY), ("RAW", RAW), ("ROWS", ROWS)], module=__name__)
Kind.__doc__ = "A row's Feature kind (the C enum's numbers); see tfrecord_lite/_contract.py."


include "_example_columns.pxi"
include "_example_records.pxi"
include "_example_decode.pxi"
include "_example_encode.pxi"
include "objects_kept.pxi"
