"""The table subcommands of tfrecord-lite: schema, stats, to-parquet, through main(argv)
in-process on both backends and as a real program."""

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import tfrecord_lite as tfl
from tfrecord_lite.arrow import read_table
from tfrecord_lite.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def files(tmp_path):
    paths = []
    for f in range(2):
        path = str(tmp_path / f"part{f}.tfrecord")
        with tfl.TFRecordWriter(path) as w:
            for j in range(50):
                i = 50 * f + j
                mapping = {"id": i, "xy": [i / 4, 1.0], "name": f"n{i}"}
                if i % 5:
                    mapping["tags"] = [b"t"] * (i % 5)
                w.write(tfl.encode_example(mapping))
        paths.append(path)
    return paths


def test_schema_formats(backend, files, capfd):
    assert main(["schema", *files]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[0].split() == ["feature", "spec", "dtype", "shape"]
    assert [line.split() for line in lines[1:]] == [
        ["id", "FixedLenFeature", "int64", "[]"], ["name", "FixedLenFeature", "string", "[]"],
        ["tags", "VarLenFeature", "string"], ["xy", "FixedLenFeature", "float32", "[2]"]]
    assert main(["schema", files[0], "--format", "tf"]) == 0
    assert "'xy': tf.io.FixedLenFeature([2], tf.float32)," in capfd.readouterr().out
    assert main(["schema", *files, "--format", "json"]) == 0
    assert json.loads(capfd.readouterr().out)["tags"] == {"type": "VarLenFeature", "dtype": "string", "shape": None}
    assert main(["schema", *files, "--format", "python"]) == 0
    scope = {}
    exec(capfd.readouterr().out, scope)
    assert scope["features"] == tfl.infer_schema(files[0]) and backend.name == tfl.implementation


def test_schema_of_sequence_examples_in_every_format(backend, tmp_path, capfd):
    # infer_schema gives a SequenceSchema here, which the table, json and python formats
    # took for a mapping: AttributeError and a traceback
    path = str(tmp_path / "seq.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        for i in range(3):
            w.write(tfl.encode_sequence_example({"label": i}, {"frames": [[1.0, 2.0]] * i, "ids": [[i]] * (i % 2)}))
    inferred = tfl.infer_schema(path)
    assert main(["schema", path]) == 0
    assert [line.split() for line in capfd.readouterr().out.splitlines()] == [
        ["context:"], ["feature", "spec", "dtype", "shape"], ["label", "FixedLenFeature", "int64", "[]"],
        ["feature", "lists:"], ["feature", "spec", "dtype", "shape"],
        ["frames", "FixedLenSequenceFeature", "float32", "[2]"], ["ids", "FixedLenSequenceFeature", "int64", "[]"]]
    assert main(["schema", path, "--format", "json"]) == 0
    parts = json.loads(capfd.readouterr().out)
    assert parts["context"] == {"label": {"type": "FixedLenFeature", "dtype": "int64", "shape": []}}
    assert parts["feature_lists"]["frames"] == {"type": "FixedLenSequenceFeature", "dtype": "float32", "shape": [2]}
    assert main(["schema", path, "--format", "python"]) == 0
    scope = {}
    exec(capfd.readouterr().out, scope)
    assert (scope["context_features"], scope["sequence_features"]) == inferred
    assert main(["schema", path, "--format", "tf"]) == 0
    assert capfd.readouterr().out == "import tensorflow as tf\n\n" + inferred.to_tf_code() + "\n"
    assert backend.name == tfl.implementation


def test_stats(backend, files, tmp_path, capfd):
    assert main(["stats", *files, "--progress"]) == 0
    out, err = capfd.readouterr()
    lines = out.splitlines()
    nbytes = sum(os.path.getsize(p) for p in files)
    assert lines[0] == f"100 records, {nbytes} bytes in 2 file(s)" and "stats" in err
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows["tags"] == ["string", "80", "80.0%", str(sum(i % 5 for i in range(100))), "1", "4"]
    assert rows["xy"] == ["float32", "100", "100.0%", "200", "2", "2"]
    assert main(["stats", files[1], "--format", "json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["records"] == 50 and report["features"]["id"]["values"] == 50
    # share was the text column's "100.0%"; JSON carries the fraction
    assert report["features"]["id"]["share"] == 1.0
    assert report["features"]["tags"]["share"] == report["features"]["tags"]["present"] / 50 < 1
    bad = str(tmp_path / "bad.tfrecord")
    with tfl.TFRecordWriter(bad) as w:
        w.write_many([tfl.encode_example({"a": 1}), b"\xff\xff"])
    assert main(["stats", bad]) == 1
    err = capfd.readouterr().err
    assert f"{bad}, record 1" in err and backend.name == tfl.implementation


def test_stats_of_a_feature_only_ever_empty(backend, tmp_path, capfd):
    # A Feature with no list set has no dtype: JSON said "dtype": "-", a string no type is.
    entry = b"\x0a\x01e\x12\x00"  # feature "e": Feature {}
    path = str(tmp_path / "e.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write(b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry)
    assert main(["stats", path, "--format", "json"]) == 0
    assert json.loads(capfd.readouterr().out)["features"]["e"]["dtype"] is None
    assert main(["stats", path]) == 0
    assert capfd.readouterr().out.splitlines()[2].split() == ["e", "-", "1", "100.0%", "0", "0", "0"]
    assert backend.name == tfl.implementation


def test_schema_and_stats_name_a_record_that_is_not_an_example_alike(backend, tmp_path, capfd):
    # schema said "malformed SequenceExample" where stats says "malformed Example".
    path = str(tmp_path / "bad.tfrecord")
    first = tfl.encode_example({"a": 1})
    with tfl.TFRecordWriter(path) as w:
        w.write_many([first, b"\x0a\x05garbage"])
    said = []
    for command in ("schema", "stats"):
        assert main([command, path]) == 1
        err = capfd.readouterr().err
        assert f"{path}, record 1, byte offset {16 + len(first)}: malformed Example: " in err, err
        said.append(err.split(": malformed ")[1].split(". ")[0].rstrip())
    assert said[0] == said[1]


def test_stats_counts_a_sequence_examples_feature_lists(backend, tmp_path, capfd):
    # A SequenceExample decodes as an Example of its context: its feature lists went uncounted
    path = str(tmp_path / "seq.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        for i in range(4):
            lists = {"frames": [[1.0, 2.0]] * i}
            if i % 2:
                lists["ids"] = [[i]] * i
            w.write(tfl.encode_sequence_example({"label": i}, lists))
    assert main(["stats", path]) == 0
    assert [line.split() for line in capfd.readouterr().out.splitlines()[1:]] == [
        ["context:"], ["feature", "dtype", "present", "share", "values", "min/rec", "max/rec"],
        ["label", "int64", "4", "100.0%", "4", "1", "1"],
        ["feature", "lists:"], ["feature", "dtype", "present", "share", "values", "min/rec", "max/rec"],
        ["frames", "float32", "4", "100.0%", "12", "0", "6"], ["ids", "int64", "2", "50.0%", "4", "1", "3"]]
    assert main(["stats", path, "--format", "json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["features"]["label"]["values"] == 4
    assert report["feature_lists"]["ids"] == {"dtype": "int64", "present": 2, "share": 0.5, "values": 4,
                                              "min_values": 1, "max_values": 3}
    assert backend.name == tfl.implementation


def test_to_parquet(backend, files, tmp_path, capfd):
    out = str(tmp_path / "all.parquet")
    assert main(["to-parquet", *files, "-o", out, "--batch-size", "30"]) == 0
    assert "100 rows, 2 file(s)" in capfd.readouterr().err
    table = pq.read_table(out)
    assert table.equals(read_table(files, tfl.infer_schema(files[0])))
    assert pq.ParquetFile(out).metadata.num_row_groups == 4
    some = str(tmp_path / "some.parquet")
    # "name, id" asked for a feature named " id"
    assert main(["to-parquet", files[1], "-o", some, "--columns", " name, id,", "--codec", "zstd"]) == 0
    picked = pq.read_table(some)
    assert picked.column_names == ["name", "id"] and picked.column("id").to_pylist() == list(range(50, 100))
    assert pq.ParquetFile(some).metadata.row_group(0).column(0).compression == "ZSTD"
    nothing = tmp_path / "nothing.parquet"
    assert main(["to-parquet", *files, "-o", str(nothing), "--columns", "id,nope"]) == 1
    assert "'nope'" in capfd.readouterr().err and not nothing.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert backend.name == tfl.implementation


@pytest.mark.parametrize("codec", ["nope", "bz2", "lzo"])
def test_to_parquet_refuses_a_codec_parquet_cannot_write(backend, files, tmp_path, capfd, codec):
    # An unknown codec ended in pyarrow's ArrowException and a traceback; lzo, which Arrow's
    # Parquet writer knows but cannot write, was blamed on "the path, permissions and free space".
    out = tmp_path / "out.parquet"
    assert main(["to-parquet", *files, "-o", str(out), "--codec", codec]) == 1
    err = capfd.readouterr().err
    assert err.startswith(f"tfrecord-lite to-parquet: Parquet codec '{codec}' cannot be used")
    assert "zstd" in err and "Traceback" not in err and "free space" not in err and err.count("\n") == 1
    assert not out.exists()
    from tfrecord_lite.arrow import write_parquet

    with pytest.raises(tfl.InvalidArgumentError, match=codec):
        write_parquet(files, str(out), codec=codec)
    assert not out.exists() and backend.name == tfl.implementation


def test_to_parquet_into_a_directory_suggests_a_parquet_name(backend, files, tmp_path, capfd):
    # It suggested DIR/out.tfrecord.
    for out in (str(tmp_path), str(tmp_path / "new") + os.sep):
        assert main(["to-parquet", *files, "-o", out]) == 1
        err = capfd.readouterr().err
        assert "names a directory" in err and os.path.join(out, "out.parquet") in err and ".tfrecord" not in err
    assert backend.name == tfl.implementation


def test_commands_as_a_program(files, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = str(tmp_path / "t.parquet")
    for argv in (["schema", files[0], "--format", "tf"], ["stats", *files], ["to-parquet", *files, "-o", out]):
        done = subprocess.run([sys.executable, "-m", "tfrecord_lite", *argv], capture_output=True, text=True,
                              env=env, check=True)
        assert done.stdout or done.stderr
    assert pq.read_table(out).column("id").to_pylist() == list(range(100))
    assert np.array_equal(pq.read_table(out).column("xy").to_pylist()[3], [0.75, 1.0])


def test_schema_marks_a_feature_only_ever_empty(backend, tmp_path, capfd):
    entry = b"\x0a\x01e\x12\x00"  # feature "e": Feature {}
    path = str(tmp_path / "e.tfrecord")
    with tfl.TFRecordWriter(path) as w:
        w.write(b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry)
    assert main(["schema", path]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[1].split() == ["e", "VarLenFeature", "float32", "*"]
    assert lines[2] == "* only empty Features seen: any dtype parses it"
    assert main(["schema", path, "--format", "json"]) == 0  # still a spec --spec loads
    assert json.loads(capfd.readouterr().out) == {"e": {"type": "VarLenFeature", "dtype": "float32", "shape": None}}


def test_schema_of_files_that_disagree_on_a_type_names_both(backend, tmp_path, capfd):
    paths = [str(tmp_path / f"{n}.tfrecord") for n in "ab"]
    for path, value in zip(paths, ([1], [0.5])):
        with tfl.TFRecordWriter(path) as w:
            w.write_many([tfl.encode_example({"x": value})] * 2)
    assert main(["schema", *paths]) == 1
    err = capfd.readouterr().err
    assert err.startswith(f"tfrecord-lite schema: {paths[1]}, record 0, byte offset 0: feature 'x' has values of "
                          f"more than one type (float32, int64): float32 here, int64 in {paths[0]}, record 0, "
                          "byte offset 0. A spec gives each feature one type"), err


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_schema_of_files_without_records_fails_saying_so(backend, tmp_path, capfd, fmt):
    paths = [str(tmp_path / f"{n}.tfrecord") for n in "ab"]
    for path in paths:
        open(path, "wb").close()
    assert main(["schema", paths[0], "--format", fmt]) == 1
    captured = capfd.readouterr()
    assert captured.out == ""  # no empty spec for `> spec.json` to keep
    assert captured.err.startswith(f"tfrecord-lite schema: no records in {paths[0]}: no feature spec to infer. "
                                   "Pass files that hold records"), captured.err
    assert main(["schema", *paths]) == 1
    assert "no records in any of the 2 files" in capfd.readouterr().err
