"""The tfrecord-lite command: merge, split, index, cat (and progress on count/verify),
through main(argv) in-process and through a real subprocess."""

import os
import subprocess
import sys

import pytest

from tfrecord_lite import TFRecordReader, TFRecordWriter
from tfrecord_lite.cli import main
from tfrecord_lite.index import build_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, records, compression=None):
    with TFRecordWriter(path, compression) as w:
        w.write_many(records)
    return str(path)


def _run(*argv, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], capture_output=True,
                          env=env, **kw)


def test_merge_split_index(backend, tmp_path, capfd):
    a = _write(tmp_path / "a.tfrecord", [b"a1", b"a2"])
    b = _write(tmp_path / "b.tfrecord.gz", [b"b1", b"b2", b"b3"], "gzip")
    out = str(tmp_path / "m.tfrecord")
    assert main(["merge", a, b, "-o", out, "--verify", "--index"]) == 0
    assert "5 records, 2 files" in capfd.readouterr().err
    assert list(TFRecordReader(out)) == [b"a1", b"a2", b"b1", b"b2", b"b3"]
    assert open(out + ".index").read() == open(build_index(out, out + ".chk")).read()

    assert main(["split", out, "-n", "2", "--prefix", str(tmp_path / "s"), "--compression", "gzip"]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines == [f"3\t{tmp_path}/s-00000-of-00002.tfrecord", f"2\t{tmp_path}/s-00001-of-00002.tfrecord"]
    assert list(TFRecordReader(tmp_path / "s-00001-of-00002.tfrecord")) == [b"b2", b"b3"]

    os.unlink(out + ".index")
    assert main(["index", out]) == 0
    assert capfd.readouterr().out == f"5\t{out}.index\n"
    assert open(out + ".index").read() == open(out + ".chk").read()


def test_cat_decompresses_and_recompresses(backend, tmp_path):
    raw = _write(tmp_path / "r.tfrecord", [b"x" * 10, b"y"])
    gz = _write(tmp_path / "r.tfrecord.gz", [b"x" * 10, b"y"], "gzip")
    assert main(["cat", gz, "-o", str(tmp_path / "plain")]) == 0
    assert (tmp_path / "plain").read_bytes() == open(raw, "rb").read()
    assert main(["cat", raw, "--compression", "gzip", "-o", str(tmp_path / "again.gz")]) == 0
    assert (tmp_path / "again.gz").read_bytes() == open(gz, "rb").read()


def test_cat_to_stdout_subprocess(tmp_path):
    raw = _write(tmp_path / "r.tfrecord", [b"1", b"22"])
    gz = _write(tmp_path / "g.tfrecord.gz", [b"333"], "gzip")
    proc = _run("cat", raw, gz)
    assert proc.returncode == 0, proc.stderr
    assert list(TFRecordReader(proc.stdout)) == [b"1", b"22", b"333"]
    assert proc.stderr == b""  # no progress bar when stderr is not a terminal


def test_errors_are_one_line_and_nonzero(backend, tmp_path, capfd):
    gz = _write(tmp_path / "g.tfrecord.gz", [b"1"], "gzip")
    assert main(["index", gz]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "cannot be indexed" in err and "cat" in err
    assert main(["merge", str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capfd.readouterr().err
    bad = tmp_path / "bad.tfrecord"
    _write(bad, [b"z" * 40] * 3)
    data = bytearray(bad.read_bytes())
    data[70] ^= 1
    bad.write_bytes(bytes(data))
    assert main(["merge", str(bad), "-o", str(tmp_path / "o"), "--verify"]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "record 1" in err and str(bad) in err
    assert not (tmp_path / "o").exists()


def test_help_texts_have_examples():
    for cmd in ("merge", "split", "index", "cat"):
        proc = _run(cmd, "--help")
        assert proc.returncode == 0
        assert b"examples:" in proc.stdout and b"tfrecord-lite " + cmd.encode() in proc.stdout


def test_subprocess_split_and_merge_round_trip(tmp_path):
    src = _write(tmp_path / "d.tfrecord", [b"%d" % i for i in range(20)])
    assert _run("split", src, "-n", "3").returncode == 0
    shards = sorted(str(p) for p in tmp_path.glob("d-*-of-00003.tfrecord"))
    assert len(shards) == 3
    assert _run("merge", *shards, "-o", str(tmp_path / "back.tfrecord")).returncode == 0
    assert (tmp_path / "back.tfrecord").read_bytes() == open(src, "rb").read()
    proc = _run("count", *shards)
    assert proc.stdout.decode().splitlines()[-1] == "20\ttotal"
