"""The tfrecord-lite command: demo, count, verify, head (in-process and as a program)."""

import os
import subprocess
import sys

import pytest

from tfrecord_lite import TFRecordWriter
from tfrecord_lite.cli import main


def write(path, records, compression=None):
    with TFRecordWriter(path, compression=compression) as w:
        w.write_many(records)
    return str(path)


def test_demo_as_a_program():
    out = subprocess.run([sys.executable, "-m", "tfrecord_lite", "demo", "--records", "400"],
                         capture_output=True, text=True, check=True)
    assert "all 400 records verified" in out.stdout
    assert "records/s" in out.stdout and "MB/s" in out.stdout


def test_demo_in_process(backend, capsys):
    assert main(["demo", "--records", "200", "--shards", "2"]) == 0
    out = capsys.readouterr().out
    assert f"({backend.name} core" in out and "all 200 records verified" in out


def test_count(backend, tmp_path, capsys):
    a = write(tmp_path / "a.tfrecord", [b"x"] * 3)
    b = write(tmp_path / "b.tfrecord.gz", [b"y"] * 5, "gzip")
    assert main(["count", a, b]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"3\t{a}", f"5\t{b}", "8\ttotal"]


def test_verify_reports_each_bad_record(backend, tmp_path, capsys):
    good = write(tmp_path / "good.tfrecord", [b"a" * 10] * 4)
    data = bytearray(open(good, "rb").read())
    data[26 + 12] ^= 1   # record 1's data
    data[78 + 12] ^= 1   # record 3's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    assert main(["verify", good]) == 0
    capsys.readouterr()
    assert main(["verify", good, str(bad)]) == 1
    out = capsys.readouterr().out
    corrupt = [line for line in out.splitlines() if line.startswith("CORRUPT")]
    assert len(corrupt) == 2
    assert "record 1" in corrupt[0] and "byte offset 26" in corrupt[0] and str(bad) in corrupt[0]
    assert "record 3" in corrupt[1] and "byte offset 78" in corrupt[1]
    assert f"2 bad\t2 good records\t{bad}" in out


def test_head_shows_sizes_and_preview(backend, tmp_path, capsys):
    path = write(tmp_path / "h.tfrecord", [b"\x01\x02\x03", b"", b"z" * 100])
    assert main(["head", path, "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "record 0: 3 bytes" in out and "01 02 03" in out
    assert "record 1: 0 bytes" in out and "record 2" not in out


def test_errors_are_one_line_with_advice(backend, tmp_path, capsys):
    path = tmp_path / "trunc.tfrecord"
    path.write_bytes(open(write(tmp_path / "x", [b"abc" * 10]), "rb").read()[:-3])
    assert main(["count", str(path)]) == 1
    err = capsys.readouterr().err
    assert "truncated record at 0" in err and "on_corrupt" in err
    assert main(["count", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_help_for_every_command():
    for command in ("demo", "count", "verify", "head"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
