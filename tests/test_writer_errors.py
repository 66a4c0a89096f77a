"""TFRecordWriter: failures on the way (the sidecar's writes) and TensorFlow's writer options."""

import os

import pytest

from tfrecord_lite import TFRecordError, TFRecordReader, TFRecordWriter
from tfrecord_lite.io import NamedWriter


def test_a_failed_sidecar_write_is_never_committed(backend, tmp_path, monkeypatch):
    """The sidecar took part of its lines and then failed (a full disk): the core hands the
    lines again on its next drain, so a caller who caught the error and closed committed a
    sidecar with lines twice, which does not describe the file. close() now raises and
    leaves neither file."""
    path = tmp_path / "a.tfrecord"
    write = NamedWriter.write
    failures = [1]

    def flaky(self, data):
        if failures and self._name().endswith(".index"):
            failures.pop()
            write(self, bytes(data)[: len(data) // 2])
            self.flush()
            raise OSError(28, "No space left on device")
        return write(self, data)

    monkeypatch.setattr(NamedWriter, "write", flaky)
    w = TFRecordWriter(path, index=True)
    w.write_many([b"x" * 10] * 10)
    with pytest.raises(OSError, match="No space left"):
        w.flush()
    w.write(b"y")
    with pytest.raises(TFRecordError, match=r"a\.tfrecord.*an earlier write to the file failed \(OSError:"):
        w.close()
    assert os.listdir(tmp_path) == []
