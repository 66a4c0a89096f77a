"""The tfrecord-lite command's input arguments and reading options, alike in every command:
globs and directories as FILE, --on-corrupt and its hints, to-parquet's --sample and --spec,
and how it ends on Ctrl-C."""

import os
import subprocess
import sys

import pytest

import tfrecord_lite as tfl
from tfrecord_lite.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, records, compression=None):
    with tfl.TFRecordWriter(path, compression) as w:
        w.write_many(records)
    return str(path)


def _examples(start, n):
    return [tfl.encode_example({"id": i, "name": f"n{i}"}) for i in range(start, start + n)]


@pytest.fixture
def parts(tmp_path):
    """data/ with three files (one gzip), an index sidecar and a hidden file."""
    d = tmp_path / "data"
    paths = [_write(d / "a.tfrecord", _examples(0, 3)), _write(d / "b.tfrecord.gz", _examples(3, 4), "gzip"),
             _write(d / "c.tfrecord", _examples(7, 5))]
    tfl.build_index(paths[0])
    (d / ".hidden").write_bytes(b"not a record file")
    return d, paths


@pytest.mark.parametrize("form", ["directory", "glob"])
def test_every_command_reading_files_takes_a_directory_or_a_glob(backend, parts, tmp_path, capfd, form):
    d, paths = parts
    arg = str(d) if form == "directory" else str(d / "*.tfrecord*")
    assert main(["count", arg]) == 0
    assert capfd.readouterr().out.splitlines() == [f"3\t{paths[0]}", f"4\t{paths[1]}", f"5\t{paths[2]}", "12\ttotal"]
    assert main(["verify", arg]) == 0
    assert capfd.readouterr().out.count("OK\t") == 3
    assert main(["stats", arg]) == 0
    assert capfd.readouterr().out.startswith("12 records")
    assert main(["schema", arg, "--format", "python"]) == 0
    assert "'id'" in capfd.readouterr().out
    out = tmp_path / "all.tfrecord"
    assert main(["merge", arg, "-o", str(out)]) == 0
    assert len(list(tfl.TFRecordReader(str(out)))) == 12
    assert main(["cat", arg, "-o", str(tmp_path / "cat.tfrecord")]) == 0
    assert list(tfl.TFRecordReader(str(tmp_path / "cat.tfrecord"))) == list(tfl.TFRecordReader(str(out)))
    parquet = tmp_path / "all.parquet"
    assert main(["to-parquet", arg, "-o", str(parquet)]) == 0
    assert "12 rows, 3 file(s)" in capfd.readouterr().err
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_table(parquet).column("id").to_pylist() == list(range(12))


def test_a_file_named_like_a_glob_is_itself_and_an_empty_match_is_an_error(backend, tmp_path, capfd):
    literal = _write(tmp_path / "x[1].tfrecord", [b"r"] * 2)
    assert main(["count", literal]) == 0
    assert capfd.readouterr().out == f"2\t{literal}\n"
    for arg in (str(tmp_path / "none-*.tfrecord"), str(tmp_path / "empty")):
        os.makedirs(tmp_path / "empty", exist_ok=True)
        assert main(["to-parquet", arg, "-o", str(tmp_path / "o.parquet")]) == 1
        assert "no TFRecord files found" in capfd.readouterr().err
    assert not (tmp_path / "o.parquet").exists()
