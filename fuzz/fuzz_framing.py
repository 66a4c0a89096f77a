"""Fuzz TFRecord framing: TFRecordReader over hostile bytes, framed or not, raw or inside a
gzip/zlib wrapper, for every on_corrupt mode, as an in-memory buffer, as a stream handing
out odd chunk sizes, and through record_batches.

Input layout: byte 0 picks the shape (raw bytes, valid frames, valid frames with a flipped
bit, valid frames truncated), the compression, check_crc and on_corrupt; byte 1 the stream's chunk
size, the mutation position and the batch size; the rest is the payload ("|" separates
records when they are framed). Every way of reading the same input must give the same
records and the same errors (class, offset, record index), on both backends.
"""

import gzip
import zlib

import atheris

# Coverage (and its cost) for tfrecord_lite only, not numpy or protobuf.
with atheris.instrument_imports(include=["tfrecord_lite"]):
    import tfrecord_lite as tfl
    from tfrecord_lite import _framing_py
    from tfrecord_lite.reader import ON_CORRUPT
from _common import Trickle, error_key, fuzz, on_both


def read(reader, batch_size=None):
    """(records, the error raised or None, the errors of skipped records)."""
    records, raised = [], None
    try:
        if batch_size is None:
            records.extend(reader)
        else:
            for batch in reader.record_batches(batch_size):
                assert 0 < len(batch) <= batch_size
                records.extend(bytes(r) for r in batch)
    except tfl.TFRecordError as exc:
        raised = error_key(exc)
    return records, raised, [error_key(e) for e in reader.skipped]


def content_of(data):
    opts, knob, payload = data[0], data[1], data[2:]
    shape, compression = opts & 3, (None, "gzip", "zlib")[(opts >> 2) % 3]
    if shape == 0:
        # Hostile bytes straight in; with a compression named, hostile compressed bytes.
        return payload, compression or "auto"
    content = bytearray(_framing_py.encode_frames(payload.split(b"|")))
    if shape == 2:
        content[(knob * 7919) % len(content)] ^= 1 << (knob % 8)
    if compression == "gzip":
        content = bytearray(gzip.compress(bytes(content), mtime=0))
    elif compression == "zlib":
        content = bytearray(zlib.compress(bytes(content)))
    if shape == 3:
        del content[len(content) - 1 - knob % len(content):]
    return bytes(content), "auto"


def TestOneInput(data):
    if len(data) < 2:
        return
    content, compression = content_of(data)
    kw = dict(compression=compression, check_crc=not data[0] & 0x20,
              on_corrupt=ON_CORRUPT[(data[0] >> 6) % 3])
    step = data[1] % 37 + 1
    batch_size = data[1] % 5 + 1

    def two_ways():
        whole = read(tfl.TFRecordReader(content, **kw))
        # One other way per input, so each run stays cheap; the fuzzer varies the choice.
        name = ("stream", "record_batches", "stream record_batches")[data[1] % 3]
        source = content if name == "record_batches" else Trickle(content, step)
        other = read(tfl.TFRecordReader(source, chunk_size=64 + step, **kw),
                     batch_size if name.endswith("record_batches") else None)
        if name.endswith("record_batches") and whole[1] is not None:
            # An error ends iteration, so the records of the unfinished batch are not yielded.
            kept = len(other[0])
            assert other[1:] == whole[1:] and other[0] == whole[0][:kept] and len(whole[0]) - kept < batch_size, (
                f"{kw}: the buffer gave {whole!r}, {name} gave {other!r}")
        else:
            assert other == whole, f"{kw}: the buffer gave {whole!r}, {name} gave {other!r}"
        return whole

    on_both(two_ways)


if __name__ == "__main__":
    fuzz(TestOneInput)
