"""The package is typed (py.typed, annotated public API): mypy --strict accepts a user script
written against it, and reports a script that misuses it."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

USER_SCRIPT = '''
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

import tfrecord_lite as tfl


def write_and_read(tmp: Path) -> list[bytes]:
    with tfl.TFRecordWriter(tmp / "a.tfrecord", compression="gzip") as w:
        w.write(b"one")
        w.write_many([b"two", bytearray(b"three"), memoryview(b"four")])
    with tfl.TFRecordWriter(io.BytesIO(), index=False) as mem:
        mem.write(np.zeros(4, np.uint8))
    reader = tfl.TFRecordReader(tmp / "a.tfrecord", on_corrupt="skip", check_crc=True)
    records: list[bytes] = list(reader)
    for batch in tfl.TFRecordReader(str(tmp / "a.tfrecord")).record_batches(2):
        records.extend(bytes(r) for r in batch)
    errors: list[tfl.TFRecordError] = reader.skipped
    return records + [str(e).encode() for e in errors]


def examples(tmp: Path) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "label": tfl.FixedLenFeature([], np.int64),
        "image": tfl.RawTensorFeature((2, 2), np.uint8),
        "tags": tfl.VarLenFeature("string"),
        "name": tfl.FixedLenFeature([], bytes, default_value=b""),
    }
    records = tfl.encode_examples({"label": np.arange(4), "image": np.zeros((4, 2, 2), np.uint8)},
                                  raw=("image",))
    one: bytes = tfl.encode_example({"label": 3, "tags": [b"a"]}, deterministic=True)
    seq: bytes = tfl.encode_sequence_example({"id": 1}, {"steps": [[1, 2], [3]]})
    context, lists = tfl.decode_sequence_example(seq)
    ctx, fl, lengths = tfl.parse_sequence_example([seq], {"id": tfl.FixedLenFeature([], np.int64)},
                                                  {"steps": tfl.VarLenFeature(np.int64)})
    parsed = tfl.parse_example(records + [one], spec)
    single = tfl.parse_single_example(one, {"label": tfl.FixedLenFeature([], np.int64)})
    decoded: dict[str, Any] = tfl.decode_example(one)
    with tfl.TFRecordWriter(tmp / "ex.tfrecord") as w:
        w.write_many(records)
    schema = tfl.infer_schema(tmp / "ex.tfrecord", sample=10)
    code: str = schema.to_code() + schema.to_tf_code()
    return {**parsed, **single, **decoded, **context, **lists, **ctx, **fl, **lengths, "code": code}


def many_files(tmp: Path) -> int:
    shards: list[tfl.ShardInfo] = tfl.write_parallel(range(10), lambda i: b"%d" % i, tmp / "w", 2,
                                                     num_workers=2, progress=False)
    with tfl.ShardedWriter(tmp / "s", num_shards=2) as sw:
        sw.write(b"x", key="k")
        sw.write_many([b"y", b"z"])
    merged: tfl.ShardInfo = tfl.merge(shards, tmp / "all.tfrecord", verify=True)
    parts: list[tfl.ShardInfo] = tfl.split(merged.path, 2)
    sidecar: str = tfl.build_index(parts[0].path)
    f = tfl.TFRecordFile(parts[0].path, sidecar)
    first = f[0]
    ds = tfl.TFRecordDataset([p.path for p in parts], batch_size=4, shuffle_buffer=8, seed=0, shard=(0, 1))
    n = sum(1 for _ in ds)
    state: dict[str, Any] = ds.state_dict()
    ds.load_state_dict(state)
    indexed = tfl.IndexedDataset([p.path for p in parts])
    arrays = tfl.to_numpy(tmp / "ex.tfrecord", {"label": tfl.FixedLenFeature([], np.int64)})
    memmaps = tfl.to_npy(tmp / "ex.tfrecord", {"label": tfl.FixedLenFeature([], np.int64)}, tmp / "npy")
    crc: int = tfl.crc32c(b"abc") + tfl.masked_crc32c(b"abc")
    backend: str = tfl.implementation
    return n + len(f) + len(indexed) + len(arrays) + len(memmaps) + crc + len(backend) + len(first)
'''

MISUSE = '''
import tfrecord_lite as tfl

w = tfl.TFRecordWriter(42)
n: int = tfl.encode_example({"a": 1})
tfl.merge(["a.tfrecord"], "out.tfrecord", verify="yes")
tfl.TFRecordReader("x").no_such_method()
tfl.no_such_function()
'''


def _mypy(tmp_path, source):
    script = tmp_path / "user_script.py"
    script.write_text(source)
    env = dict(os.environ, PYTHONPATH=ROOT, MYPYPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental",
         "--cache-dir", str(tmp_path / "cache"), "--python-version", "3.10", str(script)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )


def test_mypy_strict_accepts_a_typed_user_script(tmp_path):
    done = _mypy(tmp_path, USER_SCRIPT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_mypy_reports_misuse(tmp_path):
    done = _mypy(tmp_path, MISUSE)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert 'user_script.py:4: error: Argument 1 to "TFRecordWriter" has incompatible type "int"' in out, out
    assert 'user_script.py:5: error: Incompatible types in assignment (expression has type "bytes", variable has type "int")' in out, out
    assert 'user_script.py:6: error: Argument "verify" to "merge" has incompatible type "str"' in out, out
    assert 'user_script.py:7: error: "TFRecordReader" has no attribute "no_such_method"' in out, out
    assert 'user_script.py:8: error: Module has no attribute "no_such_function"' in out, out


def test_the_package_ships_py_typed():
    assert os.path.isfile(os.path.join(ROOT, "tfrecord_lite", "py.typed"))
