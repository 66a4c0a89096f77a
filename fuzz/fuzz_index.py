"""Fuzz random access: TFRecordFile and IndexedDataset over a small file with a hostile
index sidecar (a mutated valid one, arbitrary bytes, or 'offset length' lines of
fuzz-chosen integers, huge and negative ones included) or none, and sometimes a damaged
data file. Every access gives the records or a TFRecordError, never anything else, and
both backends agree; with a valid sidecar and an intact file the records are exact.
"""

import atexit
import os
import shutil
import tempfile

import atheris

with atheris.instrument_imports(include=["tfrecord_lite"]):
    import tfrecord_lite as tfl
    from tfrecord_lite import _framing_py
from _common import fuzz, on_both

WORK = tempfile.mkdtemp(prefix="tfl-fuzz-index-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
atexit.register(shutil.rmtree, WORK, True)
PATH = os.path.join(WORK, "data.tfrecord")
SIDECAR = PATH + ".index"


def sidecar_text(fdp, offsets, lengths):
    mode = fdp.ConsumeIntInRange(0, 3)
    if mode == 0:
        text = bytearray(b"".join(b"%d %d\n" % (o, n) for o, n in zip(offsets, lengths)))
        for _ in range(fdp.ConsumeIntInRange(0, 3)):
            if text:
                text[fdp.ConsumeIntInRange(0, len(text) - 1)] = fdp.PickValueInList(list(b"0123456789 -\n+x"))
        return bytes(text)
    if mode == 1:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))
    if mode == 2:
        numbers = fdp.ConsumeIntListInRange(2 * fdp.ConsumeIntInRange(0, 4), -2**64, 2**64)
        return " ".join(map(str, numbers)).encode()
    return None  # no sidecar: the file is scanned


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    records = [fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8)) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    content = bytearray(_framing_py.encode_frames(records))
    offsets, lengths, at = [], [], 0
    for r in records:
        offsets.append(at)
        lengths.append(len(r) + 16)
        at += len(r) + 16
    damaged = content and fdp.ConsumeIntInRange(0, 3) == 0
    if damaged:
        content[fdp.ConsumeIntInRange(0, len(content) - 1)] ^= 1 << fdp.ConsumeIntInRange(0, 7)
    sidecar = sidecar_text(fdp, offsets, lengths)
    check_crc = fdp.ConsumeBool()
    with open(PATH, "wb") as f:
        f.write(content)
    if sidecar is None:
        if os.path.exists(SIDECAR):
            os.remove(SIDECAR)
    else:
        with open(SIDECAR, "wb") as f:
            f.write(sidecar)

    def every_access():
        with tfl.TFRecordFile(PATH, check_crc=check_crc) as f:
            n = len(f)
            got = [f[i] for i in range(n)] + [f[-1] if n else None] + f[:] + f[::2] + f.read_range(n // 2, n)
        ds = tfl.IndexedDataset([PATH], check_crc=check_crc, max_open_files=1)
        try:
            return got, ds[list(range(len(ds)))[::-1]], ds[: len(ds)]
        finally:
            ds.close()

    result = on_both(every_access)
    exact = not damaged and (sidecar is None or sidecar == b"".join(b"%d %d\n" % p for p in zip(offsets, lengths)))
    if exact:
        n = len(records)
        want = records + records[-1:] + ([] if n else [None]) + records + records[::2] + records[n // 2:]
        assert result == ("ok", [want, records[::-1], records]), result


if __name__ == "__main__":
    fuzz(TestOneInput)
