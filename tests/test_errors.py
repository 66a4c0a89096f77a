"""The error hierarchy: every error keeps its location and hint through pickling (process
pools and DataLoader workers re-raise errors in another process)."""

import pickle

import pytest

import tfrecord_lite as tfl


@pytest.mark.parametrize("cls", [getattr(tfl, name) for name in tfl.errors.__all__])
def test_errors_pickle_with_every_attribute(cls):
    extra = {"item": 7, "shard": 2} if cls is tfl.EncodeError else {}
    err = cls("it broke", path="a.tfrecord", offset=123, index=4, hint="do this", **extra)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls and str(clone) == str(err)
    for attr in ("detail", "path", "offset", "index", "hint", *extra):
        assert getattr(clone, attr) == getattr(err, attr), attr
    assert "a.tfrecord, record 4, byte offset 123: it broke. Do this" == str(clone)


def test_bad_arguments_to_the_core_are_invalid_argument_errors(backend):
    frames = bytes(backend.framing.encode_frames([b"a", b"bc"]))
    for call in (lambda: backend.framing.scan_frames(frames, len(frames) + 1),
                 lambda: backend.framing.scan_spans(frames, -1),
                 lambda: backend.framing.scan_block(frames, 99)):
        with pytest.raises(tfl.InvalidArgumentError, match="outside") as info:
            call()
        assert isinstance(info.value, ValueError)


def test_a_hint_is_its_own_sentence(backend, tmp_path):
    """Hints, written lowercase to be joined, were appended after a full stop as they were:
    '... stream). the compressed file is truncated'. The hint now starts with a capital, and a
    detail that ends its own sentence gets no second full stop."""
    import gzip

    path = tmp_path / "cut.tfrecord.gz"
    path.write_bytes(gzip.compress(bytes(backend.framing.encode_frames([b"x" * 500] * 4)))[:-30])
    with pytest.raises(tfl.DataLossError) as info:
        list(tfl.TFRecordReader(path, compression="gzip"))
    text = str(info.value)
    assert "The compressed file is truncated" in text and ". the" not in text, text
    err = tfl.TFRecordError("it broke.", path="a.tfrecord", hint="do this")
    assert str(err) == "a.tfrecord: it broke. Do this"
