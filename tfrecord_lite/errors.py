"""The whole exception hierarchy of tfrecord_lite.

Every error about a record carries where it happened: ``.path`` (file name or
``"<buffer>"``), ``.offset`` (byte where the record's frame starts), ``.index``
(record number within the file) and states them in its message. An error raised while
parsing a batch whose records' origins are known (batches read from files) names the file,
offset and index of the record, and keeps its position in the batch as ``.batch_index``;
without origins (a list of bytes) ``.index`` is that position and ``.path`` is None.
"""

from __future__ import annotations

import json
import operator
import sys

__all__ = [
    "TFRecordError",
    "DataLossError",
    "CorruptRecordError",
    "TruncatedRecordError",
    "RecordTooLargeError",
    "ExampleDecodeError",
    "NotTFRecordError",
    "FeatureSpecError",
    "EncodeError",
    "InvalidArgumentError",
    "ArgumentTypeError",
]


class TFRecordError(Exception):
    """Root of every error tfrecord_lite raises on purpose."""

    def __init__(self, message: str, *, path=None, offset=None, index=None, hint=None, batch_index=None):
        self.detail = message
        self.path = path
        self.offset = offset
        self.index = index
        self.hint = hint
        self.batch_index = batch_index  # the record's position in the batch being parsed
        super().__init__(self._render())
        if path is offset is index is hint is batch_index is None and isinstance(message, str):
            self._restore(message)

    def _relocate(self, path, offset, index) -> None:
        """Name the record by its place in its file rather than its position in a batch."""
        self.batch_index = self.index
        self.path, self.offset, self.index = path, offset, index
        self.args = (self._render(),)

    def _within(self, path, offset, index) -> None:
        """Name the file of a piece that was read as a buffer: offset and index are those of
        the piece's first frame in the file."""
        self.path = path
        self.offset = None if self.offset is None else offset + self.offset
        self.index = None if self.index is None else index + self.index
        self.args = (self._render(),)

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.index is not None:
            where.append(f"record {self.index}")
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        text = f"{', '.join(where)}: {self.detail}" if where else self.detail
        if self.hint:  # its own sentence after the detail's, whichever case it was written in
            hint = str(self.hint)
            stop = " " if text.endswith((".", "!", "?")) else ". "
            text += stop + hint[:1].upper() + hint[1:]
        return text

    def _keywords(self) -> dict:
        return {"path": self.path, "offset": self.offset, "index": self.index, "hint": self.hint,
                "batch_index": self.batch_index}

    def __reduce__(self):
        # Keep keyword attributes across pickling (process pools re-raise these).
        return (_rebuild, (type(self), self.detail, self._keywords()))

    def _carry(self) -> None:
        """Write the fields into the traceback text: a DataLoader worker's error reaches the
        main process only as its class and that text, rebuilt as ``cls(text)``, which reads
        them back (_restore)."""
        if any(_FIELDS in text for text in (str(self), *getattr(self, "__notes__", ()))):
            return  # carried already (it crossed two of our datasets)
        line = _FIELDS + json.dumps({"detail": self.detail, **self._keywords()}, default=str)
        if _NOTES:
            self.add_note(line)
        else:
            self.args = (f"{self._render()}\n{line}",)

    def _restore(self, text: str) -> None:
        """Take the fields _carry wrote as text's last line, where a traceback ends with the
        error raised last (not one it chains)."""
        line = text.rstrip("\n").rpartition("\n")[2]
        if not line.startswith(_FIELDS):
            return
        try:
            fields = json.loads(line[len(_FIELDS):])
        except ValueError:
            return
        if isinstance(fields, dict) and set(fields) == {"detail", *self._keywords()}:
            self.__dict__.update(fields)  # args stay the text: the worker's traceback


_FIELDS = "tfrecord_lite error fields: "  # marks the line _carry writes
_NOTES = sys.version_info >= (3, 11)  # tracebacks show __notes__ (add_note)


def _rebuild(cls, detail, keywords):
    return cls(detail, **keywords)


class DataLossError(TFRecordError, ValueError):
    """Corrupt or truncated input (TensorFlow's name for it)."""


class CorruptRecordError(DataLossError):
    """A masked CRC32C of a record's length or data does not match."""


class TruncatedRecordError(DataLossError):
    """The input ends inside a record."""


class RecordTooLargeError(DataLossError):
    """A length field exceeds ``max_record_bytes``."""


class ExampleDecodeError(DataLossError):
    """A well-framed record does not hold a valid Example/SequenceExample protobuf."""


class NotTFRecordError(DataLossError):
    """The input is not a TFRecord file at all (text, Parquet, an image, ...): no valid
    record header where the file starts, nor anywhere in its first bytes."""


class FeatureSpecError(TFRecordError, ValueError):
    """The data does not fit the user's feature spec (missing, wrong length, wrong type)."""


class InvalidArgumentError(TFRecordError, ValueError):
    """An argument is out of its range: a start offset outside the buffer, a RecordBatch
    whose offsets lie outside its blocks, an unknown backend name (TensorFlow's name)."""


class ArgumentTypeError(TFRecordError, TypeError):
    """An argument has a type the function cannot take (a str where a path list or an
    integer is expected, a spec that is not a feature spec)."""


class EncodeError(TFRecordError):
    """The user's encode function failed on an item while writing shards. ``.item`` is the
    item's position in the input, ``.shard`` the shard it was bound for and ``.path`` that
    shard's file name."""

    def __init__(self, message: str, *, item=None, shard=None, path=None, offset=None, index=None, hint=None,
                 batch_index=None):
        self.item = item
        self.shard = shard
        super().__init__(message, path=path, offset=offset, index=index, hint=hint, batch_index=batch_index)

    def _keywords(self) -> dict:
        return {**super()._keywords(), "item": self.item, "shard": self.shard}


# The writer's errors, raised by the compiled core and its twin alike (FrameBuffer).

def writer_closed(path) -> TFRecordError:
    return TFRecordError("write to a closed TFRecordWriter", path=path,
                         hint="open a new writer: this one was committed by close(), or discarded (by "
                         "abort(), an exception inside its with block or a failed close)")


def writer_in_use(path) -> TFRecordError:
    return TFRecordError("the TFRecordWriter was called again by the thread that is writing with it (from a "
                         "write_many iterable, or a signal handler that ran during a write), which would hang",
                         path=path, hint="write from outside the iterable; in a signal handler, set a flag and "
                         "close the writer once the write returns")


def not_a_record(record, exc, path, index) -> TFRecordError:
    hint = "records must be bytes-like (bytes, bytearray, memoryview, contiguous numpy array)"
    # What to do about the usual mistakes: TensorFlow's writer took a str (as its UTF-8) and
    # tf.train.Example users pass the message itself.
    if isinstance(record, str):
        hint += "; encode a str first: record.encode()"
    elif hasattr(record, "SerializeToString"):
        hint += "; serialize a protobuf message first: record.SerializeToString()"
    elif isinstance(record, dict):
        hint += "; encode a dict of features first: tfrecord_lite.encode_example(record)"
    elif "contiguous" in str(exc):
        hint += "; copy a strided array first: numpy.ascontiguousarray(record)"
    return TFRecordError(f"cannot write a {type(record).__name__} as a record ({exc})", path=path, index=index,
                         hint=hint)


def as_integer(value):
    """value as an int where it is an integer (numpy's too), else None: a bool is no count or
    level, and a float or str is neither truncated nor parsed."""
    try:
        return None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        return None


def positive_int(name, value, *, allow_none=False, allow_zero=False, hint=None):
    """value as an int (as_integer), else InvalidArgumentError naming the argument. allow_none
    lets None through; allow_zero takes 0."""
    if value is None and allow_none:
        return None
    number = as_integer(value)
    if number is None or number < (0 if allow_zero else 1):
        raise InvalidArgumentError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} integer, "
                                   f"not {value!r}", hint=hint)
    return number
