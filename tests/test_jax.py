"""JAX: batches go to a device with jax.device_put, and tfrecord_lite.jax.device_put takes
batches with bytes features too.

JAX starts threads when imported, and a process that has them must not fork (the torch
DataLoader tests fork workers), so each test runs its body in a fresh interpreter."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tfrecord_lite as tfl
from tests._records import write_files
from tests.test_torch import SPEC

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _isolated(name, tmp_path):
    code = f"import pathlib; from tests import test_jax; test_jax.{name}(pathlib.Path({str(tmp_path)!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr[-3000:]


def test_jax_device_put(tmp_path):
    _isolated("_check_device_put", tmp_path)


def test_jax_helper_moves_numbers_and_keeps_or_drops_bytes(tmp_path):
    _isolated("_check_helper_moves_numbers_and_keeps_or_drops_bytes", tmp_path)


def _check_device_put(tmp_path):
    import jax  # a test dependency: missing jax fails this test rather than skipping it

    from tfrecord_lite import TFRecordDataset

    paths = write_files(tmp_path, [10])
    ds = TFRecordDataset(paths, batch_size=4,
                         parse=lambda recs: {"len": np.array([len(r) for r in recs], np.int32)})
    out = [jax.device_put(b) for b in ds]
    assert [int(b["len"].sum()) for b in out] == [16, 16, 8]


def _check_helper_moves_numbers_and_keeps_or_drops_bytes(tmp_path):
    import jax

    from tfrecord_lite.jax import device_put

    spec = {**SPEC, "score": tfl.RaggedFeature(np.float32), "words": tfl.VarLenFeature(bytes)}
    records = [tfl.encode_example({"id": i, "name": f"n{i}", "tags": list(range(i % 3)),
                                   "score": [i / 2] * (i % 2), "words": [b"w"] * i}) for i in range(5)]
    batch = tfl.parse_example(records, spec)
    with pytest.raises(TypeError):
        jax.device_put(batch)  # what the helper is for
    cpu = jax.devices("cpu")[0]
    kept = device_put(batch, cpu)
    assert isinstance(kept["id"], jax.Array) and kept["id"].tolist() == list(range(5))
    assert kept["id"].devices() == {cpu}
    assert isinstance(kept["tags"], tfl.SparseTensorValue)
    assert all(isinstance(part, jax.Array) for part in kept["tags"])
    assert kept["tags"].values.tolist() == batch["tags"].values.tolist()
    assert isinstance(kept["score"].row_splits, jax.Array) and kept["score"].to_list() == batch["score"].to_list()
    assert kept["name"] is batch["name"]  # bytes stay on the host, as NumPy
    assert kept["words"].values is batch["words"].values and isinstance(kept["words"].indices, jax.Array)
    dropped = device_put(batch, bytes="drop")
    assert sorted(dropped) == ["id", "score", "tags"]
    # Lists and tuples (raw records beside arrays, sequence examples) go through too.
    pair = device_put(([b"raw", b"records"], {"x": np.ones(3, np.float32)}), bytes="drop")
    assert isinstance(pair, tuple) and len(pair) == 1 and float(pair[0]["x"].sum()) == 3.0
    # Bytes as one values buffer (bytes_output="column") and raw batches stay on the host too.
    columns = tfl.parse_example(records, spec, bytes_output="column")
    kept = device_put(columns, cpu)
    assert kept["name"] is columns["name"] and kept["words"].values is columns["words"].values
    assert isinstance(kept["id"], jax.Array) and sorted(device_put(columns, bytes="drop")) == ["id", "score", "tags"]
    raw = next(iter(tfl.TFRecordDataset(write_files(tmp_path, [6]), batch_size=4)))
    assert device_put(raw) is raw and device_put({"raw": raw, "n": np.arange(2)}, bytes="drop").keys() == {"n"}
    with pytest.raises(tfl.errors.TFRecordError, match="'host' or 'drop'"):
        device_put(batch, bytes="keep")


def test_jax_helper_moves_big_endian_arrays(tmp_path):
    _isolated("_check_helper_moves_big_endian_arrays", tmp_path)


def _check_helper_moves_big_endian_arrays(tmp_path):
    # A RawTensorFeature of dtype '>f4' gives a big-endian array, which jax.device_put refused
    # ("Dtype >f4 is not a valid JAX array type"); the helper raised that TypeError.
    import jax

    from tfrecord_lite.jax import device_put

    values = np.arange(6, dtype=">f4").reshape(2, 3)
    records = [tfl.encode_example({"r": row.tobytes()}) for row in values]
    batch = tfl.parse_example(records, {"r": tfl.RawTensorFeature([3], np.dtype(">f4"))})
    assert batch["r"].dtype == np.dtype(">f4")
    moved = device_put(batch)
    assert isinstance(moved["r"], jax.Array) and moved["r"].dtype == np.float32
    assert moved["r"].tolist() == values.tolist()


def test_jax_helper_keeps_named_tuples(tmp_path):
    _isolated("_check_helper_keeps_named_tuples", tmp_path)


def _check_helper_keeps_named_tuples(tmp_path):
    # A parse function's batch as a named tuple (a common pytree) raised TypeError: it was
    # rebuilt from one generator argument. It stays its type; a field of bytes "drop" leaves
    # out becomes None, as a named tuple cannot lose a field.
    import collections

    import jax

    from tfrecord_lite.jax import device_put

    Batch = collections.namedtuple("Batch", "x names y")
    batch = Batch(np.arange(3), np.array([b"a", b"b", b"c"], object), np.ones(2, np.float32))
    kept = device_put(batch)
    assert type(kept) is Batch and isinstance(kept.x, jax.Array) and kept.names is batch.names
    assert kept.x.tolist() == [0, 1, 2] and isinstance(kept.y, jax.Array)
    dropped = device_put(batch, bytes="drop")
    assert type(dropped) is Batch and dropped.names is None and dropped.y.tolist() == [1.0, 1.0]


def test_jax_helper_refuses_int64_values_that_32_bits_would_wrap(tmp_path):
    _isolated("_check_helper_refuses_int64_values_that_32_bits_would_wrap", tmp_path)


def _check_helper_refuses_int64_values_that_32_bits_would_wrap(tmp_path):
    # Without jax_enable_x64 (JAX's default) jax.device_put makes int32 of int64 arrays and
    # wraps what does not fit, silently: a millisecond timestamp 1,700,000,000,000 arrived as
    # -807,049,216 on the device. Example integers are all int64.
    import jax

    from tfrecord_lite.jax import device_put

    stamps = [1_700_000_000_000, 5]
    records = [tfl.encode_example({"t": t, "ts": [t, -t], "small": [2**31 - 1, -2**31]}) for t in stamps]
    spec = {"t": tfl.FixedLenFeature([], np.int64), "ts": tfl.VarLenFeature(np.int64),
            "small": tfl.RaggedFeature(np.int64)}
    batch = tfl.parse_example(records, spec)
    assert int(np.asarray(jax.device_put(batch["t"]))[0]) != stamps[0]  # what JAX does
    for name in ("t", "ts"):
        with pytest.raises(tfl.errors.InvalidArgumentError,
                           match=f"feature '{name}' holds int64 values outside int32's range") as info:
            device_put({name: batch[name]})
        assert "jax_enable_x64" in info.value.hint
    moved = device_put({"small": batch["small"], "u": np.array([2**32 - 1], np.uint64)})  # fits: moved
    assert moved["small"].to_list() == [[2**31 - 1, -2**31]] * 2 and moved["u"].tolist() == [2**32 - 1]
    one = tfl.parse_single_example(records[0], {"t": spec["t"]})  # a NumPy scalar
    with pytest.raises(tfl.errors.InvalidArgumentError, match="feature 't' holds int64"):
        device_put(one)
    with pytest.raises(tfl.errors.InvalidArgumentError, match="feature 'u' holds uint64"):
        device_put({"u": np.array([2**32], np.uint64)})
    jax.config.update("jax_enable_x64", True)
    assert device_put(batch)["t"].tolist() == stamps


def test_jax_helper_errors_name_the_feature(tmp_path):
    _isolated("_check_helper_errors_name_the_feature", tmp_path)


def _check_helper_errors_name_the_feature(tmp_path):
    # With a sharding that splits the batch, a ragged feature's row_splits (batch + 1 long)
    # failed with JAX's "does not evenly divide the dimension size 9", naming no feature and
    # not saying why; a dtype JAX has no arrays of failed naming none either.
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from tfrecord_lite.jax import device_put

    records = [tfl.encode_example({"id": i, "v": list(range(i))}) for i in range(8)]
    batch = tfl.parse_example(records, {"id": tfl.FixedLenFeature([], np.int64), "v": tfl.RaggedFeature(np.int64)})
    sharding = NamedSharding(jax.make_mesh((4,), ("b",)), PartitionSpec("b"))
    with pytest.raises(tfl.errors.InvalidArgumentError, match="feature 'v' cannot go to NamedSharding") as info:
        device_put(batch, sharding)
    assert isinstance(info.value, ValueError) and "sparse or ragged feature" in info.value.hint
    assert len(device_put({"id": batch["id"]}, sharding)["id"].sharding.device_set) == 4
    with pytest.raises(tfl.errors.ArgumentTypeError, match="feature 'd' cannot go to a JAX device") as info:
        device_put({"d": np.array(["2020-01-01"], "M8[D]")})
    assert isinstance(info.value, TypeError) and "numeric arrays only" in info.value.hint
